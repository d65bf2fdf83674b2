"""`course publish`: parse the arguments, call `pipeline.publish`, say what was done."""

from __future__ import annotations

from pathlib import Path

import click

from ..console import reports_errors, stderr, stdout


@click.command()
@click.option("--site-url", metavar="URL", help="Its address (default: mkdocs.yml's site_url).")
@click.option("--to", type=click.Path(file_okay=False, path_type=Path), help="Into this folder.")
@click.option("--branch", metavar="NAME", help="As this git branch (e.g. gh-pages), pushed.")
@click.option("--remote", default="origin", show_default=True, help="With --branch: where to.")
@click.option("-m", "--message", help="With --branch: the commit message.")
@click.option(
    "--engine", type=click.Choice(["mkdocs", "zensical"]), default="mkdocs", help="What builds it."
)
@click.pass_obj
@reports_errors
def publish(
    root: Path,
    site_url: str | None,
    to: Path | None,
    branch: str | None,
    remote: str,
    message: str | None,
    engine: str,
) -> None:
    """Build the site for its real address, check every internal link, and deploy it."""
    from .pipeline import publish as publish_site
    from .pipeline import summary

    done = publish_site(root, site_url, to, branch, remote, message, engine=engine)
    for line in summary(done):
        stderr.print(line, highlight=False, soft_wrap=True)
    stdout.print(f"published: {done.where}", highlight=False)
