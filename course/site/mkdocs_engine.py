"""MkDocs as the site's engine: `mkdocs --strict` with the course's hooks (`macros/hooks.py`), which
run the steps after the HTML themselves; and `course serve`, its live preview."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from ..errors import CourseError, PageError
from ..pages.render import hint
from ..pages.state import LENIENT, STATE

CONFIG = "mkdocs.yml"
SITE_KEYS = ("site_url", "site_name", "site_description", "site_author")
"""What the steps after the HTML read of the site's configuration."""


class _Collect(logging.Handler):
    """Keeps the warnings mkdocs and its plugins log, to quote them when a build fails."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run_mkdocs(
    root: Path, site_dir: Path, cache: Path, site_url: str | None
) -> tuple[dict[str, Any], list[str]]:
    """mkdocs --strict into `site_dir` (for `site_url` when given); PageError with every problem
    it logged; the site's configuration and mkdocs' warnings."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    collect = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(collect)
    try:
        overrides = {"site_url": site_url} if site_url else {}
        config = load_config(
            config_file=str(root / CONFIG), site_dir=str(site_dir), strict=True, **overrides
        )
        STATE.figure_cache = cache / "figures"
        STATE.cards_cache = cache / "cards"
        build(config)
    except MkDocsException as exc:  # Abort included: mkdocs logged the cause before aborting
        raise PageError(_failure(str(exc), collect.messages)) from None
    except SystemExit:  # mkdocs-macros exits on a template it cannot render
        raise PageError(
            _failure("a page's macros could not be rendered", collect.messages)
        ) from None
    finally:
        logger.removeHandler(collect)
        STATE.figure_cache = None
        STATE.cards_cache = None
    return {key: config.get(key) for key in SITE_KEYS}, collect.messages


def _failure(headline: str, messages: list[str]) -> str:
    if messages:
        return "the site did not build:\n" + "\n".join(_condensed(m) for m in messages)
    return f"the site did not build: {headline}"


_MACRO_FILE = re.compile(r"_File_: `([^`]+)`")
_MACRO_ERROR = re.compile(r"^_(\w+(?:Error|Exception))_: (.*)$", re.MULTILINE)


def _condensed(message: str) -> str:
    """mkdocs-macros' long error report as one line naming the page and the error."""
    page, error = _MACRO_FILE.search(message), _MACRO_ERROR.search(message)
    if not (message.startswith("[macros]") and page and error):
        return message
    return f"docs/{page.group(1)}: {error.group(1)}: {error.group(2)}{hint(error.group(2))}"


def serve_site(root: Path, dev_addr: str = "127.0.0.1:8000") -> None:
    """Live preview: rebuild on every change of docs/, the records, the labs and the figures."""
    from mkdocs.commands.serve import serve

    os.environ[LENIENT] = "1"
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)-7s -  %(message)s"))
    logging.getLogger("mkdocs").addHandler(handler)
    logging.getLogger("mkdocs").setLevel(logging.INFO)
    watch = [
        str(root / p)
        for p in ("build", "lab", "figures", "course", "macros")
        if (root / p).is_dir()
    ]
    try:
        serve(config_file=str(root / CONFIG), dev_addr=dev_addr, livereload=True, watch=watch)
    except CourseError:
        raise
    except Exception as exc:  # noqa: BLE001 - mkdocs' own errors while serving, reported as a message
        raise PageError(f"serve: {exc}") from None
