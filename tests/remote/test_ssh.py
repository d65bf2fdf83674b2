"""`course run --on ssh://…` against a real OpenSSH server on 127.0.0.1, started here with its own
keys.

The "host" is this machine: its lab folders go to a temporary folder (the server sets TMPDIR and
HOME for its sessions), and its `python3` is this test's interpreter (the server sets PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import COURSE, FIXTURES, free_port

from course.lab.load import included_files
from course.record.store import Store
from course.remote.settings import SshSettings
from course.remote.ssh import SshTarget
from course.run.process import group_members

LAB = "echo-server"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

pytestmark = pytest.mark.skipif(
    not (os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")),
    reason="OpenSSH (openssh-server, openssh-client) is not installed; tests/run.sh installs it",
)


@dataclass
class Server:
    """A running test sshd and what a client needs to reach it."""

    folder: Path
    port: int
    proc: subprocess.Popen[bytes]
    host_key: Path
    host_tmp: Path
    """TMPDIR of the server's sessions: where remote runs put their folders."""

    @property
    def url(self) -> str:
        return f"ssh://{os.environ.get('USER') or 'root'}@127.0.0.1:{self.port}"

    def client_config(self, known_hosts: Path) -> Path:
        """An ssh_config for this server with the test key and the given known_hosts file."""
        path = self.folder / f"ssh_config-{known_hosts.name}"
        path.write_text(
            "Host 127.0.0.1\n"
            f"  IdentityFile {self.folder / 'client_key'}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known_hosts}\n"
        )
        return path

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes: the listener's children."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat[stat.rfind(")") + 2 :].split()[1]) == self.proc.pid:
                    found.append(int(entry.name))
        return found


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """An OpenSSH server on 127.0.0.1 and a free port, with a host key and a client key made
    here.
    """
    folder = tmp_path_factory.mktemp("sshd")
    _keygen(folder / "host_key")
    _keygen(folder / "client_key")
    home, host_tmp = folder / "home", folder / "host-tmp"
    home.mkdir()
    host_tmp.mkdir()
    port = free_port()
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    (folder / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'client_key.pub'}\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin "
        "prohibit-password\n"
        f"PidFile none\nSetEnv HOME={home} TMPDIR={host_tmp} PATH={path}\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation folder
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
                pytest.fail(f"sshd did not start: {(folder / 'sshd.log').read_text()}")
            time.sleep(0.05)
    host_key = (folder / "host_key.pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    try:
        yield Server(folder, port, proc, folder / "host_key.pub", host_tmp)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def copy_project(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(
        FIXTURES / "project", root, ignore=shutil.ignore_patterns("build", "__pycache__")
    )
    return root


def course(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [*COURSE, "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        check=False,
    )


def remote_args(
    sshd: Server, known_hosts: Path | None = None, port: int | None = None
) -> list[str]:
    config = sshd.client_config(known_hosts or sshd.folder / "known_hosts")
    return ["--on", sshd.url, "--ssh-config", str(config), "--env", f"PORT={port or free_port()}"]


def shape(record: dict[str, Any]) -> dict[str, Any]:
    """What a record holds, without what differs between two runs of it (times, ids, the host)."""
    return {
        "keys": sorted(record),
        "host": sorted(k for k in record["host"] if k != "setup"),
        "engine": sorted(record["engine"]),
        "status": record["status"],
        "steps": [
            (
                s["id"],
                s["kind"],
                s["status"],
                s["exit_code"],
                {k: v for k, v in s["values"].items()},
                [(f["path"], f["bytes"], f["sha256"]) for f in s["files"]],
                s["transcript"],
                s["hash"],
            )
            for s in record["steps"]
        ],
    }


def only_run(root: Path) -> dict[str, Any]:
    (run,) = Store(root / "build").runs(LAB)
    return json.loads((run.folder / "run.json").read_text())


def supervisors_on_host(sshd: Server) -> list[int]:
    """Processes whose command line names the host's temporary folder (supervisors, probes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(sshd.host_tmp) in cmdline and "remote_supervisor" in cmdline:
                found.append(int(entry.name))
    return found


def test_remote_run_is_recorded_like_a_local_one(sshd: Server, tmp_path: Path) -> None:
    here, there = copy_project(tmp_path, "here"), copy_project(tmp_path, "there")
    (there / "lab" / LAB / "requirements.txt").write_text("pyyaml\n")
    port = free_port()  # the same port here and there: a captured value names it
    local = course(here, "run", LAB, env={"PORT": str(port)})
    assert local.returncode == 0, local.stderr
    remote = course(there, "run", LAB, *remote_args(sshd, port=port), "--setup")
    assert remote.returncode == 0, remote.stderr
    a, b = only_run(here), only_run(there)
    # requirements.txt is a lab file only 'there': it changes the hashes of steps reading every file
    for record in (a, b):
        for step in record["steps"]:
            step["hash"] = None
    shape_a, shape_b = shape(a), shape(b)
    for step_a, step_b in zip(shape_a.pop("steps"), shape_b.pop("steps"), strict=False):
        assert step_a == step_b
    assert shape_a == shape_b
    assert a["options"]["on"] == "local" and b["options"]["on"] == sshd.url
    assert b["host"]["setup"]["requirements"] == ["pyyaml"] and b["host"]["setup"]["seconds"] > 0
    assert "pip" in b["host"]["setup"]["installer"]
    folder = Store(there / "build").runs(LAB)[0].folder
    assert (folder / "files/query/results/client.json").is_file()
    assert "GET /square?n=6789" in (folder / "steps/server.txt").read_text()
    assert (folder / "steps/query.txt").read_text() == (
        Store(here / "build").runs(LAB)[0].folder / "steps/query.txt"
    ).read_text()
    assert "step 3 of 5: query" in remote.stderr and "6,789 squared is" in remote.stderr
    assert list(sshd.host_tmp.iterdir()) == []  # the host's folder is removed
    # a second run reuses every step, as locally
    again = course(there, "run", LAB, *remote_args(sshd))
    assert again.returncode == 0 and "Nothing to do" in again.stderr


def test_a_dropped_connection_fails_the_step_and_resume_finishes(
    sshd: Server, tmp_path: Path
) -> None:
    root = copy_project(tmp_path, "project")
    hold = tmp_path / "hold"
    hold.write_text("")
    lab = root / "lab" / LAB / "lab.yml"
    lab.write_text(
        lab.read_text()
        + f"""
  - id: slow
    run: echo $$ > {tmp_path}/slow.pgid; sleep 300 & while [ -f {hold} ]; do sleep 0.1; done; echo released
    capture:
      word: {{regex: '^(released)$', type: str}}
"""  # noqa: E501 - a recipe line as a learner types it
    )
    args = remote_args(sshd)
    proc = subprocess.Popen(
        [*COURSE, "--root", str(root), "run", LAB, *args],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 60
    while (
        not (tmp_path / "slow.pgid").exists()
        and time.monotonic() < deadline
        and proc.poll() is None
    ):
        time.sleep(0.05)
    time.sleep(0.2)
    pgid = int((tmp_path / "slow.pgid").read_text())
    assert group_members(pgid), "the step should be running on the host"
    for pid in sshd.session_pids():  # the network goes: the server's side of the connection dies
        os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert f"step 'slow' failed: the connection to {sshd.url} dropped while the step ran" in err
    assert "--resume" in err
    deadline = time.monotonic() + 10
    while (group_members(pgid) or supervisors_on_host(sshd)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_members(pgid), "the step's processes survived on the host"
    assert not supervisors_on_host(sshd)
    store = Store(root / "build")
    (failed,) = store.runs(LAB)
    assert failed.record.status == "failed" and failed.record.failure.step == "slow"  # type: ignore[union-attr]
    assert (failed.record.step("slow").error or "").startswith(f"the connection to {sshd.url}")
    assert failed.record.step("words").status == "ok"
    # --resume: same host (from the record), and the steps that finished are reused from the failed
    # run
    hold.unlink()
    done = course(root, "run", LAB, "--resume", *args[2:])
    assert done.returncode == 0, done.stderr
    assert f"Resuming {failed.run_id} from step 'slow'" in done.stderr
    _, resumed = store.runs(LAB)
    assert resumed.record.status == "ok" and resumed.record.options["resume"] == failed.run_id
    assert resumed.record.options["on"] == sshd.url
    statuses = {s.id: (s.status, s.reused_from) for s in resumed.record.steps}
    assert statuses["query"] == ("reused", failed.run_id) and statuses["slow"] == ("ok", None)
    assert resumed.record.step("slow").values["word"].value == "released"
    assert store.newest_good(LAB).run_id == resumed.run_id  # type: ignore[union-attr]
    again = course(root, "run", LAB, "--resume", *args[2:])
    assert again.returncode == 1 and "finished; nothing to resume" in again.stderr


def test_an_unknown_host_key_is_refused_with_its_fingerprint(sshd: Server, tmp_path: Path) -> None:
    root = copy_project(tmp_path, "project")
    known = tmp_path / "empty_known_hosts"
    known.write_text("")
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(sshd.host_key)], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    done = course(root, "run", LAB, "--dry-run", *remote_args(sshd, known))
    assert done.returncode == 1
    assert (
        f"{sshd.url}: the host's key is not in your known_hosts, so the connection was refused"
        in done.stderr
    )
    assert f"ED25519 {fingerprint}" in done.stderr and "--accept-new-host-key" in done.stderr
    assert known.read_text() == "" and not (root / "build" / LAB).exists()
    accepted = course(
        root, "run", LAB, "--dry-run", "--accept-new-host-key", *remote_args(sshd, known)
    )
    assert accepted.returncode == 0, accepted.stderr
    assert "prepare" in accepted.stdout and f"127.0.0.1]:{sshd.port}" in known.read_text()


def test_bad_addresses_and_variables(project: Path) -> None:
    done = course(project, "run", LAB, "--on", "ssh://user:secret@host/path")
    assert (
        done.returncode == 1
        and "expected ssh://[user@]host[:port] (no password, no path)" in done.stderr
    )
    done = course(project, "run", LAB, "--on", "gpu-box")
    assert done.returncode == 1 and "--on gpu-box: unknown target" in done.stderr
    done = course(project, "run", LAB, "--env", "COURSE_SURELY_UNSET_VARIABLE")
    assert (
        done.returncode == 1
        and "not set here (give --env COURSE_SURELY_UNSET_VARIABLE=VALUE)" in done.stderr
    )


def test_a_port_in_use_on_the_host_is_named_by_the_host(sshd: Server) -> None:
    """Before a service starts on the host, its readiness port is checked there."""
    settings = SshSettings(config=sshd.client_config(sshd.folder / "known_hosts"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with SshTarget.parse(sshd.url, settings).connect() as host:
            said = host.port_in_use(f"http://127.0.0.1:{port}/health")
            free = host.port_in_use(f"http://127.0.0.1:{free_port()}/health")
            elsewhere = host.port_in_use(f"http://192.0.2.1:{port}/health")
    assert said is not None and said.startswith(f"port {port} is in use by pid {os.getpid()}: ")
    assert free is None and elsewhere is None


def test_an_included_folder_reaches_the_host_under_its_name(sshd: Server, tmp_path: Path) -> None:
    """`include: [../common/kit]` travels in the tar sent to the host, nested folders too."""
    lab = tmp_path / "lab" / "user"
    lab.mkdir(parents=True)
    (lab / "lab.yml").write_text("lesson: user\n")
    kit = tmp_path / "lab" / "common" / "kit"
    (kit / "sub").mkdir(parents=True)
    (kit / "__init__.py").write_text("")
    (kit / "sub" / "deep.py").write_text("DEEP = 1\n")
    settings = SshSettings(config=sshd.client_config(sshd.folder / "known_hosts"))
    with (
        SshTarget.parse(sshd.url, settings).connect() as host,
        host.workspace(lab, "user", included_files(lab, ["../common/kit"])) as ws,
    ):
        there = Path(ws.path)
        found = sorted(p.relative_to(there).as_posix() for p in there.rglob("*") if p.is_file())
        assert found == ["kit/__init__.py", "kit/sub/deep.py", "lab.yml"]
        assert (there / "kit" / "sub" / "deep.py").read_text() == "DEEP = 1\n"
