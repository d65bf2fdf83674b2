"""The package index pip is configured to use, and the newest release of a package on it.

The address is the one pip itself would use: `pip config list` gives pip's own reading of its
configuration (PIP_CONFIG_FILE, the global, user and site files, then PIP_* variables, each over the
one before), and `index-url` is taken from the environment, then the `install` section, then
`global`, else PyPI. The index is asked through the simple repository API's JSON form (PEP 691);
pre-releases and yanked files are left out.
"""

from __future__ import annotations

import ast
import ssl
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ..errors import IndexUnreachable, RefreshError

PYPI = "https://pypi.org/simple/"
JSON_FORM = "application/vnd.pypi.simple.v1+json"
TIMEOUT = 20.0


@dataclass(frozen=True)
class Index:
    """Where to ask, and the certificates to trust there (pip's `cert`, when set)."""

    url: str
    cert: str | None = None


def pip_settings(python: str = sys.executable) -> dict[str, str]:
    """pip's configuration as pip reads it (`pip config list`): `section.key` -> value."""
    try:
        done = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        try:
            found[key.strip()] = str(ast.literal_eval(value.strip()))
        except (ValueError, SyntaxError):
            found[key.strip()] = value.strip().strip("'\"")
    return found


def configured_index(python: str = sys.executable) -> Index:
    """The index pip installs from (its `index-url`), else PyPI."""
    settings = pip_settings(python)

    def setting(name: str) -> str | None:
        for section in (":env:", "install", "global"):
            if settings.get(f"{section}.{name}"):
                return settings[f"{section}.{name}"].split()[0]
        return None

    url = setting("index-url") or PYPI
    return Index(url if url.endswith("/") else url + "/", setting("cert"))


def client(index: Index) -> httpx.Client:
    """An HTTP client for the index (its certificates; proxies from the environment)."""
    verify: ssl.SSLContext | bool = True
    if index.cert:
        verify = ssl.create_default_context(cafile=index.cert)
    return httpx.Client(
        timeout=TIMEOUT, follow_redirects=True, verify=verify, headers={"Accept": JSON_FORM}
    )


def file_version(filename: str) -> Version | None:
    """The release a distribution file belongs to (a wheel or an sdist), or None."""
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        if filename.endswith((".tar.gz", ".zip")):
            return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None


def newest_in(page: dict[str, Any]) -> str | None:
    """The newest final release of a project page (PEP 691) with at least one file not yanked."""
    found = []
    for entry in page.get("files", []):
        version = file_version(str(entry.get("filename", "")))
        if version is None or version.is_prerelease or entry.get("yanked"):
            continue
        found.append(version)
    return str(max(found)) if found else None


def unreachable(index: Index, why: str) -> IndexUnreachable:
    """The one line said when the index cannot be asked."""
    return IndexUnreachable(f"the package index {index.url} cannot be reached ({why})")


def newest_release(http: httpx.Client, index: Index, package: str) -> str | None:
    """The newest final release of `package` on the index; None when the index does not hold it."""
    url = f"{index.url}{canonicalize_name(package)}/"
    try:
        answer = http.get(url)
    except httpx.TransportError as exc:
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise unreachable(index, why) from None
    if answer.status_code == 404:
        return None
    if answer.status_code >= 500:
        raise unreachable(index, f"{url} answered {answer.status_code}")
    if answer.status_code != 200:
        raise RefreshError(f"{url}: the package index answered {answer.status_code}")
    kind = answer.headers.get("content-type", "").split(";")[0].strip()
    if kind != JSON_FORM:
        raise RefreshError(
            f"{url}: the package index answered in {kind or 'an unnamed form'}, not the simple "
            f"repository API's JSON form ({JSON_FORM}, PEP 691)"
        )
    try:
        page = answer.json()
    except ValueError as exc:
        raise RefreshError(f"{url}: not valid JSON: {exc}") from None
    return newest_in(page)


def newest_releases(index: Index, packages: list[str]) -> dict[str, str | None]:
    """The newest final release of each package, asked side by side."""
    with client(index) as http, ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(lambda p: newest_release(http, index, p), packages))
    return dict(zip(packages, found, strict=True))
