"""A command in its own process group, attached to a pseudo-terminal, read by a thread.

The pseudo-terminal makes the command write as it would to a person: line-buffered, stdout and
stderr interleaved in the order written. The process group lets us end everything it started.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

COLUMNS, ROWS = 100, 50


class OutputLog:
    """What a running process wrote so far, appended by a reader thread, and since when it runs."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._chunks: list[str] = []
        self._lock = threading.Lock()

    def append(self, text: str) -> None:
        """Add a chunk of output (from the reader thread)."""
        with self._lock:
            self._chunks.append(text)

    @property
    def output(self) -> str:
        """Everything written so far."""
        with self._lock:
            return "".join(self._chunks)

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
        try:
            self.popen = subprocess.Popen(
                ["/bin/bash", "-c", command],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=slave,
                stderr=slave,
                start_new_session=True,  # its own session and process group
                close_fds=True,
            )
        finally:
            os.close(slave)
        self.pgid = self.popen.pid
        try:  # readable once the process exits (Linux 5.3+)
            self._pidfd: int | None = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._master = master
        self._on_output = on_output
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError as exc:  # EIO: every writer closed the terminal
                if exc.errno in (errno.EIO, errno.EBADF):
                    break
                raise
            if not data:
                break
            text = decoder.decode(data)
            if text:
                self.append(text)
                if self._on_output is not None:
                    self._on_output(text)
        rest = decoder.decode(b"", final=True)
        if rest:
            self.append(rest)

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
        """End the whole process group: SIGTERM, then SIGKILL after the grace period; collect
        output.
        """
        kill_group(self.pgid, grace)
        if self.popen.poll() is None:
            self.popen.wait(timeout=5)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self._reader.join(timeout=2)
        if self._reader.is_alive():  # a process outside the group still holds the terminal
            os.close(self._master)
            self._reader.join(timeout=1)
        else:
            try:
                os.close(self._master)
            except OSError:
                pass


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is still there (zombies do not count)."""
    return bool(group_members(pgid))


def group_members(pgid: int) -> list[int]:
    """Pids of the live, non-zombie processes in a process group (from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # fields after the command name, which is in parentheses and may hold spaces
        fields = stat[stat.rfind(")") + 2 :].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def kill_group(pgid: int, grace: float = 3.0) -> None:
    """SIGTERM a process group, and SIGKILL whatever of it is left after grace seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
