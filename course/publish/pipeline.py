"""`course publish`: the site built for its real address, checked, then deployed.

    publish(root, site_url, to=DIR)                 a folder, for rsync or object storage
    publish(root, site_url, branch="gh-pages")      a git branch, pushed (GitHub Pages)

1. The address: `--site-url`, else mkdocs.yml's `site_url` (`COURSE_SITE_URL`); the `.invalid`
   placeholder is refused, since canonical links, the sitemap, the feed and the social cards all
   name it.
2. The build (`course.site.build_site`) into `.cache/publish/site/`: with a real address every page
   gets its canonical link, description, OpenGraph and Twitter meta and social card, and the site
   its sitemap with each lesson's run date, robots.txt and feed (`course.pages.publishing`).
3. The checks: every internal link and anchor leads somewhere (`links.py`); external links are
   listed, not fetched; the sitemap and the feed are well-formed.
4. The precompressed copies (`compress.py`): NAME.gz and NAME.br beside each text file, for hosts
   that send them instead of compressing (nginx `gzip_static`, many static hosts).
5. The deploy (`deploy.py`), only when every check passed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import PublishError
from ..site import CONFIG, BuildResult, build_site
from .compress import Compressed, compress_site, summary_line
from .deploy import deploy_to_branch, deploy_to_folder
from .links import LinkReport, check_links

STAGING = Path(".cache") / "publish" / "site"
"""Where the site is built and checked before it is deployed (under the project)."""


@dataclass
class Published:
    """What `publish` did."""

    site_url: str
    build: BuildResult
    links: LinkReport
    compressed: Compressed
    where: str
    """The folder, or 'branch <name> of <remote> at <commit>'."""


def configured_url(root: Path) -> str:
    """mkdocs.yml's `site_url` as mkdocs reads it (`!ENV COURSE_SITE_URL` included)."""
    from mkdocs.config import load_config

    config = load_config(config_file=str(root / CONFIG))
    return str(config.get("site_url") or "")


def checked_url(url: str, where: str) -> str:
    """A real http(s) address ending in '/'; PublishError for the placeholder or a malformed one."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    hint = (
        "give the address the site will be served at with --site-url https://…/ (or set "
        "COURSE_SITE_URL)"
    )
    if parts.scheme not in ("http", "https") or not host:
        raise PublishError(f"the site's address {url!r} ({where}) is not an http(s) URL: {hint}")
    if host.endswith(".invalid"):
        raise PublishError(
            f"the site's address is the placeholder {url} ({where}); canonical links, the sitemap, "
            f"the feed and the social cards would all name it: {hint}"
        )
    if parts.query or parts.fragment:
        raise PublishError(f"the site's address {url!r} ({where}) must not carry ?query or #anchor")
    return url if url.endswith("/") else url + "/"


def check_feeds(site: Path) -> None:
    """The sitemap and the feed parse as XML, with the elements their formats require."""
    sitemap_ns = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
    atom_ns = "{http://www.w3.org/2005/Atom}"
    for name, root_tag, required in (
        ("sitemap.xml", f"{sitemap_ns}urlset", (f"{sitemap_ns}url/{sitemap_ns}loc",)),
        ("feed.xml", f"{atom_ns}feed", (f"{atom_ns}id", f"{atom_ns}title", f"{atom_ns}updated")),
    ):
        path = site / name
        if not path.is_file():
            raise PublishError(f"the built site has no {name}")
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise PublishError(f"{name} is not well-formed XML: {exc}") from None
        if root.tag != root_tag or any(root.find(tag) is None for tag in required):
            raise PublishError(f"{name} lacks what its format requires ({root_tag}, {required})")


def publish(
    root: Path,
    site_url: str | None = None,
    to: Path | None = None,
    branch: str | None = None,
    remote: str = "origin",
    message: str | None = None,
    jobs: int | None = None,
    engine: str = "mkdocs",
) -> Published:
    """Build the site for its real address with `engine`, check it, and deploy it to a folder or
    a branch."""
    if (to is None) == (branch is None):
        raise PublishError("say where to publish: --to DIR (a folder) or --branch NAME (git)")
    url = checked_url(site_url, "--site-url") if site_url else None
    if url is None:
        url = checked_url(configured_url(root), f"site_url in {CONFIG}")
    staging = root / STAGING
    built = build_site(root, staging, site_url=url, jobs=jobs, engine=engine)
    report = check_links(built.site_dir, url)
    if report.broken:
        shown = "\n".join(f"  - {line}" for line in report.broken)
        raise PublishError(
            f"{len(report.broken)} broken internal link(s) in the built site; nothing was "
            f"published:\n{shown}"
        )
    check_feeds(built.site_dir)
    compressed = compress_site(built.site_dir, jobs)
    if to is not None:
        where = str(deploy_to_folder(built.site_dir, to, root))
    else:
        assert branch is not None
        text = message or f"Publish the course at {url}"
        commit = deploy_to_branch(root, built.site_dir, branch, remote, text)
        where = f"branch {branch} of {remote} at {commit[:12]}"
    return Published(url, built, report, compressed, where)


def summary(done: Published) -> list[str]:
    """What `course publish` says about a publication: the build, the links checked, the
    precompressed copies, the external links (listed, not fetched)."""
    links = done.links
    lines = [
        f"built for {done.site_url} in {done.build.seconds:.1f} s; {links.pages} pages, "
        f"{links.internal:,} internal links and anchors checked, none broken",
        summary_line(done.compressed),
    ]
    if links.external:
        lines.append(f"{len(links.external)} external links, listed, not fetched:")
        lines += [
            f"  {url}" + (f" ({count}×)" if count > 1 else "")
            for url, count in links.external.items()
        ]
    return lines
