"""Masking that is exact: secrets and their encodings go, ordinary words stay, kept files stay
valid."""

from __future__ import annotations

import base64
import codecs
import json
from pathlib import Path
from urllib.parse import quote

import pytest
from support import CourseRun

from course.record.masking import MaskError, Redactor, can_be_secret, encoded_forms, secret_values
from course.record.store import Store

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


def test_secrets_in_pieces_wrapped_or_in_other_encodings_are_masked() -> None:
    redact = Redactor([SECRET])
    halves = f"part one: {SECRET[:8]}\npart two: {SECRET[8:]}\n"
    assert redact(halves) == "part one: ***\npart two: ***\n"
    assert redact(f"{SECRET[:5]}\r\n{SECRET[5:]} x") == "***\r\n*** x"
    # a piece inside a longer word is not a piece of the secret: nothing is masked
    plain = f"a{SECRET[:8]} {SECRET[8:]}b s3cr s3cr3t-Value-4"
    assert redact(plain) == plain
    wrapped = base64.encodebytes(b"x" * 50 + f":{SECRET}".encode()).decode()  # 76 columns
    core = base64.b64encode(b"x" * 50 + f":{SECRET}".encode()).decode()[68:88]  # the secret's
    assert core not in wrapped and core in wrapped.replace("\n", "")  # the wrap cuts it
    assert core not in redact(wrapped).replace("\n", "")
    utf16 = codecs.BOM_UTF16_LE + json.dumps({"t": SECRET}).encode("utf-16-le")
    kept = redact.kept_file(utf16, "r.json")
    assert kept.startswith(codecs.BOM_UTF16_LE) and json.loads(kept.decode("utf-16")) == {
        "t": "***"
    }
    png = b"\x89PNG\r\n\x1a\n\xff\x00 no secret here"
    assert redact.kept_file(png, "f.png") == png
    for name, data in {
        "latin.txt": f"caf\xe9 {SECRET}\n".encode("latin-1"),
        "wide.txt": SECRET.encode("utf-16-be"),
        "odd.bin": b"\xff" + SECRET.encode("utf-16-le"),
    }.items():
        with pytest.raises(MaskError, match=rf"^{name}: a secret is in it, and it is not UTF-8"):
            redact.kept_file(data, name)
    with pytest.raises(MaskError, match=r"^bad.txt: starts as UTF-16-LE but is not \(truncated"):
        redact.kept_file(codecs.BOM_UTF16_LE + b"a\x00b", "bad.txt")


def test_a_run_keeps_no_secret_split_wrapped_or_in_a_file_it_cannot_mask(
    project: Path, course: CourseRun
) -> None:
    lab = project / "lab" / LAB / "lab.yml"
    lab.write_text(
        lab.read_text()
        + """
  - id: apart
    run: |
      echo "first: ${HF_TOKEN:0:8}"; echo "then: ${HF_TOKEN:8}"
      echo "${HF_TOKEN:0:6}"; echo "${HF_TOKEN:6}"
      printf 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx:%s' "$HF_TOKEN" | base64
      printf '{"t": "%s"}' "$HF_TOKEN" | iconv -t UTF-16 > wide.json
    files: [wide.json]
  - id: latin
    run: printf 'caf\\xe9 %s\\n' "$HF_TOKEN" > latin.txt
    files: [latin.txt]
"""
    )
    done = course("run", LAB, "--from", "apart", env={"HF_TOKEN": SECRET})
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert (
        "step 'latin' failed: latin.txt: a secret is in it, and it is not UTF-8 text (byte 0xe9 "
        "at 3), so masking could break it; the file is not kept (write it as UTF-8 text)"
    ) in said, said
    (run,) = Store(project / "build").runs(LAB)
    assert run.record.step("apart").status == "ok"
    transcript = (run.folder / "steps/apart.txt").read_text()
    assert "first: ***\nthen: ***\n***\n***\n" in transcript
    core = base64.b64encode(b"x" * 50 + f":{SECRET}".encode()).decode()[68:88]
    assert core not in transcript.replace("\n", "")
    wide = (run.folder / "files/apart/wide.json").read_bytes()
    assert json.loads(wide.decode("utf-16")) == {"t": "***"}
    assert not (run.folder / "files/latin/latin.txt").exists()
    for path in run.folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for form in (SECRET.encode(), SECRET.encode("utf-16-le"), SECRET[8:].encode()):
                assert form not in data, path
