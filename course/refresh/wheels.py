"""The wheels an engine release needs on a host: its own, and each requirement the host does not
already meet.

A requirement is met when the host holds the package at a version its specifier allows. Where the
host's list names a package without its version, the requirement is met when the release before
(the one the lesson ran on there) asked for the same; a requirement the new release changed is
carried. Requirements of carried packages that the host holds at an unknown version are assumed
met, and said so. Wheels are fetched with `pip download --no-deps` from pip's configured index:
for the GPU host, as `scripts/fetch-gpu-wheels.sh` does (Python 3.12, x86-64 manylinux).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import RefreshError

GPU_HOST_PACKAGES = Path("scripts") / "gpu-host-packages.txt"
"""The GPU host's packages (`pip list --format=freeze` there; a bare name: version not known)."""
CACHE = Path(".cache") / "refresh" / "wheels"
MANYLINUX = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
_HOST_QUERY = r"""
import importlib.metadata as m, json, sys
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3],
                  "packages": {d.metadata["Name"]: d.version for d in m.distributions()}}))
"""


@dataclass(frozen=True)
class Host:
    """Where the wheels will be installed: its Python and the packages it already holds."""

    label: str
    python: str
    """Its Python's version, `3.12.3`."""
    packages: dict[str, str | None]
    """Canonical name -> version (None: held, version not known)."""
    platforms: tuple[str, ...] = ()
    """Platform tags to fetch for (none: this machine's own)."""

    def markers(self) -> dict[str, str]:
        """The environment its requirements' markers are evaluated in."""
        env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
        env.update(python_version=".".join(self.python.split(".")[:2]),
                   python_full_version=self.python, extra="")  # fmt: skip
        if self.platforms:
            env.update(sys_platform="linux", platform_system="Linux", platform_machine="x86_64",
                       os_name="posix", implementation_name="cpython",
                       platform_python_implementation="CPython")  # fmt: skip
        return env


def read_packages(path: Path) -> dict[str, str | None]:
    """A `pip list --format=freeze` file: `name==version` lines, bare names, `#` comments."""
    found: dict[str, str | None] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        name, sep, version = text.partition("==")
        if not name.strip() or (sep and not version.strip()):
            raise RefreshError(f"{path}:{number}: expected NAME or NAME==VERSION, found {line!r}")
        found[str(canonicalize_name(name.strip()))] = version.strip() or None
    return found


def gpu_host(root: Path, path: Path | None = None) -> Host:
    """The GPU host without internet, as its package list describes it (Python 3.12, x86-64)."""
    listing = path or root / GPU_HOST_PACKAGES
    if not listing.is_file():
        raise RefreshError(
            f"{listing}: no list of the GPU host's packages (on the host: python3 -m pip list "
            f"--format=freeze > {GPU_HOST_PACKAGES})"
        )
    return Host(f"the GPU host ({listing.name})", "3.12.3", read_packages(listing),
                tuple(MANYLINUX))  # fmt: skip


def this_host(python: str) -> Host:
    """This machine, as the lab's interpreter sees it."""
    exe = shutil.which(python) or python
    try:
        done = subprocess.run([exe, "-c", _HOST_QUERY], capture_output=True, text=True,
                              timeout=60, check=True)  # fmt: skip
        data = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        raise RefreshError(f"{python}: cannot list its packages ({exc})") from None
    packages: dict[str, str | None] = {
        str(canonicalize_name(n)): v for n, v in data["packages"].items() if n
    }
    return Host("this machine", data["python"], packages)


@dataclass(frozen=True)
class Wheel:
    """One wheel to carry, and why."""

    name: str
    version: str
    path: Path
    why: str

    @property
    def spec(self) -> str:
        """What `course run --engine` is given for it."""
        return f"{self.name}=={self.version}"


@dataclass
class Needs:
    """What a release needs on a host."""

    wheels: list[Wheel] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    """Requirements taken as met on a host that holds the package at an unknown version."""

    @property
    def specs(self) -> list[str]:
        """`--engine` specs: the release and each wheel carried with it."""
        return [w.spec for w in self.wheels]

    def megabytes(self) -> float:
        """Their size together."""
        return sum(w.path.stat().st_size for w in self.wheels) / 1e6


def requirements(wheel: Path, host: Host) -> list[Requirement]:
    """A wheel's requirements that apply on the host (no extras)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next((n for n in archive.namelist() if n.endswith(".dist-info/METADATA")), None)
        if name is None:
            raise RefreshError(f"{wheel}: a wheel without .dist-info/METADATA")
        metadata = Parser().parsestr(archive.read(name).decode("utf-8"))
    found = []
    for line in metadata.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise RefreshError(f"{wheel.name}: Requires-Dist {line!r}: {exc}") from None
        if req.marker is None or req.marker.evaluate(host.markers()):
            found.append(req)
    return found


def download(specs: list[str], folder: Path, host: Host) -> None:
    """`pip download --no-deps` of binary wheels for the host into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--only-binary=:all:", "--disable-pip-version-check", "-d", str(folder)]  # fmt: skip
    if host.platforms:
        command += ["--python-version", ".".join(host.python.split(".")[:2]),
                    "--implementation", "cp"]  # fmt: skip
        for platform in host.platforms:
            command += ["--platform", platform]
    done = subprocess.run([*command, *specs], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(f"  | {x}" for x in (done.stdout + done.stderr).strip().splitlines()[-8:])
        raise RefreshError(f"pip could not download {' '.join(specs)} (exit status "
                           f"{done.returncode}):\n{tail}")  # fmt: skip


def best_wheel(folder: Path, req: Requirement) -> Path | None:
    """The newest wheel in `folder` that meets `req`."""
    found: list[tuple[Version, Path]] = []
    for path in folder.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(path.name)
        if name == canonicalize_name(req.name) and req.specifier.contains(version, True):
            found.append((version, path))
    return max(found)[1] if found else None


def fetched(req: Requirement, folder: Path, host: Host) -> Path:
    """The wheel that meets `req`, from the folder or downloaded into it."""
    wheel = best_wheel(folder, req)
    if wheel is None or "==" not in str(req.specifier):
        download([f"{req.name}{req.specifier}"], folder, host)
        wheel = best_wheel(folder, req)
    if wheel is None:
        raise RefreshError(f"no wheel of {req} for {host.label} on the index")
    return wheel


def release_needs(root: Path, name: str, version: str, before: str | None, host: Host) -> Needs:
    """The wheels `name==version` needs on the host; `before` is the release it replaces there."""
    cache = root / CACHE / ("-".join(host.platforms[:1]) or "here") / host.python
    needs = Needs()
    engine = fetched(Requirement(f"{name}=={version}"), cache, host)
    needs.wheels.append(Wheel(name, version, engine, "the release"))
    earlier: dict[str, str] | None = None

    def asked_before(key: str) -> str | None:
        """What the release before asked of a package (fetched once, when first needed)."""
        nonlocal earlier
        if earlier is None:
            earlier = {}
            if before is not None and before != version:
                previous = fetched(Requirement(f"{name}=={before}"), cache, host)
                asked = requirements(previous, host)
                earlier = {canonicalize_name(r.name): str(r.specifier) for r in asked}
        return earlier.get(key)

    queue = [(req, name) for req in requirements(engine, host)]
    seen = {canonicalize_name(name)}
    while queue:
        req, parent = queue.pop(0)
        key = canonicalize_name(req.name)
        if key in seen:
            continue
        held = host.packages.get(key, "")
        if held and req.specifier.contains(held, prereleases=True):
            continue
        if held is None and parent != name:
            needs.assumed.append(f"{req} (for {parent}): {host.label} holds {req.name}")
            continue
        if held is None and asked_before(key) == str(req.specifier):
            continue  # held at a version the release before accepted, and asked for alike
        seen.add(key)
        wheel = fetched(req, cache, host)
        _, got, _, _ = parse_wheel_filename(wheel.name)
        if held:
            why = f"{parent} asks for {req}; {host.label} holds {held}"
        elif held is None:
            why = f"{parent} now asks for {req} (before: {asked_before(key) or 'nothing'})"
        else:
            why = f"{parent} asks for {req}; {host.label} lacks it"
        needs.wheels.append(Wheel(req.name, str(got), wheel, why))
        queue += [(r, req.name) for r in requirements(wheel, host)]
    return needs


def carry(needs: Needs, folder: Path) -> list[Path]:
    """Copy the wheels into `folder` (kept apart from `.whl/*.whl`, which the GPU-host scripts
    install for every run); the copies."""
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for wheel in needs.wheels:
        target = folder / wheel.path.name
        if not target.is_file():
            shutil.copyfile(wheel.path, target)
        copies.append(target)
    return copies
