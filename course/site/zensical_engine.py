"""Zensical as the site's engine (`course build --engine zensical`), where it is installed
(`pip install zensical==0.0.73`; the `site` extra does not bring it).

Zensical reads mkdocs.yml, but runs no MkDocs hooks and keeps its cache, and wipes it on a clean
build, in `.cache/` beside its configuration, where the course keeps its own. So the build
stages a project of Zensical's own under the course's cache, `<cache>/zensical/`:

    mkdocs.yml   the course's, with the navigation from the outline (what MkDocs' `on_config`
                 hook does), no `hooks:`, the macros module and the Markdown extension of
                 `pages/zensical_adapter.py`, Material's classic look, the theme's overrides
    docs/        a copy of the course's docs/ (Zensical wants its docs inside its project)
    site/        what Zensical writes, moved into the build's site folder once whole

It builds clean every time (a page shows records Zensical does not know it reads), in this
process, so the pages' macros fill `pages.state.STATE` for the steps after the HTML
(`after.py`).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from ..errors import PageError, os_message
from ..pages.lessons import navigation
from ..pages.state import STATE
from .mkdocs_engine import CONFIG, SITE_KEYS

TESTED = "0.0.73"
"""The Zensical release the course is built and tested with."""
ADAPTER = "course.pages.zensical_adapter"
_QUIET = ("Build started", "Build finished", "No issues found")


def zensical_version() -> str | None:
    """The installed Zensical's version, None when it is not installed."""
    try:
        return metadata.version("zensical")
    except metadata.PackageNotFoundError:
        return None


class _Loader(yaml.SafeLoader):
    """YAML as MkDocs reads mkdocs.yml: `!ENV NAME` and `!ENV [NAME, ..., default]`."""


def _env(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """The environment variable's value (read as YAML), else the default given last."""
    if isinstance(node, yaml.ScalarNode):
        names, default = [loader.construct_scalar(node)], None
    elif isinstance(node, yaml.SequenceNode) and node.value:
        items = node.value
        default = loader.construct_object(items[-1]) if len(items) > 1 else None
        names = [loader.construct_scalar(n) for n in (items[:-1] if len(items) > 1 else items)]
    else:
        raise yaml.constructor.ConstructorError(None, None, "!ENV takes a name or a list", None)
    for name in names:
        if str(name) in os.environ:
            return yaml.safe_load(os.environ[str(name)])
    return default


_Loader.add_constructor("!ENV", _env)


def zensical_config(root: Path, site_url: str | None) -> dict[str, Any]:
    """The course's mkdocs.yml as Zensical builds it (see the module's docstring)."""
    path = root / CONFIG
    try:
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - safe
    except (OSError, yaml.YAMLError) as exc:
        raise PageError(f"{CONFIG}: cannot be read for Zensical: {exc}") from None
    if not isinstance(config, dict):
        raise PageError(f"{CONFIG}: expected a mapping of settings")
    config.pop("hooks", None)  # MkDocs hooks: the adapter and the steps after the HTML do theirs
    if not config.get("nav"):
        config["nav"] = navigation(root / str(config.get("docs_dir") or "docs"))
    config["docs_dir"], config["site_dir"] = "docs", "site"
    if site_url:
        config["site_url"] = site_url
    theme = config.get("theme") or {}
    theme = {"name": theme} if isinstance(theme, str) else dict(theme)
    theme.setdefault("variant", "classic")  # Material's look, not Zensical's new one
    if theme.get("custom_dir"):
        theme["custom_dir"] = str((root / str(theme["custom_dir"])).resolve())
    config["theme"] = theme
    config["plugins"] = [_plugin(entry) for entry in config.get("plugins") or []]
    if not any(_name(entry) == "macros" for entry in config["plugins"]):
        raise PageError(f"{CONFIG}: no `macros` plugin (the pages' macros run through it)")
    config["markdown_extensions"] = [*(config.get("markdown_extensions") or []), ADAPTER]
    return config


def _name(entry: Any) -> str:
    return entry if isinstance(entry, str) else next(iter(entry), "")


def _plugin(entry: Any) -> Any:
    """A plugin of mkdocs.yml as Zensical runs it: the macros from the Zensical adapter."""
    if _name(entry) != "macros":
        return entry
    settings = dict(entry["macros"] or {}) if isinstance(entry, dict) else {}
    extensions = [*settings.get("j2_extensions", []), f"{ADAPTER}.PageUndefined"]
    # on_error_fail off: Zensical then puts its report in the page, which the adapter collects as
    # the page's problem, so one build lists every page it could not render
    settings.update(module_name=ADAPTER, j2_extensions=extensions, on_error_fail=False)
    return {"macros": settings}


@contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """What this process writes to its stdout and stderr, Zensical's Rust side included, into
    `path` for the length of the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with path.open("wb") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        os.close(saved[0])
        os.close(saved[1])


def run_zensical(
    root: Path, site_dir: Path, cache: Path, site_url: str | None
) -> tuple[dict[str, Any], list[str]]:
    """Zensical into `site_dir` (an empty folder); PageError naming the page that stopped it;
    the site's configuration and what Zensical warned about."""
    try:
        zensical = importlib.import_module("zensical")
    except ImportError:
        raise PageError(
            f"--engine zensical: Zensical is not installed here (pip install zensical=={TESTED}; "
            "the `site` extra does not bring it)"
        ) from None
    stage = cache / "zensical"
    config = zensical_config(root, site_url)
    try:
        for old in ("docs", "site", ".cache"):
            shutil.rmtree(stage / old, ignore_errors=True)
        stage.mkdir(parents=True, exist_ok=True)
        shutil.copytree(root / "docs", stage / "docs")
        (stage / CONFIG).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    except OSError as exc:
        raise PageError(f"the site did not build: {os_message(exc)}") from None
    STATE.start(root, stage / "site")
    STATE.figure_cache, STATE.cards_cache = cache / "figures", cache / "cards"
    log = stage / "zensical.log"
    try:
        with _output_to(log):
            zensical.build(str(stage / CONFIG), {"strict": False, "clean": True})
    except RuntimeError as exc:  # mkdocs.yml's `strict: true` stops it on a warning
        raise PageError(_failure(str(exc), _issues(_said(log)))) from None
    finally:
        STATE.root = STATE.site_dir = None
        STATE.figure_cache = STATE.cards_cache = None
    _moved(stage / "site", site_dir)
    warned = [f"zensical: {line}" for line in _warnings(_said(log))]
    return {key: config.get(key) for key in SITE_KEYS}, warned


def _moved(built: Path, site_dir: Path) -> None:
    """What Zensical wrote, into the (empty) site folder of the build."""
    try:
        os.replace(built, site_dir)
    except OSError:  # another file system
        shutil.copytree(built, site_dir, dirs_exist_ok=True)
        shutil.rmtree(built, ignore_errors=True)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ISSUE = re.compile(r"^(?:Warning|Error): (?P<what>.+)\n\s*╭─\[ (?P<where>[^\]]+?) \]", re.M)


def _said(log: Path) -> str:
    """What Zensical wrote to its output, without colours."""
    try:
        return _ANSI.sub("", log.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


def _issues(text: str) -> list[str]:
    """The issues Zensical reported (links to nowhere...), one line each:
    `docs/<page>:<line>:<column>: <what>`."""
    return [f"docs/{m['where']}: {m['what']}" for m in _ISSUE.finditer(text)]


def _warnings(text: str) -> list[str]:
    """Its issues; where it reported none, its other lines but the usual ones."""
    return _issues(text) or [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith(_QUIET) and "issues found" not in line
    ]


def _failure(message: str, issues: list[str]) -> str:
    """Zensical's error (what it warned about in strict mode, a Python exception while it
    rendered, or its own), with each issue it named on a line."""
    first = next((line for line in message.splitlines() if line.strip()), message).strip()
    if issues:
        return "the site did not build:\n" + "\n".join(issues)
    return f"the site did not build: zensical: {first.removeprefix('Python error: ')}"
