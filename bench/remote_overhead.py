"""What running a lab over SSH costs against running it here: the fixture lab, over loopback.

A private OpenSSH server is started on 127.0.0.1 (its own host key, a key made for the run, a
temporary HOME and TMPDIR; run as root, like the tests). The fixture lab `echo-server` (five
steps, one of them a background service with a readiness URL) is run with `course run --force`
here and with `--on ssh://…` there, REPEAT times each, alternating; the medians and their ratio
are printed. Both sides use this interpreter's folder first on PATH, so `python3` is the same.

    .venv/bin/python bench/remote_overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "project"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_sshd(folder: Path, path: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """A loopback sshd for this benchmark; the process, its port and a client ssh_config."""
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True
        )
    (folder / "home").mkdir()
    (folder / "tmp").mkdir()
    port = free_port()
    (folder / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'client_key.pub'}\nStrictModes no\nUsePAM no\nPidFile none\n"
        f"PasswordAuthentication no\nSetEnv HOME={folder / 'home'} TMPDIR={folder / 'tmp'} "
        f"PATH={path}\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    sshd = subprocess.Popen(
        [shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f", str(folder / "sshd_config")],
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    key = (folder / "host_key.pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {key[0]} {key[1]}\n")
    config = folder / "ssh_config"
    config.write_text(
        f"Host 127.0.0.1\n  IdentityFile {folder / 'client_key'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {folder / 'known_hosts'}\n"
    )
    return sshd, port, config


def timed(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    (work / "sshd").mkdir()
    sshd, ssh_port, config = start_sshd(work / "sshd", path)
    try:
        here, there = work / "here", work / "there"
        for root in (here, there):
            shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "__pycache__"))
        port = str(free_port())
        env = {**os.environ, "PATH": path, "PORT": port}
        user = os.environ.get("USER") or "root"
        course = [sys.executable, "-m", "course", "--root"]
        local = [*course, str(here), "run", "echo-server", "--force", "-q"]
        remote = [
            *course,
            str(there),
            "run",
            "echo-server",
            "--force",
            "-q",
            "--on",
            f"ssh://{user}@127.0.0.1:{ssh_port}",
            "--ssh-config",
            str(config),
            "--env",
            f"PORT={port}",
        ]
        timed(local, env)  # warm the file cache
        timed(remote, env)
        here_s, there_s = [], []
        for _ in range(args.repeat):
            here_s.append(timed(local, env))
            there_s.append(timed(remote, env))
        h, t = statistics.median(here_s), statistics.median(there_s)
        print(
            f"fixture lab echo-server (5 steps, 1 service), course run --force, median of "
            f"{args.repeat}:"
        )
        print(f"  here:             {h:7.3f} s")
        print(f"  over SSH (lo):    {t:7.3f} s")
        print(f"  ratio:            {t / h:7.3f}")
        print(f"  overhead per step:{(t - h) / 5 * 1000:7.1f} ms")
    finally:
        sshd.terminate()
        sshd.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
