"""The package's layout shows the flow (shared/DESIGN.md): stages import only stages below them, no
import circle (imports inside functions included), no module over 400 lines, one error tree."""

from __future__ import annotations

import ast
from pathlib import Path

from support import REPO

PACKAGE = REPO / "course"
# stage -> the stages it may import (errors.py is the root of the error tree, below everything)
ALLOWED = {
    "record": set(),
    "lab": {"record"},
    "run": {"lab", "record"},
    "remote": {"run", "lab", "record"},
    "pages": {"lab", "record"},
    "package": {"pages", "lab", "record"},
    "site": {"package", "pages", "lab", "record"},
    "diff": {"pages", "record"},
    "scaffold": {"pages", "lab", "record"},
    "console": set(),  # the consoles and the error report every command shares
    "publish": {"site", "package", "pages", "lab", "record", "console"},
    "runs": {"run", "pages", "lab", "record", "console"},
    "refresh": {"console", "diff", "remote", "run", "pages", "lab", "record"},
    "cli": {
        "console",
        "site",
        "diff",
        "scaffold",
        "publish",
        "runs",
        "refresh",
        "remote",
        "run",
        "package",
        "pages",
        "lab",
        "record",
    },
}
MAX_LINES = 400


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """The package modules a module imports, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("course"):
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("course"))
    known = modules()
    return {t for t in found if t in known and t != name}


def stage(module: str) -> str:
    """'course.run.steps' -> 'run'; 'course.site' -> 'site'; 'course.errors' -> 'errors'."""
    return module.split(".")[1] if "." in module else "course"


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_stages_import_only_stages_below_them() -> None:
    wrong = []
    for name, path in modules().items():
        here = stage(name)
        if here not in ALLOWED:
            continue
        for target in imports(name, path):
            there = stage(target)
            if there not in (here, "errors", "course") and there not in ALLOWED[here]:
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_no_import_circle() -> None:
    graph = {name: imports(name, path) for name, path in modules().items()}
    for name in graph:  # a package imports its own modules' names; that is no circle
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    circles = []

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in trail:
                circles.append(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            elif len(trail) < 12:
                visit(nxt, [*trail, nxt])

    for start in graph:
        visit(start, [start])
    assert circles == []


def test_every_exception_derives_from_course_error() -> None:
    outside = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.bases:
                bases = {ast.unparse(b) for b in node.bases}
                if bases & {"Exception", "ValueError", "LookupError", "RuntimeError", "OSError"}:
                    outside.append(f"{name}.{node.name}")
    # the supervisor runs on a host without this package; Gone never leaves it
    assert outside == ["course.errors.CourseError", "course.remote.supervisor.Gone"]
