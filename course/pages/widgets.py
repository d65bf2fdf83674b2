"""The page's recorded blocks: a step's terminal, a lab file's listing, a figure drawn from values.

Each function takes what it shows (text, a path, a drawing function) and returns HTML or
Markdown; reading the record is the caller's job (`course.pages`).
"""

from __future__ import annotations

import html
import importlib.util
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PageError
from ..record.models import PROMPT

LANGUAGES = {
    ".py": "python",
    ".yml": "yaml",
    ".yaml": "yaml",
    ".toml": "toml",
    ".sh": "bash",
    ".json": "json",
    ".md": "markdown",
    ".txt": "text",
    ".cfg": "ini",
    ".ini": "ini",
}
_RANGE = re.compile(r"^\s*(\d*)\s*(?:-\s*(\d*)\s*)?$")


class WidgetError(PageError):
    """A block that cannot be made; the message says what was expected."""


def select_lines(spec: str | None, count: int, name: str = "lines") -> list[int]:
    """0-based indices of the output lines a spec like "1-12", "1-3,20-" or "5" keeps (`name`:
    the option an error names)."""
    if spec is None:
        return list(range(count))
    keep: set[int] = set()
    for part in str(spec).split(","):
        match = _RANGE.match(part)
        if not match or (not match.group(1) and not match.group(2) and "-" not in part):
            raise WidgetError(
                f"{name}={spec!r}: '{part}' is not a line or a range like 3-10, 3- or -10"
            )
        first = int(match.group(1)) if match.group(1) else 1
        last = int(match.group(2)) if match.group(2) else (first if "-" not in part else count)
        if first < 1 or last > count or first > last:
            raise WidgetError(
                f"{name}={spec!r}: '{part.strip()}' is outside the output's {count} lines"
            )
        keep.update(range(first - 1, last))
    return sorted(keep)


def split_transcript(transcript: str, command: str) -> list[str]:
    """The output lines of a transcript (the prompt and the command removed)."""
    head = f"{PROMPT}{command}\n"
    body = transcript[len(head) :] if transcript.startswith(head) else transcript.split("\n", 1)[-1]
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


TERMINAL_COLUMNS = 100
"""Characters of a terminal line that a terminal block shows whole, without scrolling: the
article's column at 1280 px holds 100 of the block's 11.2 px monospace characters (665 px), and
the PDF's A4 column 104 at 7.6 pt (tests/pages/test_terminal_width.py measures both). A lab
prints its tables within it; a longer line scrolls on the page and wraps in the PDF."""
WIDE_LINES_FAIL = True
"""Whether a shown terminal line wider than TERMINAL_COLUMNS stops `course check` and the build
(True), or is listed by `course check` as a warning (False). A line the lab cannot narrow
(another program's log) is accepted by the page, by number: `terminal(..., wide="165")`."""


def _words(command: str) -> list[str]:
    """A one-line shell command's words, split at spaces outside quotes (the quotes kept)."""
    words, word, quote = [], "", ""
    for char in command:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == " ":
            if word:
                words.append(word)
            word = ""
            continue
        word += char
    return [*words, word] if word else words


def fold_command(command: str, width: int = TERMINAL_COLUMNS) -> str:
    """A one-line command wider than `width` (with the prompt) as the shell reads it still: lines
    ending in ` \\`, continued 4 spaces in, broken before an option and kept with its value
    (`--port 8241` stays whole). Commands of several lines, that fit, or with a word too long
    for any line are left as they are."""
    if "\n" in command or len(PROMPT) + len(command) <= width or "\\" in command:
        return command
    units: list[str] = []
    for word in _words(command):
        option = bool(units) and units[-1].startswith("-") and " " not in units[-1]
        if option and not word.startswith("-"):
            units[-1] += " " + word  # an option's value
        else:
            units.append(word)
    lines, line = [], units[0]
    room = width - len(PROMPT) - 2  # the prompt, and " \\" at the end
    for unit in units[1:]:
        if len(line) + 1 + len(unit) > room:
            lines.append(line)
            line, room = "    " + unit, width - len(PROMPT) - 2
        else:
            line += " " + unit
    lines.append(line)
    if any(len(PROMPT) + len(one) + 2 > width for one in lines):
        return command  # a word too long for any line: folding would not make it fit
    return " \\\n".join(lines)


def wide_lines(command: str, output: list[str], keep: list[int]) -> list[str]:
    """Where a terminal shows a line wider than TERMINAL_COLUMNS: 'line 14 (118 characters)',
    'the command (141 characters)'; output lines numbered from 1, as `lines=` counts them."""
    found = []
    for line in command.split("\n"):
        width = len(PROMPT) + len(line)  # later lines are set in as far as the prompt
        if width > TERMINAL_COLUMNS:
            found.append(f"the command ({width} characters)")
    found += [
        f"line {index + 1} ({len(output[index])} characters)"
        for index in keep
        if len(output[index]) > TERMINAL_COLUMNS
    ]
    return found


def wide_message(found: list[str]) -> str:
    """What a check says of the lines `wide_lines` found, and the two remedies."""
    shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
    return (
        f"{shown}: wider than the {TERMINAL_COLUMNS} characters a terminal block shows whole at "
        "1280 px and in the PDF (print it narrower in the lab; a line the lab cannot narrow, "
        'such as another program\'s log, the page may accept with wide="N")'
    )


def stale_acceptances(output: list[str], keep: list[int], accepted: list[int]) -> list[str]:
    """The lines a terminal's `wide=` accepts that are not shown or not wider than
    TERMINAL_COLUMNS: 'line 14 is 49 characters', 'line 15 is not shown'."""
    return [
        f"line {index + 1} is "
        + ("not shown" if index not in keep else f"{len(output[index])} characters")
        for index in accepted
        if index not in keep or len(output[index]) <= TERMINAL_COLUMNS
    ]


def terminal_html(command: str, output: list[str], keep: list[int], source: str, title: str) -> str:
    """A terminal block: prompt, command, the kept output lines, and a mark where lines were left
    out.
    """
    out: list[str] = []
    previous = -1
    for index in keep:
        if index != previous + 1:
            out.append(_gap(index - previous - 1))
        out.append(html.escape(output[index]))
        previous = index
    if output and previous != len(output) - 1:
        out.append(_gap(len(output) - 1 - previous))
    command_html = html.escape(command).replace("\n", "\n" + " " * len(PROMPT))
    body = "\n".join(out)
    label = html.escape(f"Terminal: {title}", quote=True)
    return (
        f'<div class="course-terminal" role="group" aria-label="{label}" '
        f'data-source="{html.escape(source, quote=True)}">'
        f'<pre tabindex="0"><span class="course-terminal__prompt" '
        f'aria-hidden="true">{html.escape(PROMPT)}</span>'
        f'<kbd class="course-terminal__command">{command_html}</kbd>\n'
        f'<samp class="course-terminal__output">{body}</samp></pre></div>'
    )


def _gap(count: int) -> str:
    noun = "line" if count == 1 else "lines"
    return f'<span class="course-terminal__gap">[… {count} {noun} left out …]</span>'


def line_count(text: str) -> int:
    """Lines in a file as an editor numbers them."""
    return len(text.splitlines())


def listing_markdown(text: str, name: str) -> str:
    """A lab file in full as a fenced, highlighted block (Material adds its copy button)."""
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    language = LANGUAGES.get(Path(name).suffix.lower(), "text")
    lines = line_count(text)
    noun = "line" if lines == 1 else "lines"
    body = text if text.endswith("\n") else text + "\n"
    title = f"{name} · {lines:,} {noun}".replace('"', "'")
    return f'\n{fence}{language} title="{title}"\n{body}{fence}\n'


def _longest_run(text: str, char: str) -> int:
    runs = re.findall(f"{re.escape(char)}+", text)
    return max((len(r) for r in runs), default=0)


@dataclass
class Drawn:
    """The files a figure was drawn into, relative to the site root."""

    svg: str
    png: str
    width: int
    height: int


def load_drawer(path: Path, shown: str) -> Callable[..., Any]:
    """The `draw(fig, data)` function of `figures/<name>.py`."""
    if not path.is_file():
        raise WidgetError(f"no file {shown} (expected a figure module defining draw(fig, data))")
    spec = importlib.util.spec_from_file_location(f"course_figure_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise WidgetError(f"cannot load {shown}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the author's figure script may raise anything
        raise WidgetError(script_failure(exc, path, shown)) from None
    draw = getattr(module, "draw", None)
    if not callable(draw):
        raise WidgetError(f"{shown} defines no function draw(fig, data)")
    return draw  # type: ignore[no-any-return]


def script_failure(exc: BaseException, path: Path, shown: str) -> str:
    """An exception of a figure script as a sentence naming the script's file and line."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return f"{shown}, line {exc.lineno}: SyntaxError: {exc.msg}"
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if Path(f.filename).resolve() == path.resolve()
    ]
    where = shown
    if frames:  # the script's own line that led to the error, however deep it was raised
        last = frames[-1]
        where = f"{shown}, line {last.lineno}, in {last.name}: `{(last.line or '').strip()}`"
    return f"{where}: {type(exc).__name__}: {exc}"


def draw_figure(draw: Callable[..., Any], data: Any, site_dir: Path, rel_stem: str) -> Drawn:
    """Draw a figure with matplotlib (Agg, default style) into `<site>/<rel_stem>.svg` and
    `.png`.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(
            {"svg.hashsalt": "course", "svg.fonttype": "path", "font.size": 10}
        )
        fig = Figure(figsize=(7.0, 3.6), layout="constrained")
        draw(fig, data)
        target = site_dir / rel_stem
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target.with_suffix(".svg"), format="svg", metadata={"Date": None})
        fig.savefig(target.with_suffix(".png"), format="png", dpi=150, metadata={"Software": None})
        width, height = (int(v * 96) for v in fig.get_size_inches())
    return Drawn(f"{rel_stem}.svg", f"{rel_stem}.png", width, height)


def figure_html(
    src: str, png: str, alt: str, caption: str, width: int, height: int, source: str
) -> str:
    """A figure with its alt text and caption; the PNG is named for the PDF and the zip."""
    return (
        f'<figure class="course-figure" data-source="{html.escape(source, quote=True)}">'
        f'<img src="{html.escape(src, quote=True)}" data-png="{html.escape(png, quote=True)}" '
        f'alt="{html.escape(alt, quote=True)}" width="{width}" height="{height}" loading="lazy">'
        f"<figcaption>{caption}</figcaption></figure>"
    )
