"""The wire to a remote host: a step's supervisor seen through its frames (`RemoteProc`), the lab
folder there (`SshWorkspace`), and the tar streams files travel in."""

from __future__ import annotations

import io
import json
import shlex
import struct
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RunError
from ..lab.files import IGNORED_PARTS
from ..run.process import OutputLog
from ..run.procfs import start_time
from ..run.target import ConnectionLost, OnOutput

Runner = Callable[[str, bytes | None], subprocess.CompletedProcess[bytes]]
"""Runs a shell command on the host over the shared connection (`SshHost.run`)."""


@dataclass
class SshWorkspace:
    """The lab folder on the host, and the files fetched from it."""

    path: str
    local: Path
    label: str
    run: Runner

    @property
    def scratch(self) -> Path:
        """The folder here holding the fetched files."""
        return self.local

    def fetch(self, paths: list[str]) -> None:
        """Fetch the files that exist, as one tar stream; stale local copies are removed first."""
        if not paths:
            return
        for rel in paths:
            (self.local / rel).unlink(missing_ok=True)
        names = " ".join(shlex.quote(p) for p in paths)
        done = self.run(
            f"cd {shlex.quote(self.path)} && for f in {names}; do [ -f \"$f\" ] && printf '%s\\0' "
            '"$f"; done'
            " | tar -c --null -T - -f -",
            None,
        )
        if done.returncode != 0:
            raise RunError(
                f"{self.label}: could not fetch {', '.join(paths)}: {last_line(done.stderr)}"
            )
        with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r") as tar:
            tar.extractall(self.local, filter="data")

    def push(self, paths: list[str]) -> None:
        """Send files from the local folder into the lab folder on the host."""
        if not paths:
            return
        data = tar_of({p: (self.local / p).read_bytes() for p in paths})
        done = self.run(f"tar -x -C {shlex.quote(self.path)}", data)
        if done.returncode != 0:
            raise RunError(
                f"{self.label}: could not send {', '.join(paths)}: {last_line(done.stderr)}"
            )


class RemoteProc(OutputLog):
    """A step running under the supervisor on the host, seen through its frames."""

    def __init__(
        self, argv: list[str], spec: dict[str, Any], on_output: OnOutput | None, label: str
    ) -> None:
        super().__init__()
        self.label = label
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._start = start_time(self.popen.pid)
        self._on_output = on_output
        self._send_lock = threading.Lock()
        self._code: int | None = None
        self._changed = threading.Event()
        self._closed = threading.Event()
        self._ended = False
        self._stderr = b""
        self._send(json.dumps(spec) + "\n")
        self._threads = [
            threading.Thread(target=f, daemon=True) for f in (self._read, self._drain, self._ping)
        ]
        self._heartbeat = float(spec.get("heartbeat") or 0)
        for t in self._threads:
            t.start()

    def _send(self, line: str) -> None:
        with self._send_lock:
            try:
                assert self.popen.stdin is not None
                self.popen.stdin.write(line.encode())
                self.popen.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass  # the reader sees the end and says why

    def _read(self) -> None:
        out = self.popen.stdout
        assert out is not None
        try:
            while True:
                head = out.read(5)
                if len(head) < 5:
                    break
                kind, size = head[:1], struct.unpack(">I", head[1:])[0]
                payload = out.read(size) if size else b""
                if len(payload) < size:
                    break
                if kind == b"o":
                    text = payload.decode("utf-8", errors="replace")
                    self.append(text)
                    if self._on_output is not None:
                        self._on_output(text)
                elif kind == b"x":
                    self._code = int(payload)
                    self._changed.set()
        finally:
            self._closed.set()
            self._changed.set()

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        self._stderr = self.popen.stderr.read()

    def _ping(self) -> None:
        interval = max(self._heartbeat / 3, 0.5) if self._heartbeat else 0
        while interval and not self._closed.wait(interval):
            self._send("ping\n")

    @property
    def group(self) -> tuple[int, int | None]:
        """The `ssh` client's own process group here, and its start time."""
        return self.popen.pid, self._start

    def poll(self) -> int | None:
        """The exit status, None while running; ConnectionLost when the host went away first."""
        if self._code is not None:
            return self._code
        if self._closed.is_set() and not self._ended:
            raise self._why_closed()
        return None

    def _why_closed(self) -> ConnectionLost:
        try:
            code = self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._threads[1].join(timeout=2)
        said = last_line(self._stderr)
        if code == 255 or code is None:
            return ConnectionLost(
                f"the connection to {self.label} dropped while the step ran ({said}); the "
                "supervisor on the "
                "host ends the step's processes; run again with --resume to continue from this "
                "step",
                self.output,
            )
        return ConnectionLost(
            f"the step's supervisor on {self.label} stopped with status {code} ({said})",
            self.output,
        )

    def wait(self, timeout: float) -> int | None:
        """Wait up to timeout seconds for the exit frame."""
        if timeout > 0:
            self._changed.wait(timeout)
        return self.poll()

    def end(self, grace: float = 3.0) -> None:
        """Ask the supervisor to end the group and wait for it; drop the channel when it does not
        answer.
        """
        if self._ended:
            return
        self._ended = True
        if not self._closed.is_set():
            self._send(f"end {grace:g}\n")
            self._closed.wait(grace + 10)
        if self.popen.poll() is None:
            self.popen.kill()  # the supervisor then sees its input end, and ends the group itself
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for t in self._threads:
            t.join(timeout=2)
        for pipe in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


def last_line(data: bytes | str) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def lab_member(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Leave caches and virtual environments out of the copy sent to the host."""
    name = Path(info.name)
    if any(part in IGNORED_PARTS for part in name.parts) or name.suffix in (".pyc", ".pyo"):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def tar_of(files: dict[str, bytes]) -> bytes:
    """An uncompressed tar of in-memory files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
