"""What `course run` was asked to do, as plain data, and the parsing of `--env`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RunError


class Interrupted(BaseException):
    """Ctrl-C, SIGTERM or a closed terminal (SIGHUP) during a run (a BaseException, like
    KeyboardInterrupt: clean-up runs); its text names the signal."""


@dataclass
class Options:
    """How `course run` was asked to run."""

    force: bool = False
    only: tuple[str, ...] = ()
    """The steps to run (--only, repeatable); the others are reused or skipped."""
    from_step: str | None = None
    dry_run: bool = False
    quiet: bool = False
    on: str | None = None
    """Where to run: None or 'local', or ssh://[user@]host[:port]."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables every step gets (on a remote host, the only ones sent from here)."""
    setup: bool = False
    """Install the lab's requirements on the host first, and record how long it took."""
    resume: bool = False
    """Continue the newest run, which did not finish, from its first unfinished step."""
    engine: list[str] = field(default_factory=list)
    """Engine releases to run with instead of the installed ones (pip specs, e.g.
    transformers==5.24.0).
    """
    wheels: Path | None = None
    """Where to install `engine` from, offline (a folder of wheels); default: the package index."""
    note: str | None = None
    """A few words on what this run tries (`--note "vocab 8192"`), kept in run.json."""
    older_engine: bool = False
    """Run on the installed engine even where it is older than the lesson's newest good run's."""


def parse_env(
    items: tuple[str, ...] | list[str], here: dict[str, str] | None = None
) -> dict[str, str]:
    """`--env NAME=VALUE` or `--env NAME` (its value here) as a mapping; RunError for a name not set
    here.
    """
    environment = dict(os.environ) if here is None else here
    found: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise RunError(f"--env {item}: '{name}' is not a variable name")
        if not sep:
            if name not in environment:
                raise RunError(f"--env {name}: not set here (give --env {name}=VALUE)")
            value = environment[name]
        found[name] = value
    return found
