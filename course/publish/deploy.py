"""Where a checked site goes: a folder (for rsync or object storage) or a git branch (GitHub Pages).

A folder is replaced as a whole (the new site is copied beside it and swapped in), and only a
folder that is empty or already holds a published site is replaced. A branch is written with
ghp-import, as `mkdocs gh-deploy` does: one commit on top of the remote branch whose tree is
exactly the site plus `.nojekyll` (so that GitHub Pages serves folders starting with '_'), then
pushed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from ..errors import PublishError


def deploy_to_folder(site: Path, target: Path, root: Path) -> Path:
    """Make `target` hold exactly the site; PublishError when it holds something else."""
    target = target.resolve()
    root = root.resolve()
    if target == root or target in root.parents or (target / ".git").exists():
        raise PublishError(
            f"--to {target}: that is the project or a git checkout; name a folder of its own "
            "for the published site"
        )
    if target.is_file():
        raise PublishError(f"--to {target}: a file is there, not a folder")
    if target.is_dir() and any(target.iterdir()) and not (target / "index.html").is_file():
        raise PublishError(
            f"--to {target}: the folder holds files but no published site (no index.html); "
            "refusing to replace it: empty it or name another folder"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = target.with_name(f".{target.name}.new-{os.getpid()}")
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(site, fresh)
    if target.exists():
        os.replace(target, old)
    os.replace(fresh, target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=300
    )


def deploy_to_branch(repo: Path, site: Path, branch: str, remote: str, message: str) -> str:
    """Commit the site as the tip of `branch` (history kept) and push it to `remote`; the commit.

    PublishError when `repo` is not a git checkout, the remote is unknown, or the push fails.
    """
    import ghp_import  # type: ignore[import-untyped]

    if _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise PublishError(f"--branch {branch}: {repo} is not a git checkout")
    if _git(repo, "remote", "get-url", remote).returncode != 0:
        raise PublishError(
            f"--branch {branch}: no git remote '{remote}' in {repo} (add one with `git remote add "
            f"{remote} URL`, or name another with --remote)"
        )
    # Follow what the remote holds, so that the new commit goes on top of it (a missing branch is
    # a first publication).
    _git(repo, "fetch", "--quiet", remote, f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}")
    try:
        with contextlib.chdir(repo):  # ghp-import works on the git checkout of the current folder
            ghp_import.ghp_import(
                str(site), mesg=message, remote=remote, branch=branch, push=True, nojekyll=True
            )
    except ghp_import.GhpError as exc:
        raise PublishError(f"--branch {branch}: ghp-import: {exc.message}") from None
    except subprocess.CalledProcessError as exc:
        raise PublishError(
            f"--branch {branch}: `git push {remote} {branch}` failed (exit {exc.returncode}); "
            "see git's message above"
        ) from None
    done = _git(repo, "rev-parse", f"refs/heads/{branch}")
    return done.stdout.strip()
