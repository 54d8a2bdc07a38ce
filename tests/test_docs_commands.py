"""A new user can follow the README and docs verbatim: every offline `geosleuth` command in
them (fenced shell blocks, and inline code with no placeholder) runs as written in a fresh
clone layout. Commands that need a model server, a network service or data the user downloads
are not run; the ones left out for data are named below, so a new doc command cannot slip
past unnoticed."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console", ""}
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
INLINE = re.compile(r"`(geosleuth [^`]+|\.venv/bin/geosleuth [^`]+)`")
PLACEHOLDER = re.compile(r"…|\\\||\||\[|\]|(?<![\w.-])[A-Z][A-Z0-9_]*(?![\w.])")
NEEDS_MODEL = ("--model", "-m", "--base-url", "--judge-model", "--verifier-model", "--planner-model")
SERVERS = ("serve", "mcp")  # long-running: started by hand, tested in their own suites

NEEDS_YOUR_DATA = {  # command -> what a user must bring first
    "geosleuth datasets validate data/im2gps3k --format im2gps3k --images data/im2gps3k/images":
        "the IM2GPS3K download",
    "geosleuth report runs/qwen7b": "the eval run of the block above (needs a model server)",
    "geosleuth compare runs/qwen7b runs/qwen72b --out runs/cmp": "two eval runs (need a model server)",
    "geosleuth eval --config eval-100k.yaml": "the config file written in that section and a cluster",
    "geosleuth eval --config eval-100k.yaml --backend local --shard $SLURM_ARRAY_TASK_ID/8":
        "the config file of that section and a job array",
    "geosleuth datasets validate EarthWhere/wherestreet/all.csv --images EarthWhere/wherestreet/imgs":
        "the EarthWhere download",
    "geosleuth score preds.jsonl --protocol wherebench --truth EarthWhere":
        "your predictions and the EarthWhere download",
    "geosleuth report /runs/osv5m-72b": "the cluster run of that section",
    "geosleuth tool image_zoom_in_tool --image photo.jpg --args '{\"bbox_2d\": [0, 0, 200, 200]}'":
        "a photo of your own",
    "geosleuth score im2gps3k_g3_results.csv --protocol g3": "G3's or GeoRanker's result table",
}  # fmt: skip
FRAGMENTS = {  # inline code in prose that names an option of a command, not a command to run
    "geosleuth score --protocol wherebench",
    "geosleuth data export-verl --reward hierarchical",
    "geosleuth score --json",
}


def _shell_lines(text: str) -> list[str]:
    """Commands in fenced shell blocks: continuation lines joined, comments and output dropped."""
    commands: list[str] = []
    block: list[str] | None = None
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fence and block is None:
            block = [] if fence.group(2) in SHELLS else None
            if fence.group(2) not in SHELLS:
                block = ["<not shell>"]
            continue
        if fence and block is not None:
            if block[:1] != ["<not shell>"]:
                commands += _join(block)
            block = None
            continue
        if block is not None:
            block.append(line.strip())
    return commands


def _join(lines: list[str]) -> list[str]:
    out: list[str] = []
    current = ""
    for line in lines:
        if not current and (not line or line.startswith("#")):
            continue
        current += line.removesuffix("\\").strip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            out.append(current.split("  #")[0].strip())
            current = ""
    return out


def _segments(command: str) -> list[str]:
    """The geosleuth invocations of a line (``a && b`` runs both)."""
    parts = [part.strip() for part in command.split("&&")]
    return [part for part in parts if re.match(r"(\.venv/bin/)?geosleuth\b", part)]


def doc_commands() -> list[tuple[str, str]]:
    """(document, command) for every geosleuth command the docs show without placeholders."""
    found: list[tuple[str, str]] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for line in _shell_lines(text):
            found += [(doc.name, seg) for seg in _segments(line)]
        for match in INLINE.finditer(text):
            command = " ".join(match.group(1).split())
            args = command.split()[1:]
            if command in FRAGMENTS:
                continue
            unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", command.split(" ", 1)[1])
            if PLACEHOLDER.search(unquoted) or not any(
                a.startswith("-") or "." in a or "/" in a for a in args
            ):
                continue  # a usage pattern or a bare command name in prose, not a command to run
            found.append((doc.name, command))
    return list(dict.fromkeys(found))


def offline(command: str) -> bool:
    words = shlex.split(command)
    return (
        not any(w.split("=")[0] in NEEDS_MODEL for w in words)
        and words[1:2] != []
        and (words[1] not in SERVERS)
    )


def test_the_docs_show_offline_commands_and_name_what_the_others_need() -> None:
    commands = [c for _, c in doc_commands()]
    runnable = [c for c in commands if offline(c)]
    assert ".venv/bin/geosleuth locate examples/luzern_sign.png" in runnable
    assert any(c.startswith("geosleuth score tests/data/") for c in runnable)
    assert any(c.startswith("geosleuth tool geocode") for c in runnable)
    for command in runnable:
        words = shlex.split(command)
        paths = [w for w in words[2:] if not w.startswith("-") and ("/" in w or Path(w).suffix)]
        outputs = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--out")}
        missing = [p for p in paths if p not in outputs and not (ROOT / p).exists() and "{" not in p]
        if command in NEEDS_YOUR_DATA:
            assert missing, f"{command!r} runs from a clone now: drop it from NEEDS_YOUR_DATA"
        else:
            assert not missing, f"{command!r} names {missing}, which a fresh clone does not have"
    assert set(NEEDS_YOUR_DATA) <= set(runnable), set(NEEDS_YOUR_DATA) - set(runnable)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked files only, as a fresh clone has them (no build output, no venv)."""
    target = tmp_path_factory.mktemp("clone")
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    shim = target / ".venv" / "bin" / "geosleuth"  # what `pip install -e .` puts there
    shim.parent.mkdir(parents=True)
    entry = "from geosleuth.cli.app import main; main()"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{entry}' \"$@\"\n")
    shim.chmod(0o755)
    return target


@pytest.mark.slow
def test_every_offline_doc_command_runs_as_written(clone: Path) -> None:
    shim = clone / ".venv" / "bin" / "geosleuth"
    env = {**os.environ, "PYTHONPATH": str(clone / "src"), "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    env.pop("OPENAI_BASE_URL", None)
    outputs: dict[str, str] = {}
    for doc, command in doc_commands():
        if not offline(command) or command in NEEDS_YOUR_DATA:
            continue
        result = subprocess.run(
            command, shell=True, cwd=clone, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"{doc}: {command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        outputs[command] = result.stdout
    assert "Luzern" in outputs[".venv/bin/geosleuth locate examples/luzern_sign.png"]
    scored = next(v for k, v in outputs.items() if k.startswith("geosleuth score tests/data/"))
    assert json.loads(scored)["n"] == 889
    assert json.loads(scored)["metrics"]["acc@0.5km"] == pytest.approx(11.14, abs=0.01)  # as the README says
