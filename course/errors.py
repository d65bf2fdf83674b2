"""The project's errors: every exception the package raises derives from `CourseError`.

    CourseError                 anything the CLI reports as a message, not a traceback
     ├── LabError               a lab.yml that cannot be used (names the file, the step, the field)
     │    └── FactsError        the course's facts file that cannot be used (names the key)
     ├── RunError               a run that stopped (names the lab file, the step, what was expected)
     │    ├── StepFailed        one step failed: exit code, timeout, service, capture
     │    ├── CaptureMiss       a capture that found nothing (run/capture.py; becomes StepFailed)
     │    ├── ConnectionLost    the connection to a remote host dropped (run/target.py)
     │    └── SshError          a remote host that cannot be reached or refused us (remote/ssh.py)
     ├── RecordError            a record that is missing or unreadable
     ├── ExprError              an expression over recorded values that cannot be read
     (record/quantity.py)
     ├── PageError              a page that cannot be built (names the page and the macro call)
     │    └── WidgetError       a block (terminal, listing, figure, check) that cannot be made
     ├── PublishError           a site that cannot be published (placeholder address, broken
     │                          links, a deploy that failed)
     └── RefreshError           an engine release that cannot be looked up, fetched or refreshed
          └── IndexUnreachable  the package index does not answer (offline): said in one line

Two exceptions stand outside on purpose: `run.options.Interrupted` (a BaseException, like
KeyboardInterrupt: Ctrl-C, SIGTERM or SIGHUP during a run, so clean-up code runs) and the host-side
supervisor's private `Gone`, which never leaves that script.
"""

from __future__ import annotations


class CourseError(Exception):
    """Base of every error the command line reports as a plain message."""


class LabError(CourseError):
    """A lab recipe that cannot be used; lists every problem found in it."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{path}: {len(problems)} {noun}:\n{lines}")


class FactsError(LabError):
    """The course's facts file (lab/common/labkit/facts.toml) that cannot be used; lists every
    problem, each naming its key."""


class RunError(CourseError):
    """A run that stopped before its end."""


class StepFailed(RunError):
    """One step of a run failed; the message names the lab file, the step and the expectation."""

    def __init__(
        self, lab_file: str, step_id: str, what: str, tail: list[str] | None = None
    ) -> None:
        self.lab_file = lab_file
        self.step_id = step_id
        self.what = what
        self.tail = tail or []
        message = f"{lab_file}: step '{step_id}' failed: {what}"
        if self.tail:
            shown = "\n".join(f"  | {line}" for line in self.tail)
            message += f"\nlast {len(self.tail)} lines of its output:\n{shown}"
        super().__init__(message)


class RecordError(CourseError):
    """A record that is missing, unreadable or does not hold what was asked."""


class PageError(CourseError):
    """A page that cannot be built."""


class PublishError(CourseError):
    """A site that cannot be published; the message says what to fix."""


def os_message(exc: OSError) -> str:
    """An operating system's error as words and the path it is about: 'No space left on device:
    /srv/site/x.pdf'."""
    what = exc.strerror or type(exc).__name__
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    return f"{what}: {paths}" if paths else f"{what} ({exc})"


class RefreshError(CourseError):
    """An engine release that cannot be looked up on the index, fetched or refreshed to."""


class IndexUnreachable(RefreshError):
    """The package index cannot be reached (offline, refused, timed out, or a server error)."""
