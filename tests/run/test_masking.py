"""Masking that is exact: secrets and their encodings go, ordinary words stay, kept files stay
valid."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest
from support import CourseRun

from course.record.store import Store
from course.run.masking import MaskError, Redactor, can_be_secret, encoded_forms, secret_values

LAB = "echo-server"
SECRET = "s3cr3t-Value-42"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"


def test_only_values_that_can_be_secrets_are_masked() -> None:
    env = {
        "TOKENIZERS_PARALLELISM": "false",  # common in ML set-ups: a boolean, not a secret
        "MAX_NEW_TOKENS": "4096",
        "KEY_SIZE": "16GB",
        "SSH_KEY_PATH": "/root/.ssh/id_ed25519",
        "HF_TOKEN_MODE": "default",
        "SECRET_X": "no",
        "HF_TOKEN": SECRET,
        "DB_PASSWORD": "hunter2-local",
        "PATH": "/usr/bin",
    }
    assert secret_values(env) == [SECRET, "hunter2-local"]
    assert not can_be_secret("true") and not can_be_secret("0.25") and not can_be_secret("short")
    redact = Redactor(secret_values(env))
    text = "warm: false, tokens 4096, key /root/.ssh/id_ed25519, mode default"
    assert redact(text) == text
    assert redact(f"token={SECRET} password=hunter2-local") == "token=*** password=***"
    assert redact.value(42) == 42 and redact.value(SECRET) == "***"


def test_token_shapes_are_masked_wherever_they_appear() -> None:
    redact = Redactor([])  # none of these is in the environment
    shapes = [
        HF,
        "sk-proj-Ab3dEf6hIj9kLmN0pQrStU",
        "ghp_" + "A1b2" * 9,
        "github_pat_" + "11ABCDEFG0" * 3,
        "AKIAIOSFODNN7EXAMPLE",
    ]
    for token in shapes:
        assert redact(f"using {token}.") == "using ***.", token
    ordinary = "task-force disk-usage sk-learn AKIA hf_small ghp_short risk-assessment-2024-report"
    assert redact(ordinary) == ordinary


def test_encoded_forms_of_a_secret_are_masked() -> None:
    redact = Redactor([SECRET])
    for prefix in ("", "u:", "us:", "use:"):  # every alignment inside a longer base64 text
        encoded = base64.b64encode(f"{prefix}{SECRET}".encode()).decode()
        masked = redact(f"Authorization: Basic {encoded}")
        assert "***" in masked
        leftover = masked.split("Basic ")[1].replace("***", "")
        assert SECRET.encode() not in base64.b64decode(leftover + "===", validate=False)
    assert redact(base64.urlsafe_b64encode(SECRET.encode()).decode()) == "***"
    assert redact(f"https://x/?t={quote(SECRET, safe='')}") == "https://x/?t=***"
    assert all(len(form) >= 8 for form in encoded_forms(SECRET))


def test_a_kept_json_file_stays_valid_json() -> None:
    redact = Redactor([SECRET])
    text = json.dumps({"warm": False, "token": SECRET, "note": f"with {SECRET} inside"})
    kept = redact.kept(text, "results/out.json")
    assert json.loads(kept) == {"warm": False, "token": "***", "note": "with *** inside"}
    # a secret written escaped inside a string is found in the parsed data
    escaped = '{"t": "s3cr3t-Val\\u0075e-42"}'
    assert json.loads(redact.kept(escaped, "results/escaped.json")) == {"t": "***"}
    assert redact.kept("not json: " + SECRET, "notes.txt") == "not json: ***"
    # a secret where masking would break the file: the file is refused, by name
    with pytest.raises(MaskError, match=r"^results/pin.json: a secret sits outside the JSON"):
        Redactor(["12345678"]).kept('{"pin": 12345678}', "results/pin.json")


def test_a_run_records_masked_values_read_from_the_real_output(
    project: Path, course: CourseRun
) -> None:
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(
        lab.read_text()
        + """
  - id: warm
    run: |
      echo "warm: $TOKENIZERS_PARALLELISM"
      echo "token is $HF_TOKEN, hub token $HUB"
      echo "basic $(printf 'user:%s' "$HF_TOKEN" | base64)"
      printf '{"warm": %s, "t": "%s"}' "$TOKENIZERS_PARALLELISM" "$HF_TOKEN" > warm.json
    files: [warm.json]
    capture:
      warm: {regex: 'warm: (\\w+)', type: str}
      token: {regex: 'token is (\\S+),', type: str}
      from_json: {json: warm.json, key: t, type: str}
"""
    )
    env = {"TOKENIZERS_PARALLELISM": "false", "HF_TOKEN": SECRET, "HUB": HF}
    done = course("run", LAB, "--only", "warm", env=env)
    assert done.returncode == 0, done.stderr
    (run,) = Store(project / "build").runs(LAB)
    step = run.record.step("warm")
    assert step.status == "ok" and step.values["warm"].value == "false"  # no false mask
    assert step.values["token"].value == "***" and step.values["from_json"].value == "***"
    kept = json.loads((run.folder / "files/warm/warm.json").read_text())
    assert kept == {"warm": False, "t": "***"}
    everything = "".join(p.read_text() for p in run.folder.rglob("*") if p.is_file())
    basic = base64.b64encode(f"user:{SECRET}".encode()).decode()
    for leak in (SECRET, HF, basic):
        assert leak not in everything and leak not in done.stderr + done.stdout
    transcript = (run.folder / "steps/warm.txt").read_text()
    assert "warm: false" in transcript and "token is ***, hub token ***" in transcript
