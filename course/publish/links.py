"""The link check of a built site: every internal link and anchor, external links listed only.

Every HTML page of the site is read; every address it names (`href`, `src`, `srcset`, the
OpenGraph image) is sorted into internal (relative, root-relative, or under the site's own
address) and external. An internal address must lead to a file of the site and, with a
`#fragment`, to an element with that id in the page it leads to. External addresses are listed,
never fetched: the check runs offline and decides nothing by the weather of other servers.
The sitemap's and the feed's addresses are checked the same way.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

_SKIP = ("mailto:", "tel:", "javascript:", "data:", "blob:", "about:")
_XML_LINK = re.compile(r"<loc>([^<]+)</loc>|<link\b[^>]*href=\"([^\"]+)\"")
# attributes that name an address the page links or loads
_ADDRESS_ATTRS = {"href", "src", "poster", "action"}


@dataclass
class LinkReport:
    """What the check found."""

    pages: int = 0
    internal: int = 0
    """Internal addresses checked (each occurrence)."""
    broken: list[str] = field(default_factory=list)
    """'<page>: <address>: <why>' for each internal address that leads nowhere."""
    external: dict[str, int] = field(default_factory=dict)
    """External address -> how many times the site names it."""


class _Page(HTMLParser):
    """The ids a page defines and the addresses it names."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.addresses: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {k: v for k, v in attrs if v is not None}
        if "id" in named:
            self.ids.add(named["id"])
        if tag == "a" and "name" in named:
            self.ids.add(named["name"])
        for key, value in named.items():
            if key in _ADDRESS_ATTRS:
                self.addresses.append(value.strip())
            elif key in ("srcset", "imagesrcset"):
                self.addresses += [part.split()[0] for part in value.split(",") if part.strip()]
        if tag == "meta" and named.get("property", "").startswith("og:") and "content" in named:
            if named["property"] in ("og:image", "og:url"):
                self.addresses.append(named["content"].strip())


def _target_file(site: Path, path: str) -> Path | None:
    """The file a site path (relative to the site root) serves, as a static server would."""
    candidate = site / unquote(path)
    if path == "" or path.endswith("/"):
        candidate = candidate / "index.html"
    elif candidate.is_dir():
        candidate = candidate / "index.html"
    try:
        resolved = candidate.resolve()
    except OSError:
        return None
    if not resolved.is_relative_to(site.resolve()) or not resolved.is_file():
        return None
    return resolved


def check_links(site: Path, site_url: str) -> LinkReport:
    """Check every internal link and anchor of a built site served at `site_url`."""
    site = site.resolve()
    base = urlsplit(site_url)
    base_path = base.path if base.path.endswith("/") else base.path + "/"
    report = LinkReport()
    parsed: dict[Path, _Page] = {}

    def page_of(path: Path) -> _Page:
        if path not in parsed:
            reader = _Page()
            reader.feed(path.read_text(encoding="utf-8", errors="replace"))
            parsed[path] = reader
        return parsed[path]

    external: dict[str, int] = defaultdict(int)
    sources = sorted(site.rglob("*.html")) + [
        p for p in (site / "sitemap.xml", site / "feed.xml") if p.is_file()
    ]
    for source in sources:
        rel = source.relative_to(site).as_posix()
        if source.suffix == ".html":
            report.pages += 1
            addresses = page_of(source).addresses
        else:
            text = source.read_text(encoding="utf-8")
            addresses = [a or b for a, b in _XML_LINK.findall(text)]
        # the page's own address, as the browser sees it: 404.html is served at any depth, and
        # its addresses are root-relative for that reason
        here = urljoin(f"{base.scheme}://{base.netloc}{base_path}", rel)
        for address in addresses:
            if not address or address.startswith(_SKIP):
                continue
            absolute = urljoin(here, address)
            parts = urlsplit(absolute)
            if parts.scheme not in ("http", "https"):
                continue
            if parts.netloc != base.netloc or not (parts.path + "/").startswith(base_path):
                external[address] += 1
                continue
            report.internal += 1
            site_path = parts.path[len(base_path) :] if parts.path != base_path[:-1] else ""
            target = _target_file(site, site_path)
            if target is None:
                report.broken.append(f"{rel}: {address}: no such file in the site")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html" and fragment not in page_of(target).ids:
                shown = target.relative_to(site).as_posix()
                report.broken.append(
                    f"{rel}: {address}: no element with id '{fragment}' in {shown}"
                )
    report.external = dict(sorted(external.items()))
    return report
