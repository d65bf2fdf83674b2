"""The SSH target: a run's steps on a remote host, through the system `ssh` and one shared
connection.

One master connection (ControlMaster) is opened per run and every command rides on it, so a step
costs a new channel, not a new handshake. Authentication, keys, agents, `~/.ssh/config` and
`known_hosts` are the user's own, as for any `ssh` command; nothing secret is stored here.

On the host, each step runs under `supervisor.py` (see there), which ends the step's process
group when the connection closes. Files move as tar streams over the same connection.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from ..errors import RunError
from ..run import host as host_module
from ..run import process as process_module
from ..run import procfs as procfs_module
from ..run.process import end_tied, removed_if_we_die, tied_popen
from ..run.target import ConnectionLost, HostReport, OnOutput, Process, Workspace
from . import supervisor as remote_supervisor
from .settings import SshSettings
from .wire import RemoteProc, SshWorkspace, lab_member, last_line, tar_of

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
            "-o",
            "BatchMode=yes",  # never prompt: keys come from the agent or the key files
            "-o",
            f"StrictHostKeyChecking={'accept-new' if s.accept_new_host_key else 'yes'}",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            f"ConnectTimeout={int(CONNECT_TIMEOUT)}",
            "-o",
            f"ControlPath={control}",
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
        """Open the master connection and a fresh folder on the host; close and remove both
        afterwards.
        """
        local = Path(tempfile.mkdtemp(prefix="course-ssh-"))
        with removed_if_we_die(local):
            control = local / "control"
            log = (local / "master.log").open("w+b")
            args = self.ssh_args(control)
            # its own session (Ctrl-C reaches the runner, which then ends the run in order), and
            # tied to the runner: if the runner dies, the connection goes with it
            master, tie = tied_popen(
                shlex.join(
                    [*args[:-1], "-o", "ControlMaster=yes", "-o", "ControlPersist=no", "-N"]
                    + [args[-1]]
                ),
                stdout=subprocess.DEVNULL,
                stderr=log,
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
                end_tied(master, tie, grace=5.0)
                log.close()
                shutil.rmtree(local, ignore_errors=True)

    def _wait_for_master(
        self, master: subprocess.Popen[bytes], control: Path, log: IO[bytes]
    ) -> None:
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
                f"{self.label}: the host's key differs from the one your known_hosts holds for it; "
                "the "
                "connection was refused. If you know why (the pod was re-created at the same "
                "address), "
                "remove the old entry with ssh-keygen -R and run again; otherwise do not connect."
            )
        if "Host key verification failed" in stderr:
            prints = self.fingerprints()
            offered = "; ".join(prints) if prints else "the host offered none when asked again"
            return SshError(
                f"{self.label}: the host's key is not in your known_hosts, so the connection was "
                "refused. "
                f"Its key fingerprints, as offered now: {offered}. Compare them with what the "
                "host's "
                "provider shows, then run again with --accept-new-host-key (or add the key to "
                "known_hosts)."
            )
        if "Permission denied" in stderr:
            return SshError(
                f"{self.label}: the host refused every key offered ({shown}). Load your key into "
                "the agent "
                "(ssh-add) or name it in ~/.ssh/config (IdentityFile); passwords are not used."
            )
        return SshError(f"{self.label}: could not connect: {shown}")

    def fingerprints(self) -> list[str]:
        """The host's key fingerprints as `TYPE SHA256:…`, asked with ssh-keyscan (empty when it
        fails).
        """
        resolved = self._resolved()
        keyscan, keygen = shutil.which("ssh-keyscan"), shutil.which("ssh-keygen")
        if keyscan is None or keygen is None:
            return []
        try:
            keys = subprocess.run(
                [
                    keyscan,
                    "-T",
                    "5",
                    "-p",
                    resolved.get("port", "22"),
                    resolved.get("hostname", self.host),
                ],
                capture_output=True,
                text=True,
                timeout=15,
                check=False,
            ).stdout
            listed = subprocess.run(
                [keygen, "-l", "-f", "-"],
                input=keys,
                capture_output=True,
                text=True,
                timeout=15,
                check=False,
            ).stdout
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
            out = subprocess.run(
                [args[0], "-G", *args[1:]], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except (subprocess.SubprocessError, OSError):
            return {}
        return {
            k: v
            for k, _, v in (line.partition(" ") for line in out.splitlines())
            if k in ("hostname", "port")
        }


class SshHost:
    """A connected remote host, with a fresh temporary folder holding the runner's helpers."""

    def __init__(self, target: SshTarget, args: list[str]) -> None:
        self.target = target
        self.label = target.label
        self._args = [*args[:-1], "-o", "ControlMaster=no", args[-1]]
        self.parent = ""

    # -- plumbing -------------------------------------------------------------------------------
    def run(
        self, command: str, data: bytes | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a shell command on the host over the shared connection; ConnectionLost on a drop."""
        try:
            done = subprocess.run(
                [*self._args, command],
                input=data,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ConnectionLost(
                f"{self.label}: no answer after {timeout:g} s to: {command}"
            ) from None
        if done.returncode == 255:
            raise ConnectionLost(
                f"the connection to {self.label} dropped ({last_line(done.stderr)})"
            )
        return done

    def open(self) -> None:
        """Make the host's temporary folder and put the supervisor there."""
        helpers = tar_of(
            {
                f"{HELPERS}/remote_supervisor.py": Path(remote_supervisor.__file__).read_bytes(),
                f"{HELPERS}/process.py": Path(process_module.__file__).read_bytes(),
                f"{HELPERS}/procfs.py": Path(procfs_module.__file__).read_bytes(),
            }
        )
        done = self.run(
            'd=$(mktemp -d "${TMPDIR:-/tmp}/course-XXXXXXXX") && tar -x -C "$d" && echo "$d"',
            helpers,
        )
        if done.returncode != 0:
            raise SshError(
                f"{self.label}: could not make a folder for the run: {last_line(done.stderr)}"
            )
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
                done = subprocess.run(
                    [*self._args, f"rm -rf {shlex.quote(self.parent)}"],
                    capture_output=True,
                    timeout=30,
                    check=False,
                )
                left = done.returncode != 0
            except subprocess.SubprocessError:
                left = True
            if left:
                print(f"note: {self.parent} is left on {self.label}", flush=True)

    # -- the Host protocol ---------------------------------------------------------------------
    def facts(
        self, python: str, packages: list[str], folder: Path, env: dict[str, str] | None = None
    ) -> HostReport:
        """Run host.py on the host with its python3 (`env` is for local engine overlays only)."""
        source = Path(host_module.__file__).read_bytes()
        args = " ".join(shlex.quote(a) for a in (python, *packages))
        done = self.run(f"cd {shlex.quote(self.parent)} && python3 -S - {args}", source)
        if done.returncode != 0:
            raise SshError(
                f"{self.label}: could not read the host's facts with python3 "
                f"(exit {done.returncode}): {last_line(done.stderr)}"
            )
        try:
            return HostReport.read(json.loads(done.stdout))
        except (ValueError, KeyError) as exc:
            raise SshError(f"{self.label}: the host's facts could not be read: {exc}") from None

    def environment(self) -> dict[str, str]:
        """Nothing from here: the host's own environment is the base (the supervisor adds the
        run's).
        """
        return {}

    def spawn(
        self, command: str, cwd: str | None, env: Mapping[str, str], on_output: OnOutput
    ) -> Process:
        """Start the command under the supervisor on the host."""
        supervisor = shlex.quote(f"{self.parent}/{HELPERS}/remote_supervisor.py")
        spec = {
            "command": command,
            "cwd": cwd or "",
            "env": dict(env),
            "heartbeat": self.target.settings.heartbeat,
        }
        return RemoteProc(
            [*self._args, f"exec python3 -S {supervisor} run"], spec, on_output, self.label
        )

    def http_ready(self, url: str) -> tuple[bool, str]:
        """Ask the supervisor's probe on the host."""
        supervisor = shlex.quote(f"{self.parent}/{HELPERS}/remote_supervisor.py")
        done = self.run(f"python3 -S {supervisor} probe {shlex.quote(url)}", timeout=30)
        said = done.stdout.decode(errors="replace").strip()
        ok, _, what = said.partition(" ")
        return ok == "ok" and done.returncode == 0, what or last_line(done.stderr)

    def port_in_use(self, url: str) -> str | None:
        """Ask the supervisor on the host who holds the URL's port there."""
        supervisor = shlex.quote(f"{self.parent}/{HELPERS}/remote_supervisor.py")
        done = self.run(f"python3 -S {supervisor} port {shlex.quote(url)}", timeout=30)
        said = done.stdout.decode(errors="replace").strip()
        return None if done.returncode == 0 else said or last_line(done.stderr)

    @contextmanager
    def workspace(
        self, folder: Path, lesson: str, included: Mapping[str, Path]
    ) -> Iterator[Workspace]:
        """Send the lab folder to `<parent>/<lesson>` on the host; a local folder holds what is
        fetched.
        """
        path = f"{self.parent}/{lesson}"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(folder, arcname=".", filter=lab_member)
            for name, source in included.items():
                tar.add(source, arcname=name, filter=lab_member)
        done = self.run(
            f"mkdir -p {shlex.quote(path)} && tar -x -C {shlex.quote(path)}", buffer.getvalue()
        )
        if done.returncode != 0:
            raise SshError(
                f"{self.label}: could not copy the lab folder there: {last_line(done.stderr)}"
            )
        local = Path(tempfile.mkdtemp(prefix=f"course-{lesson}-fetched-"))
        with removed_if_we_die(local):
            try:
                yield SshWorkspace(path, local, self.label, self.run)
            finally:
                shutil.rmtree(local, ignore_errors=True)
