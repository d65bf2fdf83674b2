"""What every command shares: the two consoles, and one way to report the project's errors."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from rich.console import Console

from .errors import CourseError

F = TypeVar("F", bound=Callable[..., Any])

stderr = Console(stderr=True)
stdout = Console()


def reports_errors(func: F) -> F:
    """Turn the project's errors into a message and a non-zero exit, not a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CourseError as exc:
            stderr.print("[bold red]error:[/] ", end="")
            stderr.print(str(exc), markup=False, highlight=False, soft_wrap=True)
            sys.exit(1)
        except KeyboardInterrupt:
            stderr.print("[bold red]interrupted[/]")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]
