"""Loading a lab.yml: every problem in the file reported at once, each naming the file, the line,
the step and the field, with a close-match suggestion for a misspelt key."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
)

from ..errors import LabError
from ..record import yamlfast
from .files import expand_inputs, lab_files, link_loops
from .keys import line_of, unknown_key
from .schema import NAME_LENGTH, Lab


class LoadedLab(BaseModel):
    """A validated lab with where it came from."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    lab: Lab
    path: Path
    """The lab.yml file."""

    @property
    def folder(self) -> Path:
        """The lab folder (what a learner gets)."""
        return self.path.parent

    @property
    def included(self) -> dict[str, Path]:
        """The files `include:` names, by the name they take in the lab folder: a file by its
        name, each file of a folder under the folder's name (`labkit/timing.py`)."""
        return included_files(self.folder, self.lab.include)

    def sources(self) -> dict[str, Path]:
        """Every file a run starts from: the lab folder's own, then the included ones."""
        own = {name: self.folder / name for name in lab_files(self.folder)}
        return {**own, **self.included}

    def display_path(self) -> str:
        """The lab file as a message names it."""
        return _display(self.path)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def included_files(folder: Path, include: list[str]) -> dict[str, Path]:
    """What `include:` brings into a lab folder: name in the folder -> the file it copies."""
    found: dict[str, Path] = {}
    for rel in include:
        target = (folder / rel).resolve()
        if target.is_dir():
            for name in lab_files(target):
                found[f"{target.name}/{name}"] = target / name
        else:
            found[target.name] = target
    return found


_LOADED: dict[tuple[str, Path], tuple[tuple[object, ...], LoadedLab]] = {}
"""The labs loaded in this process, by where they were asked for, with the state of the files
their validation read (`_state`)."""


def _state(path: Path, loaded: LoadedLab) -> tuple[object, ...] | None:
    """What a lab's validation read: lab.yml's bytes (by their digest), the names of the lab
    folder's files, and the files its `include:` brings with whether each is there (the inputs'
    globs match them). None where lab.yml is gone or a link loops back (the folder is not
    walked)."""
    try:
        digest = hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
    except OSError:
        return None
    folder = path.parent
    if link_loops(folder):
        return None
    brought = included_files(folder, loaded.lab.include)
    there = tuple((name, target.is_file()) for name, target in brought.items())
    return (digest, tuple(lab_files(folder)), there)


def load_lab(path: Path) -> LoadedLab:
    """Read and validate a lab.yml; raise LabError listing every problem in it.

    A lab loaded before in this process is given again while lab.yml and the names of the files
    it may match are unchanged (a build asks for each lab some 50 times: 19 ms each)."""
    key = (os.getcwd() if not path.is_absolute() else "", path)
    if key in _LOADED:
        state, loaded = _LOADED[key]
        if _state(path, loaded) == state:
            return loaded
    loaded = _load_lab(path)
    state_now = _state(path, loaded)
    if state_now is not None:
        _LOADED[key] = (state_now, loaded)
    return loaded


def _load_lab(path: Path) -> LoadedLab:
    shown = _display(path)
    if not path.is_file():
        raise LabError(shown, [f"no such file (expected a lab recipe at {shown})"])
    text = path.read_text(encoding="utf-8")
    try:
        node, raw = yamlfast.compose_and_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise LabError(shown, [f"{where}not valid YAML: {getattr(exc, 'problem', exc)}"]) from None
    if not isinstance(raw, dict):
        raise LabError(shown, ["expected a mapping with 'lesson', 'title', 'engine' and 'steps'"])
    twice = _duplicate_keys(node)
    if twice:  # YAML would keep the last one without a word
        raise LabError(shown, twice)
    try:
        lab = Lab.model_validate(raw)
    except ValidationError as exc:
        raise LabError(shown, [_describe(err, raw, node) for err in exc.errors()]) from None
    problems = []
    if lab.lesson != path.parent.name:
        problems.append(f"lesson: '{lab.lesson}' differs from its folder name '{path.parent.name}'")
    bad_includes = _check_includes(lab.include, path.parent, node)
    problems += bad_includes
    loops = [
        f"{_display(path.parent / link)} is a link to '{to}', a folder that holds it: a loop, "
        "which the inputs' globs would follow forever; remove it"
        for link, to in link_loops(path.parent)
    ]
    if loops:  # before the globs below
        raise LabError(shown, problems + loops)
    # names the inputs may match: an include in error is matched by its name alone
    extra = (
        [Path(rel).name for rel in lab.include]
        if bad_includes
        else list(included_files(path.parent, lab.include))
    )
    files = lab_files(path.parent)
    for index, step in enumerate(lab.steps):
        found = expand_inputs(path.parent, step.inputs or [], extra, files)
        for pattern, matched in found.items():
            if not matched:
                line = _line_of(node, ("steps", index, "inputs"))
                folder = _display(path.parent)
                problems.append(
                    f"{line}step '{step.id}': inputs: '{pattern}' matches no file in {folder}"
                )
    problems += _unmatched_noise(lab, node)
    if problems:
        raise LabError(shown, problems)
    return LoadedLab(lab=lab, path=path)


def _unmatched_noise(lab: Lab, node: yaml.Node | None) -> list[str]:
    """A sentence for each `noise.values` pattern that matches no captured value of the lab,
    and for each whose every value an earlier pattern takes (the first match wins): either
    would leave its values to another noise without a word."""
    captured = [f"{step.id}.{name}" for step in lab.steps for name in step.capture]
    problems = []
    earlier: list[str] = []
    for pattern in lab.noise.values:
        line = _line_of(node, ("noise", "values", pattern))
        mine = [name for name in captured if fnmatch.fnmatchcase(name, pattern)]
        if not mine:
            close = difflib.get_close_matches(pattern, captured, n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(
                f"{line}noise.values: '{pattern}' matches no captured value of the lab (a value"
                f" is named step.value){hint}"
            )
        else:
            taken = [p for p in earlier if any(fnmatch.fnmatchcase(n, p) for n in mine)]
            if all(any(fnmatch.fnmatchcase(n, p) for p in earlier) for n in mine):
                problems.append(
                    f"{line}noise.values: '{pattern}' sets the noise of no value: each value it"
                    f" matches is taken by an earlier pattern ({', '.join(repr(p) for p in taken)};"
                    " the first match wins): put it before them"
                )
        earlier.append(pattern)
    return problems


COMMON = "common"
"""`lab/common/`: the folders every lab may include (the lab kit)."""


def _check_includes(include: list[str], folder: Path, node: yaml.Node | None) -> list[str]:
    """Each include names a file of another lab of the same `lab/` folder, or a folder of
    `lab/common/`, and shadows nothing of the lab's own."""
    problems = []
    labs = folder.parent.resolve()
    own = set(lab_files(folder))
    for index, rel in enumerate(include):
        line = _line_of(node, ("include", index))
        target = (folder / rel).resolve()
        name = target.name
        if not target.is_relative_to(labs) or target.is_relative_to(folder.resolve()):
            problems.append(
                f"{line}include: '{rel}' must name a file of another lab under lab/, or a folder"
                " of lab/common/"
            )
        elif target.is_dir():
            if target.parent != labs / COMMON:
                problems.append(
                    f"{line}include: '{rel}' is a folder: only a folder of lab/common/ may be"
                    " included (a file of another lab may)"
                )
            elif not lab_files(target):
                problems.append(f"{line}include: '{rel}' is an empty folder ({target})")
            elif any(f == name or f.startswith(f"{name}/") for f in own):
                problems.append(
                    f"{line}include: '{rel}' would replace the lab's own {name}/; rename one"
                )
        elif not target.is_file():
            problems.append(f"{line}include: '{rel}' is not a file ({target} does not exist)")
        elif name in own:
            problems.append(
                f"{line}include: '{rel}' would replace the lab's own {name}; rename one"
            )
    return problems


def _duplicate_keys(node: yaml.Node | None, where: str = "") -> list[str]:
    """A sentence for every key written twice in one mapping: its line, its step, the first."""
    problems = []
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            name = str(key.value)
            line = key.start_mark.line + 1
            if name in first:
                problems.append(
                    f"line {line}: {where}'{name}' appears twice (first on line {first[name]}); "
                    "a key may appear once"
                )
            first.setdefault(name, line)
            problems += _duplicate_keys(value, f"{where}{name}: ")
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            label = f"{where.removesuffix(': ')} #{index + 1}: "
            if where == "steps: " and isinstance(item, yaml.MappingNode):
                ids = [v.value for k, v in item.value if k.value == "id"]
                label = f"step '{ids[0]}': " if ids else f"step #{index + 1}: "
            problems += _duplicate_keys(item, label)
    return problems


def _describe(err: Any, raw: dict[str, Any], node: yaml.Node | None) -> str:
    """One validation error as a sentence naming the line, the step and the field."""
    # pydantic puts the union tag into the location; drop it unless it is the field itself
    loc = list(err["loc"])
    if len(loc) >= 3 and loc[0] == "steps" and loc[2] in ("run", "start", "stop"):
        loc.pop(2)
    where = ""
    rest = loc
    if loc[:1] == ["steps"] and len(loc) >= 2 and isinstance(loc[1], int):
        index = loc[1]
        raw_step = raw.get("steps", [])[index] if isinstance(raw.get("steps"), list) else {}
        step_id = raw_step.get("id") if isinstance(raw_step, dict) else None
        if isinstance(step_id, str) and len(step_id) > NAME_LENGTH:
            step_id = step_id[:32] + "..."
        where = f"step '{step_id}': " if step_id else f"step #{index + 1}: "
        rest = loc[2:]
    field = ".".join(str(p) for p in rest)
    line = _line_of(node, tuple(err["loc"][:1]) + tuple(loc[1:]) if loc else ())
    message = err["msg"]
    message = message.removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = unknown_key(list(err["loc"]))
    elif err["type"] == "step_kind":
        message = err["msg"] + _kind_hint(raw, loc)
    elif err["type"] == "missing":
        message = "required but missing"
    elif err["type"] == "string_pattern_mismatch":
        allowed = "'_'" if rest and rest[0] == "capture" else "'-'"
        message = f"{err['input']!r} is not a valid name (lowercase letters, digits and {allowed})"
    elif err["type"] == "string_too_long":
        limit = err["ctx"]["max_length"]
        message = (
            f"'{err['input'][:32]}...' is {len(err['input'])} characters long; at most {limit} "
            "(it names files of the record)"
        )
    elif err["type"] == "literal_error":
        message = f"{err['input']!r} is not one of the accepted values: {err['ctx']['expected']}"
    label = f"{field}: " if field else ""
    return f"{line}{where}{label}{message}"


def _kind_hint(raw: dict[str, Any], loc: list[Any]) -> str:
    """For a step without 'run', 'start' or 'stop': the misspelt one among its keys."""
    steps = raw.get("steps")
    if not (isinstance(steps, list) and len(loc) >= 2 and isinstance(loc[1], int)):
        return ""
    step = steps[loc[1]] if loc[1] < len(steps) else None
    if not isinstance(step, dict):
        return ""
    kinds = ["run", "start", "stop"]
    for key in step:
        close = difflib.get_close_matches(str(key), kinds, n=1, cutoff=0.6)
        if close and key not in kinds:
            return f" (found '{key}': did you mean '{close[0]}'?)"
    return ""


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> str:
    """'line N: ' for the YAML node at a location, as far down as it exists."""
    line = line_of(node, loc)
    return "" if line is None else f"line {line}: "
