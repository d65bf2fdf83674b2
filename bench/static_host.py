"""A published site served by nginx on 127.0.0.1 as static hosts serve it (for bench/lighthouse.py).

    with serving(site, port, "precompressed", folder) as log:   # nginx in the foreground
        ...
    sent_by_encoding(log, site)                                # what it really sent

Ways: `gzip` (compressed on the fly, level 6, as most hosts do), `precompressed` (nothing
compressed by nginx; the `.gz`/`.br` copies `course publish` wrote are sent through
`gzip_static` and `brotli_static`, as hosts that only serve files do), `plain` (nothing
compressed). nginx runs as one foreground process whose files all live in `folder`, so the
system's nginx (Debian's package starts one on port 80) is neither used nor touched.

Every process the bench starts carries a mark in its environment: `marked()` finds them through
/proc wherever they went (Chromium leaves the process group of the Lighthouse that launched it),
and `end_marked()` ends them.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from course.publish.compress import MIN_BYTES, TEXT_SUFFIXES

NGINX = "/usr/sbin/nginx"
BROTLI_MODULE = "/usr/lib/nginx/modules/ngx_http_brotli_static_module.so"
WAYS = {
    "gzip": (
        "gzip on; gzip_comp_level 6; gzip_vary on; gzip_static off; gzip_types text/css "
        "application/javascript application/json text/xml application/xml application/atom+xml "
        "image/svg+xml text/plain;"
    ),
    "precompressed": "gzip off; gzip_static on; brotli_static on; gzip_vary on;",
    "plain": "gzip off;",
}
"""The nginx directives of each way of serving."""
PROBE = "course-bench-probe"
"""The user agent of the bench's own requests (readiness, encodings asked), apart in the log."""
MARK = "COURSE_LIGHTHOUSE_BENCH"
TOKEN = f"{os.getpid()}-{time.time_ns()}"


def marked(role: str = "") -> list[int]:
    """Live processes this bench started (`role`: only nginx's, or only Lighthouse's)."""
    tag = f"{MARK}={TOKEN}:{role}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # gone meanwhile, or another user's
                if any(v.startswith(tag) for v in (entry / "environ").read_bytes().split(b"\0")):
                    found.append(int(entry.name))  # (a zombie's environment reads empty)
    return found


def end_marked(role: str = "", grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds, to every process `marked(role)` finds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked(role):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while marked(role) and time.monotonic() < deadline:
            time.sleep(0.05)


def env_for(role: str, tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of a process the bench starts: marked, its temporary files in `tmp`."""
    return {**os.environ, MARK: f"{TOKEN}:{role}", "TMPDIR": str(tmp), **extra}


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(port: int, path: str, accept: str) -> tuple[int, str]:
    """(status, Content-Encoding or 'none') of one GET asking for the `accept` encodings."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers={"Accept-Encoding": accept, "User-Agent": PROBE})
        answer = conn.getresponse()
        answer.read()
        return answer.status, answer.getheader("Content-Encoding") or "none"
    finally:
        conn.close()


def nginx_config(site: Path, port: int, way: str, folder: Path) -> str:
    """nginx in the foreground, one process, every file of its own in `folder`."""
    temps = " ".join(
        f"{kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""load_module {BROTLI_MODULE};
daemon off;
master_process off;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    sendfile on;
    {temps}
    log_format bench '$uri\\t$status\\t$sent_http_content_encoding\\t$body_bytes_sent\\t'
                     '$http_accept_encoding\\t$http_user_agent';
    access_log {folder / "access.log"} bench;
    server {{
        listen 127.0.0.1:{port};
        root {site};
        index index.html;
        error_page 404 /404.html;
        {WAYS[way]}
    }}
}}
"""


@contextlib.contextmanager
def serving(site: Path, port: int, way: str, folder: Path) -> Iterator[Path]:
    """nginx serving `site` on 127.0.0.1:port the `way` given until the block ends; yields the
    path of its access log. SystemExit with nginx's words when it does not come up in 10 s."""
    folder.mkdir(parents=True)
    (folder / "nginx.conf").write_text(nginx_config(site, port, way, folder))
    command = [NGINX, "-p", str(folder), "-e", str(folder / "error.log")]
    with (folder / "stderr.log").open("wb") as stderr:
        proc = subprocess.Popen(
            [*command, "-c", str(folder / "nginx.conf")],
            env=env_for("nginx", folder),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError):
                if fetch(port, "/", "identity")[0] == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                logs = [folder / "stderr.log", folder / "error.log"]
                said = "".join(f.read_text(errors="replace") for f in logs if f.is_file())
                raise SystemExit(f"nginx did not serve 127.0.0.1:{port} ({way}):\n{said[-2000:]}")
            time.sleep(0.05)
        yield folder / "access.log"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        end_marked("nginx")


@dataclass
class Served:
    """What nginx sent one way's browser (its access log), and what a client asking got."""

    sent: dict[str, list[int]]
    """Per Content-Encoding ('none' for none): [responses, body bytes]."""
    accept_encoding: list[str]
    """The Accept-Encoding headers the browser sent."""
    sent_plain: list[str]
    """The addresses sent uncompressed."""
    text_sent_plain: list[str]
    """Of those, the text files of MIN_BYTES or more (the ones `course publish` compresses)."""
    probe: dict[str, str] = field(default_factory=dict)
    """The landing page's Content-Encoding for a client asking for only br, only gzip."""


def sent_by_encoding(log: Path, site: Path) -> Served:
    """The 200 responses of an access log, by encoding (the bench's own requests left out)."""
    sent: dict[str, list[int]] = {}
    asked: set[str] = set()
    plain: set[str] = set()
    for line in log.read_text().splitlines():
        uri, status, coding, size, accept, agent = line.split("\t")
        if agent == PROBE or status != "200":
            continue
        coding = "none" if coding == "-" else coding
        counts = sent.setdefault(coding, [0, 0])
        counts[0] += 1
        counts[1] += int(size)
        asked.add(accept)
        if coding == "none":
            plain.add(uri)
    text = sorted(
        uri
        for uri in plain
        if (site / uri.lstrip("/")).suffix in TEXT_SUFFIXES
        and (site / uri.lstrip("/")).stat().st_size >= MIN_BYTES
    )
    return Served(sent, sorted(asked), sorted(plain), text)


def probe(port: int) -> dict[str, str]:
    """The landing page's Content-Encoding for a client asking for only br, then only gzip."""
    return {accept: fetch(port, "/", accept)[1] for accept in ("br", "gzip")}
