"""A private OpenSSH server on 127.0.0.1 for `bench/faults.py`: a "remote host" that is this
machine, whose connections the bench can drop (as `tests/remote/test_ssh.py` does)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SshServer:
    """A running sshd and what `course run --on` needs to reach it."""

    folder: Path
    port: int
    proc: subprocess.Popen[bytes]
    host_tmp: Path

    @staticmethod
    def possible() -> bool:
        """sshd and ssh are installed, and we are root (sshd's privilege separation)."""
        return os.path.exists(SSHD) and bool(shutil.which("ssh")) and os.geteuid() == 0

    @classmethod
    def start(cls, folder: Path) -> SshServer:
        """Keys, a config and sshd on a free port of 127.0.0.1."""
        folder.mkdir(parents=True)
        _keygen(folder / "host_key")
        _keygen(folder / "client_key")
        home, host_tmp = folder / "home", folder / "host-tmp"
        home.mkdir()
        host_tmp.mkdir()
        port = _free_port()
        path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
        (folder / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
            f"AuthorizedKeysFile {folder / 'client_key.pub'}\nStrictModes no\nUsePAM no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\nMaxSessions 100\nMaxStartups 100\n"
            f"PidFile none\nSetEnv HOME={home} TMPDIR={host_tmp} PATH={path}\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(folder / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=(folder / "sshd.log").open("wb"),
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((folder / "sshd.log").read_text()) from None
                time.sleep(0.05)
        key = (folder / "host_key.pub").read_text().split()
        (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {key[0]} {key[1]}\n")
        (folder / "ssh_config").write_text(
            f"Host 127.0.0.1\n  IdentityFile {folder / 'client_key'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {folder / 'known_hosts'}\n"
        )
        return cls(folder, port, proc, host_tmp)

    def args(self) -> list[str]:
        """The `course run` options that reach this server."""
        user = os.environ.get("USER") or "root"
        url = f"ssh://{user}@127.0.0.1:{self.port}"
        return ["--on", url, "--ssh-config", str(self.folder / "ssh_config")]

    def drop(self) -> None:
        """The network goes: every connection's server side dies at once."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == self.proc.pid:
                os.kill(int(entry.name), signal.SIGKILL)

    def supervisors(self) -> list[int]:
        """Live step supervisors on the host (their command line names its temporary folder)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if str(self.host_tmp) in cmdline and "remote_supervisor" in cmdline and state != "Z":
                found.append(int(entry.name))
        return found

    def folders(self) -> list[Path]:
        """What runs left in the host's temporary folder."""
        return list(self.host_tmp.iterdir())

    def stop(self) -> None:
        """End the server."""
        self.proc.terminate()
        self.proc.wait(timeout=10)
