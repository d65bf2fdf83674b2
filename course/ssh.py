"""The SSH target: a run's steps on a remote host, through the system `ssh` and one shared connection.

One master connection (ControlMaster) is opened per run and every command rides on it, so a step
costs a new channel, not a new handshake. Authentication, keys, agents, `~/.ssh/config` and
`known_hosts` are the user's own, as for any `ssh` command; nothing secret is stored here.

On the host, each step runs under `remote_supervisor.py` (see there), which ends the step's process
group when the connection closes. Files move as tar streams over the same connection.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import struct
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from . import host as host_module
from . import process as process_module
from . import remote_supervisor
from .errors import RunError
from .lab import IGNORED_PARTS
from .process import OutputLog
from .targets import ConnectionLost, OnOutput, Process, SshSettings, Workspace

HELPERS = ".course"
CONNECT_TIMEOUT = 30.0


class SshError(RunError):
    """The host could not be reached or refused us; the message says why and what to do."""


@dataclass
class SshTarget:
    """`ssh://[user@]host[:port]`: a host that `ssh` can reach."""

    label: str
    host: str
    user: str | None
    port: int | None
    settings: SshSettings

    @classmethod
    def parse(cls, on: str, settings: SshSettings) -> SshTarget:
        """Read an `ssh://` address; RunError when it has a path, a password or no host."""
        parts = urlsplit(on)
        if not parts.hostname or parts.password or parts.path not in ("", "/") or parts.query:
            raise RunError(f"--on {on}: expected ssh://[user@]host[:port] (no password, no path)")
        try:
            port = parts.port
        except ValueError:
            raise RunError(f"--on {on}: the port is not a number") from None
        return cls(on, parts.hostname, parts.username, port, settings)

    def ssh_args(self, control: Path) -> list[str]:
        """`ssh` and the options every command of this run uses, without the remote command."""
        s = self.settings
        args = ["ssh"]
        if s.config is not None:
            args += ["-F", str(s.config)]
        args += [
            "-o", "BatchMode=yes",  # never prompt: keys come from the agent or the key files
            "-o", f"StrictHostKeyChecking={'accept-new' if s.accept_new_host_key else 'yes'}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
            "-o", f"ConnectTimeout={int(CONNECT_TIMEOUT)}",
            "-o", f"ControlPath={control}",
        ]
        for option in s.extra:
            args += ["-o", option]
        if self.port is not None:
            args += ["-p", str(self.port)]
        if self.user:
            args += ["-l", self.user]
        return [*args, self.host]

    @contextmanager
    def connect(self) -> Iterator[SshHost]:
        """Open the master connection and a fresh folder on the host; close and remove both afterwards."""
        local = Path(tempfile.mkdtemp(prefix="course-ssh-"))
        control = local / "control"
        log = (local / "master.log").open("w+b")
        args = self.ssh_args(control)
        master = subprocess.Popen(
            [*args[:-1], "-o", "ControlMaster=yes", "-o", "ControlPersist=no", "-N", args[-1]],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True,  # Ctrl-C reaches the runner, which then ends the run in order
        )
        host: SshHost | None = None
        try:
            self._wait_for_master(master, control, log)
            host = SshHost(self, args)
            host.open()
            yield host
        finally:
            if host is not None:
                host.close()
            if master.poll() is None:
                master.terminate()
            try:
                master.wait(timeout=5)
            except subprocess.TimeoutExpired:
                master.kill()
                master.wait()
            log.close()
            shutil.rmtree(local, ignore_errors=True)

    def _wait_for_master(self, master: subprocess.Popen[bytes], control: Path, log: IO[bytes]) -> None:
        deadline = time.monotonic() + CONNECT_TIMEOUT + 5
        while not control.exists():
            if master.poll() is not None:
                log.seek(0)
                raise self.diagnose(log.read().decode(errors="replace"))
            if time.monotonic() > deadline:
                raise SshError(f"{self.label}: no connection after {CONNECT_TIMEOUT:g} s")
            time.sleep(0.01)

    def diagnose(self, stderr: str) -> SshError:
        """What ssh's complaint means, and what to do about it."""
        shown = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        if "IDENTIFICATION HAS CHANGED" in stderr:
            return SshError(
                f"{self.label}: the host's key differs from the one your known_hosts holds for it; the "
                "connection was refused. If you know why (the pod was re-created at the same address), "
                "remove the old entry with ssh-keygen -R and run again; otherwise do not connect."
            )
        if "Host key verification failed" in stderr:
            prints = self.fingerprints()
            offered = "; ".join(prints) if prints else "the host offered none when asked again"
            return SshError(
                f"{self.label}: the host's key is not in your known_hosts, so the connection was refused. "
                f"Its key fingerprints, as offered now: {offered}. Compare them with what the host's "
                "provider shows, then run again with --accept-new-host-key (or add the key to known_hosts)."
            )
        if "Permission denied" in stderr:
            return SshError(
                f"{self.label}: the host refused every key offered ({shown}). Load your key into the agent "
                "(ssh-add) or name it in ~/.ssh/config (IdentityFile); passwords are not used."
            )
        return SshError(f"{self.label}: could not connect: {shown}")

    def fingerprints(self) -> list[str]:
        """The host's key fingerprints as `TYPE SHA256:…`, asked with ssh-keyscan (empty when it fails)."""
        resolved = self._resolved()
        keyscan, keygen = shutil.which("ssh-keyscan"), shutil.which("ssh-keygen")
        if keyscan is None or keygen is None:
            return []
        try:
            keys = subprocess.run(
                [keyscan, "-T", "5", "-p", resolved.get("port", "22"), resolved.get("hostname", self.host)],
                capture_output=True, text=True, timeout=15, check=False,
            ).stdout
            listed = subprocess.run([keygen, "-l", "-f", "-"], input=keys, capture_output=True, text=True,
                                    timeout=15, check=False).stdout
        except (subprocess.SubprocessError, OSError):
            return []
        found = []
        for line in listed.splitlines():
            match = re.match(r"^\d+\s+(\S+)\s+.*\((\w+)\)\s*$", line)
            if match:
                found.append(f"{match.group(2)} {match.group(1)}")
        return sorted(set(found))

    def _resolved(self) -> dict[str, str]:
        """The host name and port after ssh_config is applied (`ssh -G`)."""
        args = self.ssh_args(Path("/nonexistent"))
        try:
            out = subprocess.run([args[0], "-G", *args[1:]], capture_output=True, text=True, timeout=10, check=False).stdout
        except (subprocess.SubprocessError, OSError):
            return {}
        return {k: v for k, _, v in (line.partition(" ") for line in out.splitlines()) if k in ("hostname", "port")}


class SshHost:
    """A connected remote host, with a fresh temporary folder holding the runner's helpers."""

    def __init__(self, target: SshTarget, args: list[str]) -> None:
        self.target = target
        self.label = target.label
        self._args = [*args[:-1], "-o", "ControlMaster=no", args[-1]]
        self.parent = ""

    # -- plumbing -------------------------------------------------------------------------------
    def run(self, command: str, data: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        """Run a shell command on the host over the shared connection; ConnectionLost on a drop."""
        try:
            done = subprocess.run([*self._args, command], input=data, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise ConnectionLost(f"{self.label}: no answer after {timeout:g} s to: {command}") from None
        if done.returncode == 255:
            raise ConnectionLost(f"the connection to {self.label} dropped ({_last_line(done.stderr)})")
        return done

    def open(self) -> None:
        """Make the host's temporary folder and put the supervisor there."""
        helpers = _tar({
            f"{HELPERS}/remote_supervisor.py": Path(remote_supervisor.__file__).read_bytes(),
            f"{HELPERS}/process.py": Path(process_module.__file__).read_bytes(),
        })
        done = self.run('d=$(mktemp -d "${TMPDIR:-/tmp}/course-XXXXXXXX") && tar -x -C "$d" && echo "$d"', helpers)
        if done.returncode != 0:
            raise SshError(f"{self.label}: could not make a folder for the run: {_last_line(done.stderr)}")
        self.parent = done.stdout.decode().strip()

    def close(self) -> None:
        """Remove the host's temporary folder; when the connection is gone, say what was left."""
        if not self.parent:
            return
        try:
            self.run(f"rm -rf {shlex.quote(self.parent)}", timeout=30)
        except ConnectionLost:
            # the master is gone; one fresh connection may still clean up
            try:
                done = subprocess.run([*self._args, f"rm -rf {shlex.quote(self.parent)}"], capture_output=True,
                                      timeout=30, check=False)
                left = done.returncode != 0
            except subprocess.SubprocessError:
                left = True
            if left:
                print(f"note: {self.parent} is left on {self.label}", flush=True)

    # -- the Host protocol ---------------------------------------------------------------------
    def facts(self, python: str, packages: list[str], folder: Path) -> dict[str, Any]:
        """Run host.py on the host with its python3."""
        source = Path(host_module.__file__).read_bytes()
        args = " ".join(shlex.quote(a) for a in (python, *packages))
        done = self.run(f"cd {shlex.quote(self.parent)} && python3 -S - {args}", source)
        if done.returncode != 0:
            raise SshError(f"{self.label}: could not read the host's facts with python3 "
                           f"(exit {done.returncode}): {_last_line(done.stderr)}")
        facts: dict[str, Any] = json.loads(done.stdout)
        return facts

    def environment(self) -> dict[str, str]:
        """Nothing from here: the host's own environment is the base (the supervisor adds the run's)."""
        return {}

    def spawn(self, command: str, cwd: str | None, env: Mapping[str, str], on_output: OnOutput) -> Process:
        """Start the command under the supervisor on the host."""
        supervisor = shlex.quote(f"{self.parent}/{HELPERS}/remote_supervisor.py")
        spec = {"command": command, "cwd": cwd or "", "env": dict(env),
                "heartbeat": self.target.settings.heartbeat}
        return RemoteProc([*self._args, f"exec python3 -S {supervisor} run"], spec, on_output, self.label)

    def http_ready(self, url: str) -> tuple[bool, str]:
        """Ask the supervisor's probe on the host."""
        supervisor = shlex.quote(f"{self.parent}/{HELPERS}/remote_supervisor.py")
        done = self.run(f"python3 -S {supervisor} probe {shlex.quote(url)}", timeout=30)
        said = done.stdout.decode(errors="replace").strip()
        ok, _, what = said.partition(" ")
        return ok == "ok" and done.returncode == 0, what or _last_line(done.stderr)

    @contextmanager
    def workspace(self, folder: Path, lesson: str) -> Iterator[Workspace]:
        """Send the lab folder to `<parent>/<lesson>` on the host; a local folder holds what is fetched."""
        path = f"{self.parent}/{lesson}"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(folder, arcname=".", filter=_lab_member)
        done = self.run(f"mkdir -p {shlex.quote(path)} && tar -x -C {shlex.quote(path)}", buffer.getvalue())
        if done.returncode != 0:
            raise SshError(f"{self.label}: could not copy the lab folder there: {_last_line(done.stderr)}")
        local = Path(tempfile.mkdtemp(prefix=f"course-{lesson}-fetched-"))
        try:
            yield SshWorkspace(path, local, self)
        finally:
            shutil.rmtree(local, ignore_errors=True)


@dataclass
class SshWorkspace:
    """The lab folder on the host, and the files fetched from it."""

    path: str
    local: Path
    host: SshHost

    def fetch(self, paths: list[str]) -> None:
        """Fetch the files that exist, as one tar stream; stale local copies are removed first."""
        if not paths:
            return
        for rel in paths:
            (self.local / rel).unlink(missing_ok=True)
        names = " ".join(shlex.quote(p) for p in paths)
        done = self.host.run(
            f"cd {shlex.quote(self.path)} && for f in {names}; do [ -f \"$f\" ] && printf '%s\\0' \"$f\"; done"
            " | tar -c --null -T - -f -"
        )
        if done.returncode != 0:
            raise RunError(f"{self.host.label}: could not fetch {', '.join(paths)}: {_last_line(done.stderr)}")
        with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r") as tar:
            tar.extractall(self.local, filter="data")

    def push(self, paths: list[str]) -> None:
        """Send files from the local folder into the lab folder on the host."""
        if not paths:
            return
        data = _tar({p: (self.local / p).read_bytes() for p in paths})
        done = self.host.run(f"tar -x -C {shlex.quote(self.path)}", data)
        if done.returncode != 0:
            raise RunError(f"{self.host.label}: could not send {', '.join(paths)}: {_last_line(done.stderr)}")


class RemoteProc(OutputLog):
    """A step running under the supervisor on the host, seen through its frames."""

    def __init__(self, argv: list[str], spec: dict[str, Any], on_output: OnOutput | None, label: str) -> None:
        super().__init__()
        self.label = label
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, start_new_session=True)
        self._on_output = on_output
        self._send_lock = threading.Lock()
        self._code: int | None = None
        self._changed = threading.Event()
        self._closed = threading.Event()
        self._ended = False
        self._stderr = b""
        self._send(json.dumps(spec) + "\n")
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._read, self._drain, self._ping)]
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
        said = _last_line(self._stderr)
        if code == 255 or code is None:
            return ConnectionLost(
                f"the connection to {self.label} dropped while the step ran ({said}); the supervisor on the "
                "host ends the step's processes; run again with --resume to continue from this step",
                self.output,
            )
        return ConnectionLost(f"the step's supervisor on {self.label} stopped with status {code} ({said})",
                              self.output)

    def wait(self, timeout: float) -> int | None:
        """Wait up to timeout seconds for the exit frame."""
        if timeout > 0:
            self._changed.wait(timeout)
        return self.poll()

    def end(self, grace: float = 3.0) -> None:
        """Ask the supervisor to end the group and wait for it; drop the channel when it does not answer."""
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


def _last_line(data: bytes | str) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "no message"


def _lab_member(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Leave caches and virtual environments out of the copy sent to the host."""
    name = Path(info.name)
    if any(part in IGNORED_PARTS for part in name.parts) or name.suffix in (".pyc", ".pyo"):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _tar(files: dict[str, bytes]) -> bytes:
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
