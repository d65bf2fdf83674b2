"""How to reach a remote host: what `course run --on ssh://…` was given besides the address."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class SshSettings:
    """How to reach a remote host: what `course run --on ssh://…` was given besides the address."""

    accept_new_host_key: bool = False
    """Add an unknown host key to known_hosts (ssh's `accept-new`) instead of stopping."""
    config: Path | None = None
    """An ssh_config file to use instead of ~/.ssh/config (ssh -F)."""
    heartbeat: float = 30.0
    """Seconds without word from the runner after which a step's supervisor ends it on the host."""
    extra: list[str] = field(default_factory=list)
    """More `-o Key=Value` options for ssh."""
