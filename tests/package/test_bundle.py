"""The lesson zip that `course build` leaves beside the PDF, from the fixture lesson.

Uses the two builds of tests/test_pdf.py (folders A and B); the lab-listing rules are checked on
small real folders in tmp_path.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest
from support import COURSE, LESSON, REPO, SITE_FIXTURE, STEM, make_project

from course.package.bundle import Entry, lab_listing, safe_name, write_zip, zip_date

EXPECTED = [
    f"{STEM}/START-HERE.md",
    f"{STEM}/expected.json",  # every zip checks a learner's run: lab/compare.py
    f"{STEM}/figures/tiny_cache.png",
    f"{STEM}/lab/compare.py",
    f"{STEM}/lab/compare_report.py",
    f"{STEM}/lab/decode.py",
    f"{STEM}/lab/lab.yml",
    f"{STEM}/lab/size.py",
    f"{STEM}/{STEM}.pdf",
]
SECRET = "s3cr3t-Value-42"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"


@pytest.fixture(scope="module")
def roots(package_builds: tuple[Path, Path]) -> tuple[Path, Path]:
    return package_builds


@pytest.fixture(scope="module")
def zip_file(roots: tuple[Path, Path]) -> Path:
    return roots[0] / "site" / "downloads" / f"{STEM}.zip"


@pytest.fixture(scope="module")
def start_here(zip_file: Path) -> str:
    with zipfile.ZipFile(zip_file) as archive:
        return archive.read(f"{STEM}/START-HERE.md").decode("utf-8")


def test_listing_is_exactly_the_lab_figures_pdf_and_guide(
    roots: tuple[Path, Path], zip_file: Path
) -> None:
    site = roots[0] / "site"
    with zipfile.ZipFile(zip_file) as archive:
        infos = archive.infolist()
        assert [i.filename for i in infos] == EXPECTED
        for info in infos:
            assert info.date_time == (2026, 11, 20, 9, 0, 0)  # the record's start, not the build's
            assert info.create_system == 3 and info.external_attr >> 16 == stat.S_IFREG | 0o644
        assert (
            archive.read(f"{STEM}/{STEM}.pdf") == (site / "downloads" / f"{STEM}.pdf").read_bytes()
        )
        figure = site / "assets" / "figures" / LESSON / "tiny_cache.png"
        assert archive.read(f"{STEM}/figures/tiny_cache.png") == figure.read_bytes()
        for name in ("decode.py", "lab.yml", "size.py"):
            assert (
                archive.read(f"{STEM}/lab/{name}")
                == (SITE_FIXTURE / "lab" / LESSON / name).read_bytes()
            )


def test_two_builds_give_the_same_bytes(roots: tuple[Path, Path]) -> None:
    a, b = (r / "site" / "downloads" / f"{STEM}.zip" for r in roots)
    assert a.read_bytes() == b.read_bytes()


def test_start_here_names_every_step_in_order(start_here: str) -> None:
    assert start_here.startswith("# A tiny KV cache, for testing the pages: start here\n")
    assert (
        "recorded run `2026-11-20T090000Z-h200`, made on our NVIDIA H200 on 20 November 2026"
        in start_here
    )
    assert "pip install numpy==2.3.4" in start_here
    headings = re.findall(r"^## Step (\d): (\S+)", start_here, re.MULTILINE)
    assert headings == [("1", "size"), ("2", "decode")]
    step1, step2 = start_here.split("## Step 2: decode")
    assert "**What it does:** Size the cache on paper." in step1
    assert "```bash\npython3 size.py\n```" in step1
    assert "It took 1.20 s on our NVIDIA H200." in step1
    assert "**What it does:** Time decoding, short and long." in step2
    assert "```bash\npython3 decode.py --tokens 128 4096\n```" in step2
    assert "short: 312.4 tok/s" in step2


def test_first_step_runs_from_a_fresh_unzip(
    zip_file: Path, start_here: str, tmp_path: Path
) -> None:
    with zipfile.ZipFile(zip_file) as archive:
        archive.extractall(tmp_path)
    step1 = start_here.split("## Step 1: size")[1].split("## Step 2")[0]
    command = re.search(r"```bash\n(.*?)\n```", step1, re.DOTALL).group(1)  # type: ignore[union-attr]
    expected = re.search(r"```text\n(.*?)\n```", step1, re.DOTALL).group(1)  # type: ignore[union-attr]
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path / STEM / "lab",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ["PATH"]},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip("\n") == expected


def test_a_lab_without_gpu_steps_says_nothing_of_gpus(tmp_path: Path) -> None:
    """The fixture lab with its one GPU step made a CPU step (as a CPU lesson's would be), its
    H200 run: START-HERE.md and compare.py's words name no GPU, no nvidia-smi, no rented card;
    the declared install time is an estimate, not a measurement."""
    from course.lab.load import load_lab
    from course.package.start_here import start_here
    from course.record.store import Store

    lab_dir = tmp_path / "lab" / LESSON
    lab_dir.parent.mkdir()
    shutil.copytree(SITE_FIXTURE / "lab" / LESSON, lab_dir)
    recipe = lab_dir / "lab.yml"
    recipe.write_text(recipe.read_text().replace("    needs: gpu\n", ""))
    run = Store(SITE_FIXTURE / "build").newest_good(LESSON)
    assert run is not None and run.record.host.gpu is not None  # recorded on an H200
    text = start_here(load_lab(recipe), run, f"{STEM}.pdf")
    for word in ("GPU", "nvidia-smi", "H200", "rent"):
        assert word not in text, (word, text)
    assert "\nEvery step runs on any machine.\n" in text
    assert "made on our machine on 20 November 2026" in text
    assert (
        "Allow about 4 min for the install and about 5 min for downloads (our estimate, not a"
        in (text)
    )
    assert "On our machine" not in text and "It reads the results your run wrote" in text


def test_only_the_labs_own_files_get_in(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not for the zip")
    lab = tmp_path / "lab"
    for name, text in {
        "run.py": "print('hi')\n",
        "data/table.csv": "a,b\n",
        ".gitignore": "results/\n*.log\n",
        "__pycache__/run.cpython-311.pyc": "",
        ".venv/bin/python": "",
        "results/out.json": "{}",
        "notes.log": "",
        "made.json": "{}",
        "sub/deep/keep.txt": "kept",
    }.items():
        (lab / name).parent.mkdir(parents=True, exist_ok=True)
        (lab / name).write_text(text)
    (lab / "link.txt").symlink_to(outside / "secret.txt")
    (lab / "linked-dir").symlink_to(outside, target_is_directory=True)
    (lab / "inside-link.py").symlink_to(lab / "run.py")
    assert lab_listing(lab, outputs={"made.json"}) == [
        ".gitignore",
        "data/table.csv",
        "run.py",
        "sub/deep/keep.txt",
    ]


def test_the_repositorys_lab_is_listed_as_git_holds_it() -> None:
    lab = REPO / "lab" / "kv-cache"
    names = lab_listing(lab)
    assert "size_on_paper.py" in names and "models/Qwen3-0.6B/config.json" in names
    assert not [n for n in names if n.startswith("results/") or "__pycache__" in n]


@pytest.mark.parametrize(
    "name", ["../x", "/etc/passwd", "a/../b", "a//b", "a\\b", "C:/x", "./a", ""]
)
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(Exception, match="not a relative path inside the lesson folder"):
        safe_name(name)


def test_zip_is_stable_and_falls_back_to_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764406800")  # 2025-11-29 09:00:00 UTC
    date = zip_date(None)
    assert date == (2025, 11, 29, 9, 0, 0)
    entries = [Entry("b.txt", b"b"), Entry("a/run.sh", b"#!/bin/sh\n", 0o755)]
    write_zip(tmp_path / "one.zip", "top", entries, date)
    write_zip(tmp_path / "two.zip", "top", list(reversed(entries)), date)
    assert (tmp_path / "one.zip").read_bytes() == (tmp_path / "two.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "one.zip") as archive:
        assert archive.namelist() == ["top/a/run.sh", "top/b.txt"]
        assert archive.getinfo("top/a/run.sh").external_attr >> 16 == stat.S_IFREG | 0o755
    with pytest.raises(Exception, match="not a relative path"):
        write_zip(tmp_path / "bad.zip", "top", [Entry("../escape", b"")], date)


def test_start_here_names_the_labs_own_requirements(tmp_path: Path) -> None:
    from course.pages.install import lab_spec

    assert lab_spec(tmp_path) is None  # no pyproject.toml: nothing to install
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["rich"]\n')
    assert lab_spec(tmp_path) == "."
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.optional-dependencies]\nall = ["torch"]\ngpu = ["torch"]\n'
    )
    assert lab_spec(tmp_path) == ".[all]"
    repo_lab = REPO / "lab" / "kv-cache"
    assert lab_spec(repo_lab) == ".[all]"


def test_the_zip_takes_what_git_tracks_never_a_dotfile_and_masks_secrets(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    lab = root / "lab" / LESSON
    (lab / "token.py").write_text(f'EXAMPLE = "{HF}"  # a token pasted by mistake\n')
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "lab"], check=True)
    (lab / ".env").write_text(f"MY_API_KEY={SECRET}\n")  # untracked, and a dotfile
    (lab / "notes.py").write_text(f"print('{SECRET}')\n")  # untracked
    (lab / ".secrets").mkdir()
    (lab / ".secrets" / "key.txt").write_text(SECRET)
    subprocess.run([*git, "add", "-f", "lab/tiny-cache/.secrets/key.txt"], check=True)
    done = subprocess.run(
        [*COURSE, "--root", str(root), "build"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MY_API_KEY": SECRET, "COLUMNS": "300"},
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: lab/tiny-cache/.env: a dotfile (it may hold secrets), so not in the zip",
        "warning: lab/tiny-cache/notes.py: not tracked by git, so not in the zip (git add it)",
        "warning: lab/tiny-cache/.secrets/key.txt: a dotfile (it may hold secrets), so not in "
        "the zip",
        "warning: lesson 'tiny-cache': lab/token.py: a secret, masked in the zip's copy",
    ]
    with zipfile.ZipFile(root / "site" / "downloads" / f"{STEM}.zip") as archive:
        names = archive.namelist()
        data = b"".join(archive.read(n) for n in names)
        token = archive.read(f"{STEM}/lab/token.py").decode()
    assert f"{STEM}/lab/.env" not in names and f"{STEM}/lab/notes.py" not in names
    assert token == 'EXAMPLE = "***"  # a token pasted by mistake\n'
    assert SECRET.encode() not in data and HF.encode() not in data
