"""One run of a lesson at a time: `build/<lesson>/.lock`, and what a dead run left behind.

The lock is an `flock` on the file, so the kernel lets it go however its run dies. Inside, the
run writes who it is (pid, start time, boot) and, as it goes, every process group it starts here
and its scratch folder. The next run that takes the lock of a run that died without letting go
ends each of those groups that is still that run's (the start time of the group's leader tells a
reused pid apart), and every process that left those groups but still carries the dead run's
mark in its environment (`process.MARK`), removes the scratch folder, says so, and turns the dead
run's record into a failed run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RunError
from ..record.files import describe
from ..record.store import Store
from .procfs import (
    MARK,
    boot_id,
    command_line,
    group_members,
    kill_all,
    kill_group,
    marked,
    start_time,
)

LOCK = ".lock"
GRACE = 3.0
"""Seconds a dead run's processes get between SIGTERM and SIGKILL."""


@dataclass
class Holder:
    """What a lock file says of the run that holds (or held) it."""

    pid: int | None = None
    start: int | None = None
    boot: str = ""
    groups: list[tuple[int, int | None]] = field(default_factory=list)
    """(process group id, its leader's start time) of every group the run started here."""
    folders: list[str] = field(default_factory=list)
    """Scratch folders the run made here."""

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """From the file's text; None when it is empty (a run that ended cleanly)."""
        text = text.strip()
        if not text:
            return None
        if text.isdigit():  # an older runner wrote its pid alone
            return cls(pid=int(text))
        try:
            data: Any = json.loads(text)
            return cls(
                pid=data.get("pid"),
                start=data.get("start"),
                boot=data.get("boot", ""),
                groups=[(int(g), s) for g, s in data.get("groups", [])],
                folders=[str(f) for f in data.get("folders", [])],
            )
        except (ValueError, TypeError, AttributeError):
            return cls()  # cut short while being written: nothing is known of what it started

    def dump(self) -> str:
        """As the file holds it."""
        data = {
            "pid": self.pid,
            "start": self.start,
            "boot": self.boot,
            "groups": [list(g) for g in self.groups],
            "folders": self.folders,
        }
        return json.dumps(data, sort_keys=True) + "\n"


class RunLock:
    """The lock of one lesson, held by this process for one run."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        me = os.getpid()
        self.holder = Holder(pid=me, start=start_time(me), boot=boot_id())
        self._write()

    def group(self, pgid: int, start: int | None) -> None:
        """Record a process group this run started here."""
        self.holder.groups.append((pgid, start))
        self._write()

    def folder(self, path: Path) -> None:
        """Record a scratch folder this run made here."""
        self.holder.folders.append(str(path))
        self._write()

    def _write(self) -> None:
        # the file itself carries the flock: rewritten in place, not replaced
        data = self.holder.dump().encode()
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)
        except OSError as exc:
            raise RunError(f"could not write the lock {describe(exc, self.path)}") from None


def _take(path: Path, lesson: str) -> int:
    """An open, flocked descriptor of the lock file; RunError when a live run holds it."""
    for _ in range(10):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder.parse(_read(fd))
            os.close(fd)
            pid = f"pid {holder.pid}, " if holder and holder.pid else ""
            raise RunError(
                f"another run of '{lesson}' is in progress ({pid}lock {path}); wait for it or "
                "end it first"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed the file as we opened it: take the new one
    raise RunError(f"could not take the lock {path}")


def _read(fd: int) -> str:
    return os.pread(fd, 1 << 20, 0).decode(errors="replace")


def _older_runner_alive(holder: Holder) -> bool:
    """An older runner locked by the file's existence alone, without flock: trust its pid."""
    if holder.pid is None or holder.boot or holder.start is not None:
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reclaim(holder: Holder) -> list[str]:
    """End what a dead run left: its process groups still running and its scratch folders; what
    was done, as sentences."""
    done = []
    same_boot = not holder.boot or holder.boot == boot_id()
    for pgid, start in holder.groups if same_boot else []:
        members = group_members(pgid)
        leader = start_time(pgid)
        if not members or (leader is not None and start is not None and leader != start):
            continue  # gone, or the pid now names another process
        shown = ", ".join(command_line(pid) or str(pid) for pid in members[:3])
        kill_group(pgid, GRACE)
        noun = "process" if len(members) == 1 else "processes"
        done.append(f"ended its process group {pgid} ({len(members)} {noun}: {shown})")
    if same_boot and holder.pid is not None and holder.start is not None:
        # what left its groups (setsid, timeout) still carries the dead run's mark
        left = marked(MARK, f"{holder.pid}.{holder.start}.", prefix=True)
        if left:
            shown = ", ".join(f"pid {pid} ({command_line(pid) or '?'})" for pid in left[:5])
            kill_all(left, GRACE)
            noun = "process" if len(left) == 1 else "processes"
            done.append(f"ended {len(left)} {noun} it left outside its process groups: {shown}")
    for folder in holder.folders:
        if Path(folder).exists():
            shutil.rmtree(folder, ignore_errors=True)
            done.append(f"removed its scratch folder {folder}")
    return done


@contextlib.contextmanager
def lesson_lock(
    store: Store, lesson: str, say: Callable[[str], None] = lambda _: None
) -> Iterator[RunLock]:
    """Hold a lesson for one run; first end what an earlier run that died left, and turn its
    unfinished record into a failed run."""
    folder = store.lesson_dir(lesson)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    fd = _take(path, lesson)
    try:
        previous = Holder.parse(_read(fd))
        if previous is not None and _older_runner_alive(previous):
            raise RunError(
                f"another run of '{lesson}' is in progress (pid {previous.pid}, lock {path}); "
                "wait for it or end it first"
            )
        if previous is not None:
            done = reclaim(previous)
            pid = f" (pid {previous.pid})" if previous.pid else ""
            if done:
                say(
                    f"An earlier run of '{lesson}'{pid} died without cleaning up: "
                    + "; ".join(done)
                    + "."
                )
        lock = RunLock(path, fd)
        for run_id in store.salvage(lesson):
            say(f"The run {run_id}, killed before it ended, is kept as a failed run.")
        yield lock
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)
