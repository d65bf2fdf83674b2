"""Social cards: the 1200 × 630 image a link preview shows, one per page, drawn with matplotlib.

A lesson's card shows where it sits (part and number), its title and its headline number with
what the number is; any other page's card shows its title and its summary. Cards are drawn with
matplotlib's own DejaVu Sans, offline, and kept under `.cache/cards/` by a hash of what they show,
so an unchanged card is copied rather than drawn again.

Why not Material's social plugin: it needs Pillow and CairoSVG with the Cairo library, and it
fetches its fonts from Google Fonts while building; the course's build loads nothing from outside.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Bump when the drawing changes, so kept cards are not reused.
FORMAT = "card-2"
WIDTH, HEIGHT = 1200, 630
BACKGROUND = "#283593"  # Material's indigo 800: white text on it is 10:1
ACCENT = "#c5cae9"


@dataclass(frozen=True)
class Card:
    """What one card shows."""

    title: str
    kicker: str
    """Above the title: 'Part 2 · The maths of one request · Lesson 2.4'."""
    headline: str | None = None
    """A lesson's headline number, formatted: '144 KiB'."""
    label: str | None = None
    """What the number is, or a page's summary."""
    site: str = ""
    """The course's name, in the corner."""

    def key(self) -> str:
        """A hash of everything drawn."""
        parts = (FORMAT, self.title, self.kicker, self.headline, self.label, self.site)
        return hashlib.sha256("\0".join(p or "" for p in parts).encode()).hexdigest()

    @property
    def alt(self) -> str:
        """The card's text, for `og:image:alt`."""
        number = f" {self.headline} {self.label or ''}".rstrip() if self.headline else ""
        return f"{self.kicker}: {self.title}.{number}".strip()


def card_name(page_url: str) -> str:
    """The card's path in the site for a page URL: `part-2/kv-cache/` ->
    `assets/cards/part-2-kv-cache.png`."""
    stem = page_url.strip("/").removesuffix(".html").replace("/", "-") or "index"
    return f"assets/cards/{stem}.png"


def write_card(card: Card, target: Path, cache: Path) -> bool:
    """Put the card at `target`, drawn now or copied from the cache; True when it was reused."""
    kept = cache / f"{card.key()}.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    if kept.is_file():
        shutil.copyfile(kept, target)
        return True
    cache.mkdir(parents=True, exist_ok=True)
    tmp = kept.with_name(f".{kept.name}.{os.getpid()}.tmp")
    draw_card(card, tmp)
    os.replace(tmp, kept)
    shutil.copyfile(kept, target)
    return False


def draw_card(card: Card, target: Path) -> None:
    """Draw one card as a PNG with matplotlib (Agg, default style, no metadata that changes)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update({"font.family": "DejaVu Sans"})
        fig = Figure(figsize=(WIDTH / 100, HEIGHT / 100), dpi=100, facecolor=BACKGROUND)
        # parse_math off: a '$' in a title or a recorded value is a dollar, never mathtext
        text: dict[str, Any] = {"color": "white", "ha": "left", "va": "top", "parse_math": False}
        fig.text(0.06, 0.9, card.kicker, fontsize=22, **{**text, "color": ACCENT})
        title = "\n".join(textwrap.wrap(card.title, 30)[:3])
        fig.text(0.06, 0.78, title, fontsize=48, fontweight="bold", linespacing=1.15, **text)
        if card.headline:
            fig.text(0.06, 0.4, card.headline, fontsize=60, fontweight="bold", **text)
            label = "\n".join(textwrap.wrap(card.label or "", 50)[:2])
            fig.text(0.06, 0.24, label, fontsize=22, **{**text, "color": ACCENT})
        elif card.label:
            label = "\n".join(textwrap.wrap(card.label, 56)[:3])
            fig.text(0.06, 0.34, label, fontsize=24, linespacing=1.3, **{**text, "color": ACCENT})
        fig.text(0.94, 0.05, card.site, fontsize=18, **{**text, "ha": "right", "va": "bottom"})
        fig.savefig(
            target, format="png", dpi=100, facecolor=BACKGROUND, metadata={"Software": None}
        )
