"""Code the reader unfolds is sent when it is unfolded.

A lesson page's folded blocks (`??? note`: a `<details>` without `open`) hold its lab's listings
and whole config files: most of the page's bytes and nearly all of its elements, which a phone
would download, parse and lay out before the reader could scroll. The build moves each highlighted
code block found inside a folded block into a file of its own beside the page,
`code/<name>.html`, and leaves in its place a link to that file:

    <div class="course-deferred" data-src="code/kvlab.py.html">
      <p><a href="code/kvlab.py.html">Open kvlab.py · 372 lines</a></p></div>

`docs/assets/course.js` fetches the file when the block is unfolded and puts the code in the
link's place (with Material's copy button); without JavaScript the link opens the code. The PDF
puts every block back (`inline`), so paper still prints each listing in full. Blocks shorter than
`SMALLEST` bytes stay in the page: a round trip would cost more than it saves.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PageError

FOLDER = "code"
"""The folder, beside the page, that holds its deferred blocks."""

SMALLEST = 1500
"""Blocks of fewer bytes stay in the page."""

_SCAN = re.compile(
    r'<details\b[^>]*>|</details>|<div class="(?:language-[\w+#.-]+ )?highlight">'
    r'(?:<span class="filename">(?P<title>.*?)</span>)?<pre\b.*?</pre></div>',
    re.DOTALL,
)
_OPEN = re.compile(r"\sopen(?:[\s=>]|$)")
_PLACEHOLDER = re.compile(
    r'<div class="course-deferred" data-src="(?P<src>[^"]+)">.*?</div>', re.DOTALL
)
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Deferred:
    """A page's HTML with its folded code blocks taken out, and the blocks by file name."""

    html: str
    blocks: dict[str, str] = field(default_factory=dict)
    """`code/<name>.html` (relative to the page's folder) → the block's HTML."""


def _name(title: str | None, taken: set[str]) -> str:
    """A file name for a block: its title's file name (`kvlab.py · 372 lines` → `kvlab.py`),
    made safe for a URL, numbered when the page has two of one name."""
    text = html.unescape(_TAG.sub("", title or "")).split(" · ")[0].split(", ")[0].strip()
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", text.rsplit("/", 1)[-1]).strip(".-") or "block"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


def defer_folded_code(page_html: str) -> Deferred:
    """The page's HTML with each big code block inside a folded `<details>` replaced by a link
    to a file of its own; the files' contents in `blocks`."""
    out: list[str] = []
    blocks: dict[str, str] = {}
    taken: set[str] = set()
    folded: list[bool] = []  # one entry per open <details> tag: is it folded?
    last = 0
    for match in _SCAN.finditer(page_html):
        token = match.group(0)
        if token.startswith("<details"):
            folded.append(not _OPEN.search(token[len("<details") : -1] + " "))
            continue
        if token == "</details>":
            if folded:
                folded.pop()
            continue
        if not any(folded) or len(token) < SMALLEST:
            continue
        name = _name(match.group("title"), taken)
        src = f"{FOLDER}/{name}.html"
        blocks[src] = token
        label = _TAG.sub("", match.group("title") or "") or "the code"
        out.append(page_html[last : match.start()])
        out.append(
            f'<div class="course-deferred" data-src="{src}"><p><a href="{src}">Open {label}</a>'
            f"</p></div>"
        )
        last = match.end()
    out.append(page_html[last:])
    return Deferred("".join(out), blocks)


def write_blocks(deferred: Deferred, page_folder: Path) -> None:
    """Write a page's deferred blocks into its folder in the built site."""
    for src, block in deferred.blocks.items():
        path = page_folder / src
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block, encoding="utf-8")


def inline(page_html: str, page_folder: Path, shown: str) -> str:
    """The page's HTML with every deferred block put back from its file (for the PDF)."""

    def put_back(match: re.Match[str]) -> str:
        path = page_folder / html.unescape(match.group("src"))
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PageError(
                f"{shown}: the folded code block {match.group('src')!r} is not in the built "
                f"site (expected {path})"
            ) from None

    return _PLACEHOLDER.sub(put_back, page_html)
