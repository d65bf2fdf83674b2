"""The Atom feed of lessons recorded and re-run: one entry per good run of each written lesson.

    2.4 The KV cache: re-run on 2026-12-02 with transformers 5.24.0

An entry links the lesson's page and says what changed since the lesson's previous good run
(engine versions, GPU); a reader subscribed to the feed learns when a lesson's numbers moved.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin
from xml.sax.saxutils import escape, quoteattr

from ..record.models import Run
from ..record.store import Store
from . import facts
from .choose import page_runs
from .outline import Outline

FEED = "feed.xml"
ATOM = "http://www.w3.org/2005/Atom"


@dataclass(frozen=True)
class Entry:
    """One run of one lesson, as the feed lists it."""

    id: str
    title: str
    link: str
    updated: str
    summary: str


def _rfc3339(iso: str) -> str:
    moment = datetime.fromisoformat(iso)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _changes(old: Run | None, new: Run) -> list[str]:
    """What differs between a lesson's previous good run and this one."""
    if old is None:
        return []
    changed = []
    for name in sorted(set(old.record.engine) | set(new.record.engine)):
        before, after = old.record.engine.get(name), new.record.engine.get(name)
        if before != after:
            changed.append(f"{name} {before or '(none)'} → {after or '(none)'}")
    if facts.gpu_name(old) != facts.gpu_name(new):
        changed.append(f"GPU {facts.gpu_name(old) or 'none'} → {facts.gpu_name(new) or 'none'}")
    return changed


def feed_entries(outline: Outline, store: Store, site_url: str) -> list[Entry]:
    """Every good run of every written lesson on its lab's card, newest first."""
    entries = []
    for lesson in outline.written:
        previous: Run | None = None
        for run in page_runs(store, lesson.id):  # a run on another card moves no page
            day = run.record.started[:10]
            engine = facts.engine_text(run)
            verb = "recorded" if previous is None else "re-run"
            changes = _changes(previous, run)
            summary = (
                f"Lesson {lesson.number}'s numbers were {verb} on {day} on "
                f"{facts.gpu_name(run) or 'a machine without a GPU'} with {engine} "
                f"(run {run.run_id})."
            )
            if changes:
                summary += " Changed since the previous run: " + "; ".join(changes) + "."
            page = urljoin(site_url, lesson.url)
            entries.append(
                Entry(
                    id=f"{page}#run-{run.run_id}",
                    title=f"{lesson.number} {lesson.title}: {verb} on {day} with {engine}",
                    link=page,
                    updated=_rfc3339(run.record.ended or run.record.started),
                    summary=summary,
                )
            )
            previous = run
    return sorted(entries, key=lambda e: (e.updated, e.id), reverse=True)


def atom(site_url: str, site_name: str, author: str, entries: list[Entry]) -> str:
    """The feed as Atom XML (RFC 4287)."""
    updated = entries[0].updated if entries else "1970-01-01T00:00:00Z"
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f'<feed xmlns="{ATOM}">',
        f"  <title>{escape(site_name)}: lessons recorded and re-run</title>",
        f"  <id>{escape(site_url)}</id>",
        '  <link rel="self" type="application/atom+xml" '
        f"href={quoteattr(urljoin(site_url, FEED))}/>",
        f'  <link rel="alternate" type="text/html" href={quoteattr(site_url)}/>',
        f"  <updated>{updated}</updated>",
        f"  <author><name>{escape(author)}</name></author>",
    ]
    for entry in entries:
        lines += [
            "  <entry>",
            f"    <id>{escape(entry.id)}</id>",
            f"    <title>{escape(entry.title)}</title>",
            f'    <link rel="alternate" type="text/html" href={quoteattr(entry.link)}/>',
            f"    <updated>{entry.updated}</updated>",
            f"    <summary>{escape(entry.summary)}</summary>",
            "  </entry>",
        ]
    lines.append("</feed>")
    return "\n".join(lines) + "\n"
