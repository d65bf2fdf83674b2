"""Talking to llama-server over HTTP (standard library only), and starting one for a while.

`Server` sends requests to a running llama-server: its /health, /props, /tokenize,
/apply-template and the native /completion, streamed, so that the time to the first token is
the time a user waits for it. Every answer of /completion ends with the server's own `timings`:
`cache_n` (prompt tokens found in the slot's cache), `prompt_n` (prompt tokens computed) and
`prompt_ms` (how long computing them took). `Launched` starts llama-server as a child process
for the length of a `with` block, its output in a log file, and ends it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from labkit.checks import check

TIMING_KEYS = ("cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms")


@dataclass
class Answer:
    """One streamed completion: what the client saw and what the server said."""

    ttft: float
    """Seconds from sending the request to receiving its first generated token."""
    seconds: float
    """Seconds until the last chunk."""
    timings: dict[str, float]
    tokens: list[int] = field(default_factory=list)
    slot: int | None = None

    @property
    def cache_n(self) -> int:
        return int(self.timings["cache_n"])

    @property
    def prompt_n(self) -> int:
        return int(self.timings["prompt_n"])

    @property
    def prompt_tokens(self) -> int:
        return self.cache_n + self.prompt_n


class Server:
    """A llama-server at host:port."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8080, timeout: float = 300) -> None:
        self.base, self.timeout = f"http://{host}:{port}", timeout

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """GET (no body) or POST a JSON body; the JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            check(False, f"{path} answered {err.code}: {err.read()[:500]!r}")
            raise

    def wait(self, seconds: float, process: subprocess.Popen[bytes] | None = None) -> None:
        """Wait until /health answers 200 (the model is loaded)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if process is not None and process.poll() is not None:
                check(
                    False, f"llama-server ended (status {process.returncode}) before it was ready"
                )
            check(time.monotonic() < deadline, f"no llama-server answering at {self.base}/health")
            time.sleep(0.25)

    def props(self) -> dict[str, Any]:
        """The server's /props: its build, model, slots and each slot's context."""
        got: dict[str, Any] = self.call("/props")
        return got

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` as the served model's tokenizer splits it, special tokens such
        as <|im_start|> recognised (as /completion does with a prompt)."""
        got = self.call("/tokenize", {"content": text, "parse_special": True})
        return [int(t) for t in got["tokens"]]

    def apply_template(self, messages: list[dict[str, str]]) -> str:
        """The prompt the server's chat template makes of `messages` (what /v1/chat/completions
        would compute)."""
        return str(self.call("/apply-template", {"messages": messages})["prompt"])

    def complete(self, prompt: str, max_tokens: int = 8, cache: bool = True) -> Answer:
        """One streamed /completion with greedy sampling; the time to its first token, its
        whole time and the server's timings."""
        body = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "cache_prompt": cache,
            "temperature": 0.0,
            "seed": 0,
            "ignore_eos": True,  # always max_tokens tokens, whatever random weights write
            "stream": True,
            "return_tokens": True,
        }
        req = urllib.request.Request(
            self.base + "/completion",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        t0 = time.perf_counter()
        first: float | None = None
        tokens: list[int] = []
        last: dict[str, Any] = {}
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                for raw in resp:
                    line = raw.decode("utf-8", errors="replace").strip()
                    if not line.startswith("data:"):
                        continue
                    chunk = json.loads(line[5:])
                    if chunk.get("tokens"):
                        if first is None:
                            first = time.perf_counter() - t0
                        tokens += [int(t) for t in chunk["tokens"]]
                    last = chunk
                    if chunk.get("stop"):
                        break
        except urllib.error.HTTPError as err:
            check(False, f"/completion answered {err.code}: {err.read()[:500]!r}")
            raise
        seconds = time.perf_counter() - t0
        check(
            "timings" in last, "the server's last chunk has no 'timings' (llama-server adds them)"
        )
        check(first is not None, "the server streamed no token")
        assert first is not None
        timings = {k: float(last["timings"][k]) for k in TIMING_KEYS}
        return Answer(first, seconds, timings, tokens, last.get("id_slot"))


def free_port() -> int:
    """A TCP port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Launched:
    """llama-server started with `args` for the length of a `with` block, writing its output to
    `log`; ended (SIGTERM, then SIGKILL after 20 s) when the block ends."""

    def __init__(self, binary: str, args: list[str], log: Path, deadline: float = 180) -> None:
        self.port = free_port()
        self.cmd = [binary, *args, "--host", "127.0.0.1", "--port", str(self.port)]
        self.log, self.deadline = log, deadline
        self.server = Server(port=self.port)
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            self.server.wait(self.deadline, self.process)
        except SystemExit:
            self.__exit__()
            tail = self.log.read_text(errors="replace").splitlines()[-20:]
            print("\n".join(["llama-server's last lines:", *tail]))
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def text(self) -> str:
        """What the server has written to its log so far."""
        return self.log.read_text(errors="replace")
