"""Where a run executes: the protocols a host must follow, and this machine as one (`LocalTarget`).

A remote host over SSH (`course/remote/ssh.py`) follows the same protocols.

The runner talks to a `Host` (facts, environment, processes, readiness checks, set-up) and, for
the steps, to a `Workspace` on it (the scratch copy of the lab folder). Locally the workspace is a
temporary folder and `fetch`/`push` do nothing; on a remote host the workspace is a fresh folder
there, and files the runner reads (kept files, JSON captures) are fetched into `local` first.

    Target.connect()  ->  Host  .facts()  .environment()  .spawn()  .http_ready()  .workspace()
                                                                                     -> Workspace
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import RunError
from ..lab.files import IGNORED_PARTS
from ..record.files import describe
from ..record.models import HostFacts
from . import host as host_module
from . import procfs
from .process import Proc, removed_if_we_die

OnOutput = Callable[[str], None]


class ConnectionLost(RunError):
    """The connection to a remote host dropped; `output` is what the step had written by then."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


@dataclass(frozen=True)
class HostReport:
    """What a host says of itself: the record's host block, and the engine versions."""

    host: HostFacts
    engine: dict[str, str | None]

    @classmethod
    def read(cls, facts: dict[str, Any]) -> HostReport:
        """From the plain dict `host.collect` prints (it runs on hosts without this package)."""
        return cls(HostFacts.model_validate(facts["host"]), dict(facts["engine"]))


class Process(Protocol):
    """A running step command, local (`process.Proc`) or remote (`ssh.RemoteProc`)."""

    @property
    def output(self) -> str:
        """Everything written so far."""

    @property
    def seconds(self) -> float:
        """Seconds since the start."""

    def poll(self) -> int | None:
        """The exit status, or None while running; ConnectionLost when the host is gone."""

    def wait(self, timeout: float) -> int | None:
        """Wait up to timeout seconds for the exit; the exit status or None."""

    stragglers: list[str]
    """After `end`: the processes outside its group that it had to end, as 'pid N (command)'."""

    def end(self, grace: float = 3.0) -> None:
        """End the whole process group (SIGTERM, SIGKILL after grace) and collect the output."""

    @property
    def group(self) -> tuple[int, int | None] | None:
        """The process group on this machine that holds the process (a remote step: its `ssh`),
        with its leader's start time; the lock records it."""


class Workspace(Protocol):
    """The lab folder a run's steps execute in."""

    path: str
    """The folder on the host, as the host names it."""
    local: Path
    """A folder here holding the files the runner reads (the folder itself when the host is
    here).
    """

    @property
    def scratch(self) -> Path:
        """The temporary folder here that holds `local`, removed at the end (the lock records
        it)."""

    def fetch(self, paths: list[str]) -> None:
        """Bring these files (relative to the lab folder) from the host into `local`, where they
        exist.
        """

    def push(self, paths: list[str]) -> None:
        """Send these files from `local` to the host."""


class Host(Protocol):
    """A connected machine that runs the steps."""

    label: str
    """How messages and records name it: 'local' or 'ssh://user@host:port'."""

    def facts(
        self, python: str, packages: list[str], folder: Path, env: dict[str, str] | None = None
    ) -> HostReport:
        """The host block and the engine versions, read on the host (see host.collect)."""

    def environment(self) -> dict[str, str]:
        """The variables every step gets before the run's own (local: all of this process's)."""

    def spawn(
        self, command: str, cwd: str | None, env: Mapping[str, str], on_output: OnOutput
    ) -> Process:
        """Start a shell command in its own process group on a pseudo-terminal (cwd None: home)."""

    def http_ready(self, url: str) -> tuple[bool, str]:
        """Whether a readiness URL answers 2xx from the host, and what it answered."""

    def port_in_use(self, url: str) -> str | None:
        """For a readiness URL on the host itself: who holds its port ('port 8123 is in use by
        pid 4711: python3 server.py'); None when it is free or the URL points elsewhere."""

    def workspace(
        self, folder: Path, lesson: str, included: Mapping[str, Path]
    ) -> AbstractContextManager[Workspace]:
        """A fresh copy of the lab folder (plus the files it includes, by their names in it:
        `shared.py`, `labkit/timing.py`) on the host, removed afterwards."""


class Target(Protocol):
    """Where a run executes, before it is connected."""

    label: str

    def connect(self) -> AbstractContextManager[Host]:
        """Connect (for SSH: one master connection that every command shares) and hand back the
        host.
        """


def copy_ignore(folder: str, names: list[str]) -> set[str]:
    """What a copy of a lab folder leaves out: caches, virtual environments, compiled files."""
    return {n for n in names if n in IGNORED_PARTS or n.endswith((".pyc", ".pyo"))}


@dataclass
class LocalWorkspace:
    """A scratch copy of the lab folder in a temporary folder here."""

    local: Path
    scratch: Path
    path: str = ""

    def __post_init__(self) -> None:
        self.path = str(self.local)

    def fetch(self, paths: list[str]) -> None:
        """Nothing to fetch: the files are here."""

    def push(self, paths: list[str]) -> None:
        """Nothing to send: the files are here."""


class LocalHost:
    """This machine."""

    label = "local"

    def facts(
        self, python: str, packages: list[str], folder: Path, env: dict[str, str] | None = None
    ) -> HostReport:
        """Read the facts in this process."""
        return HostReport.read(host_module.collect(python, packages, folder, env))

    def environment(self) -> dict[str, str]:
        """This process's environment."""
        return dict(os.environ)

    def spawn(
        self, command: str, cwd: str | None, env: Mapping[str, str], on_output: OnOutput
    ) -> Process:
        """A local `Proc`."""
        return Proc(command, Path(cwd) if cwd else Path.home(), env, on_output)

    def http_ready(self, url: str) -> tuple[bool, str]:
        """GET the URL from here."""
        import httpx

        try:
            response = httpx.get(url, timeout=1.0)
        except httpx.HTTPError as exc:
            return False, f"{type(exc).__name__}"
        return response.is_success, f"status {response.status_code}"

    def port_in_use(self, url: str) -> str | None:
        """Who listens on the URL's port here, read from /proc."""
        port = procfs.local_port(url)
        return procfs.port_message(port) if port is not None else None

    @contextmanager
    def workspace(
        self, folder: Path, lesson: str, included: Mapping[str, Path]
    ) -> Iterator[Workspace]:
        """A fresh copy of the lab folder and the files it includes, removed afterwards."""
        parent = Path(tempfile.mkdtemp(prefix=f"course-{lesson}-"))
        scratch = parent / lesson
        with removed_if_we_die(parent):
            try:
                try:
                    shutil.copytree(folder, scratch, ignore=copy_ignore, symlinks=True)
                    for name, source in included.items():
                        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(source, scratch / name)
                    writable(scratch)  # a read-only lab folder gives a scratch copy to work in
                except OSError as exc:
                    raise RunError(
                        f"could not copy the lab folder {folder} to {scratch}: {describe(exc)}"
                    ) from None
                yield LocalWorkspace(scratch, parent)
            finally:
                remove_tree(parent)


def writable(folder: Path) -> None:
    """Let the owner write every folder and file under `folder` (links are left alone)."""
    for current, dirs, files in os.walk(folder):
        for name in [current, *(os.path.join(current, n) for n in dirs + files)]:
            mode = os.lstat(name).st_mode
            if not stat.S_ISLNK(mode):
                wanted = mode | (0o700 if stat.S_ISDIR(mode) else 0o600)
                if wanted != mode:
                    os.chmod(name, stat.S_IMODE(wanted))


def remove_tree(folder: Path) -> None:
    """Remove a folder, also when a step left parts of it read-only."""
    shutil.rmtree(folder, ignore_errors=True)
    if os.path.lexists(folder):
        with contextlib.suppress(OSError):
            writable(folder)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class LocalTarget:
    """Run on this machine."""

    label: str = "local"

    @contextmanager
    def connect(self) -> Iterator[Host]:
        """Nothing to connect."""
        yield LocalHost()
