"""A command in its own process group, attached to a pseudo-terminal, read by a thread.

The pseudo-terminal makes the command write as it would to a person: line-buffered, stdout and
stderr interleaved in the order written. The process group lets us end everything it started;
what leaves the group (`setsid`, `set -m`, GNU `timeout`, `start_new_session=True`) still carries
the mark `COURSE_MARK` in its environment, and the runner is a child subreaper, so orphans come
back to it: `Proc.end` finds them in /proc, ends them too, and names them (`Proc.stragglers`).
The terminal's descriptor is closed by its reader thread alone, once it stops reading, so no
reader ever reads a descriptor number reused by the next step's terminal.

What a command writes is kept up to a cap (`KEEP_HEAD` characters from the start, `KEEP_TAIL` from
the end); the middle of a larger output is counted, not kept, and the output says so in its
place.

Every group is tied to the life of the process that started it (`tied_popen`): a small watcher
inside the group waits on a pipe whose only writer is this process, so when this process goes,
however it goes (`kill -9` included), the watcher ends the whole group. Temporary folders are tied
the same way (`removed_if_we_die`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import struct
import subprocess
import termios
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

try:
    from .procfs import (
        MARK,
        end_marked,
        group_members,
        kill_group,
        reap_group,
        start_time,
    )
except ImportError:  # on a remote host, a plain script next to procfs.py
    from procfs import (  # type: ignore[no-redef,import-not-found]
        MARK,
        end_marked,
        group_members,
        kill_group,
        reap_group,
        start_time,
    )

__all__ = ["group_members"]  # the tests and the bench import it from here

COLUMNS, ROWS = 100, 50
KEEP_HEAD = 500_000
KEEP_TAIL = 1_500_000
"""Characters of a command's output kept from its start and from its end."""
TIED_GRACE = 3.0
"""Seconds a tied group gets between SIGTERM and SIGKILL once the process that started it is
gone."""

# The group's leader: /bin/sh (which reads no start-up files) moves the pipe to fd 3, forks the
# watcher into the same group, and becomes the command's bash, so `$$` is still the group id.
# The watcher reads the pipe; end of input means the starter is gone: it ends its own group.
_LAUNCH = r"""
exec 3<&0
(
  trap '' INT HUP
  read -r _ <&3
  trap '' TERM
  kill -TERM 0 2>/dev/null
  i=0
  while [ "$i" -lt "$1" ] && read -r s </proc/$$/stat; do
    s=${s##*) }
    case ${s%% *} in Z|X) break ;; esac  # the leader has exited: end the rest now
    sleep 0.1
    i=$((i+1))
  done 2>/dev/null
  kill -KILL 0
) <&3 >/dev/null 2>&1 &
exec 3<&-
exec /bin/bash -c "$2" </dev/null
"""
WATCHER = "course-tether"
"""The watcher's name in `ps`: `/bin/sh -c ... course-tether`."""

# A folder's guard: removes the folder when its pipe ends without a word (the starter died).
_GUARD = r"""
trap '' INT HUP TERM
read -r word
[ "$word" = kept ] || { chmod -R u+rwx -- "$1"; rm -rf -- "$1"; } 2>/dev/null
"""
GUARD = "course-guard"


class OutputLog:
    """What a running process wrote so far (its start and its end, up to `KEEP_HEAD` and
    `KEEP_TAIL` characters), appended by a reader thread, and since when it runs."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.stragglers: list[str] = []
        """The processes outside its group that ending it had to end, as 'pid N (command)'."""
        self._head: list[str] = []
        self._head_size = 0
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self.dropped = 0
        """Characters of output not kept (the middle of a larger output)."""
        self.dropped_lines = 0
        self._joined: str | None = ""
        self._lock = threading.Lock()

    def append(self, text: str) -> None:
        """Add a chunk of output (from the reader thread)."""
        with self._lock:
            self._joined = None
            room = KEEP_HEAD - self._head_size
            if room > 0 and not self._tail:
                self._head.append(text[:room])
                self._head_size += min(room, len(text))
                text = text[room:]
            if not text:
                return
            self._tail.append(text)
            self._tail_size += len(text)
            while self._tail_size > KEEP_TAIL:
                excess = self._tail_size - KEEP_TAIL
                first = self._tail[0]
                cut = first if len(first) <= excess else first[:excess]
                if cut is first:
                    self._tail.popleft()
                else:
                    self._tail[0] = first[excess:]
                self._tail_size -= len(cut)
                self.dropped += len(cut)
                self.dropped_lines += cut.count("\n")

    @property
    def output(self) -> str:
        """Everything written so far, or its start and its end with a line in between that says
        how much was left out."""
        with self._lock:
            if self._joined is None:
                gap, tail = "", "".join(self._tail)
                if self.dropped:
                    chars, lines = self.dropped, self.dropped_lines
                    cut = tail.find("\n", 0, 4096)  # the end kept starts with a whole line
                    if cut >= 0:
                        chars, lines, tail = chars + cut + 1, lines + 1, tail[cut + 1 :]
                    gap = (
                        f"\n[... {chars:,} characters ({lines:,} lines) of output not kept "
                        f"here: a transcript keeps the first {KEEP_HEAD:,} and the last "
                        f"{KEEP_TAIL:,} characters ...]\n"
                    )
                self._joined = "".join(self._head) + gap + tail
            return self._joined

    @property
    def seconds(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.started


class Proc(OutputLog):
    """A running shell command: its output so far, its exit status, and its process group."""

    def __init__(
        self,
        command: str,
        cwd: Path,
        env: Mapping[str, str],
        on_output: Callable[[str], None] | None = None,
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # keep "\n" as written; the terminal would not show "\r"
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        super().__init__()
        self.mark = new_mark()
        try:
            self.popen, tie = tied_popen(
                command, cwd=cwd, env={**env, MARK: self.mark}, stdout=slave, stderr=slave
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self._tie: int | None = tie
        self.pgid = self.popen.pid
        self.start = start_time(self.pgid)
        """The leader's start time: with the pgid, it names this group after its pid is reused."""
        try:  # readable once the process exits (Linux 5.3+)
            self._pidfd: int | None = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._ended = False
        self._stop_read, self._stop = os.pipe()
        self._on_output = on_output
        self._reader = threading.Thread(target=self._read, args=(master,), daemon=True)
        self._reader.start()

    def _read(self, master: int) -> None:
        """Read the terminal until every writer has closed it or `end` says stop; then close it
        (here alone: a descriptor closed elsewhere could be reused while this still reads it)."""
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while True:
                ready, _, _ = select.select([master, self._stop_read], [], [])
                if master not in ready:
                    break  # told to stop: a process we could not end still holds the terminal
                try:
                    data = os.read(master, 65536)
                except OSError as exc:  # EIO: every writer closed the terminal
                    if exc.errno == errno.EIO:
                        break
                    raise
                if not data:
                    break
                self._take(decoder.decode(data))
            self._take(decoder.decode(b"", final=True))
        finally:
            os.close(master)
            os.close(self._stop_read)

    def _take(self, text: str) -> None:
        if text:
            self.append(text)
            if self._on_output is not None:
                self._on_output(text)

    @property
    def group(self) -> tuple[int, int | None]:
        """Its process group and the leader's start time."""
        return self.pgid, self.start

    def poll(self) -> int | None:
        """The exit status, or None while running."""
        return self.popen.poll()

    def wait(self, timeout: float) -> int | None:
        """Wait up to timeout seconds, waking as soon as the process exits; the exit status or
        None.
        """
        code = self.popen.poll()
        if code is not None or timeout <= 0:
            return code
        if self._pidfd is not None:
            select.select([self._pidfd], [], [], timeout)
            return self.popen.poll()
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def end(self, grace: float = 3.0) -> None:
        """End the whole process group and every process that left it carrying this command's
        mark: SIGTERM, then SIGKILL after the grace period; collect the output. Ending twice does
        nothing more."""
        if self._ended:
            return
        self._ended = True
        try:
            if self._tie is not None:
                self.stragglers = end_tied(self.popen, self._tie, grace, self.mark)
                self._tie = None
        finally:
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
            self._reader.join(timeout=2)  # at the end of the output, once every writer is gone
            if self._reader.is_alive():  # a process we could not end still holds the terminal
                os.write(self._stop, b"x")
                self._reader.join(timeout=5)
            os.close(self._stop)


def new_mark() -> str:
    """A mark for one command: this process (pid and start time, so that a run's marks are found
    after it died) and a random part."""
    me = os.getpid()
    return f"{me}.{start_time(me)}.{uuid.uuid4().hex[:12]}"


def tied_popen(command: str, **kwargs: Any) -> tuple[subprocess.Popen[bytes], int]:
    """Start a bash command in a new session and process group that ends if this process dies.

    Returns the process and the pipe's write end: keep it open while the group may live, close it
    after ending the group. The command's standard input is /dev/null.
    """
    read_end, write_end = os.pipe()  # both close-on-exec: no other child inherits the write end
    try:
        popen = subprocess.Popen(
            ["/bin/sh", "-c", _LAUNCH, WATCHER, str(round(TIED_GRACE * 10)), command],
            stdin=read_end,
            start_new_session=True,  # its own session and process group
            close_fds=True,
            **kwargs,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return popen, write_end


def end_tied(
    popen: subprocess.Popen[bytes], tie: int, grace: float = 3.0, mark: str | None = None
) -> list[str]:
    """End a group started by `tied_popen` (its watcher included), collect it, close its pipe;
    with its `mark`, end every process outside the group that carries it too. Returns those, as
    'pid N (command)'."""
    try:
        kill_group(popen.pid, grace)
        if popen.poll() is None:
            popen.wait(timeout=5)
        if mark:
            return end_marked(mark, popen.pid, grace)  # which collects the group too
        reap_group(popen.pid)
        return []
    finally:
        os.close(tie)


def become_subreaper() -> None:
    """Adopt our descendants orphaned by their parent (Linux), so that `reap_group` can collect
    them instead of leaving zombies to an init that may never reap them."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (ImportError, OSError, AttributeError):
        pass  # not Linux (or no ctypes): orphans go to init, as usual


@contextlib.contextmanager
def removed_if_we_die(folder: Path) -> Iterator[None]:
    """Within the block, a guard process removes `folder` should this process die; the block
    itself is expected to remove it (or keep it) on a normal end."""
    read_end, write_end = os.pipe()
    try:
        guard = subprocess.Popen(
            ["/bin/sh", "-c", _GUARD, GUARD, str(folder)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # no signal meant for the runner's terminal reaches it
            close_fds=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    try:
        yield
    finally:
        try:
            os.write(write_end, b"kept\n")
        except OSError:
            pass
        os.close(write_end)
        guard.wait()
