"""The target `--on` names: this machine, or a host over SSH."""

from __future__ import annotations

from ..errors import RunError
from ..run.target import LocalTarget, Target
from .settings import SshSettings
from .ssh import SshTarget


def make_target(on: str | None, settings: SshSettings | None = None) -> Target:
    """The target `--on` names: None or 'local' for this machine, 'ssh://[user@]host[:port]' for
    SSH.
    """
    if on in (None, "", "local"):
        return LocalTarget()
    assert on is not None
    if on.startswith("ssh://"):
        return SshTarget.parse(on, settings or SshSettings())
    raise RunError(f"--on {on}: unknown target (use 'local' or ssh://[user@]host[:port])")
