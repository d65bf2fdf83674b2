"""The host's half of `course run --on ssh://…`: runs one step and ends it when the connection goes.

This file and `process.py` are copied to the host next to the lab folder and run there with the
host's `python3`, so both use the standard library only. `run` reads one JSON line on stdin
(`command`, `cwd`, `env`, `heartbeat`), starts the command exactly as a local run does (`Proc`: a
pseudo-terminal, its own process group), and writes frames to stdout, each a kind byte, a 4-byte
big-endian length and the payload:

    o  output, as a terminal showed it (UTF-8)
    x  the command exited, with its status (its group may still hold processes)
    e  the group is ended; the supervisor exits next

It then reads lines on stdin: `ping` (the runner is still there) and `end <grace>` (end the group).
End of input, a closed stdout, SIGHUP, SIGTERM, or no line for `heartbeat` seconds all mean that
the connection is gone: the supervisor ends the whole process group and exits.

`probe URL` checks a service's readiness URL from the host and prints `ok|no <what>`; `port URL`
says who holds the port of a readiness URL on the host.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

try:
    from ..run.process import Proc, become_subreaper
    from ..run.procfs import local_port, port_message
except ImportError:  # on the host, a plain script next to process.py and procfs.py
    from process import Proc, become_subreaper  # type: ignore[no-redef,import-not-found]
    from procfs import local_port, port_message  # type: ignore[no-redef,import-not-found]

LOST_GRACE = 2.0


class Gone(Exception):
    """The runner can no longer be reached."""


class Channel:
    """Frames to stdout, from the reader thread and the main thread alike."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._out = sys.stdout.buffer
        self.broken = False

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        """Write one frame; a closed stdout marks the channel broken."""
        with self._lock:
            if self.broken:
                return
            try:
                self._out.write(kind + struct.pack(">I", len(payload)) + payload)
                self._out.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.broken = True


def _hang_up(signum: int, frame: Any) -> None:
    raise Gone(signal.Signals(signum).name)


def supervise() -> int:
    """Run the command described on stdin until it is ended or the connection is lost."""
    signal.signal(signal.SIGHUP, _hang_up)
    signal.signal(signal.SIGTERM, _hang_up)
    become_subreaper()
    line = sys.stdin.buffer.readline()
    if not line:
        return 2
    spec = json.loads(line)
    env = dict(os.environ)
    env.update(spec.get("env", {}))
    heartbeat = float(spec.get("heartbeat", 0))
    channel = Channel()
    proc = Proc(
        spec["command"], Path(spec["cwd"]), env, lambda text: channel.send(b"o", text.encode())
    )

    def report_exit() -> None:
        channel.send(b"x", str(proc.popen.wait()).encode())

    waiter = threading.Thread(target=report_exit, daemon=True)
    waiter.start()
    pending = b""
    last = time.monotonic()
    try:
        while True:
            readable, _, _ = select.select([0], [], [], 1.0)
            if readable:
                data = os.read(0, 4096)
                if not data:
                    raise Gone("end of input")
                pending += data
                last = time.monotonic()
                while b"\n" in pending:
                    command, pending = pending.split(b"\n", 1)
                    if command.startswith(b"end"):
                        parts = command.split()
                        proc.end(grace=float(parts[1]) if len(parts) > 1 else 3.0)
                        waiter.join(timeout=5)  # the exit frame goes before the end frame
                        channel.send(b"e")
                        return 0
            if channel.broken:
                raise Gone("output closed")
            if heartbeat and time.monotonic() - last > heartbeat:
                raise Gone(f"no word from the runner for {heartbeat:g} s")
    except Gone:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        proc.end(grace=LOST_GRACE)
        return 1


def probe(url: str) -> int:
    """Check a readiness URL from the host: exit 0 and `ok status N` on 2xx, else 1 and why."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"no {type(reason).__name__}")
        return 1
    ok = 200 <= status < 300
    print(f"{'ok' if ok else 'no'} status {status}")
    return 0 if ok else 1


def port(url: str) -> int:
    """Who holds a readiness URL's port on the host: exit 0 when it is free (or the URL points
    elsewhere), else 1 and `port N is in use by pid P: COMMAND`."""
    number = local_port(url)
    taken = port_message(number) if number is not None else None
    if taken:
        print(taken)
        return 1
    return 0


def main(argv: list[str]) -> int:
    """`run`, `probe URL` or `port URL`."""
    if argv[:1] == ["run"]:
        return supervise()
    if argv[:1] == ["probe"] and len(argv) == 2:
        return probe(argv[1])
    if argv[:1] == ["port"] and len(argv) == 2:
        return port(argv[1])
    print("usage: remote_supervisor.py run | probe URL | port URL", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
