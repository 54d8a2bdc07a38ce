"""`geosleuth arena` from votes and from runs: battles, ties, output forms and the judge."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from eval_data import PLACES, make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli import arena as cli_arena
from geosleuth.cli.app import app
from geosleuth.eval.report import arena
from geosleuth.eval.report.arena_markup import arena_page, arena_section
from geosleuth.testing import FakeOpenAIServer, reply

VOTES = [  # the three-model arena of tests/core/test_core_arena.py: A 1120.4, B 1000, C 879.6
    ("A", "B", "model_a"),
    ("A", "B", "tie"),
    ("B", "A", "tie (bothbad)"),
    ("B", "C", "model_a"),
    ("C", "B", "model_b"),
    ("C", "B", "model_a"),
    ("A", "C", "model_a"),
    ("C", "A", "model_b"),
    ("C", "A", "model_b"),
    ("C", "A", "model_b"),
    ("C", "A", "model_a"),
]


def _votes(path: Path, extra: list[str] = ()) -> Path:  # type: ignore[assignment]
    lines = [json.dumps({"model_a": a, "model_b": b, "winner": w, "tstamp": 1}) for a, b, w in VOTES]
    path.write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return path


def test_votes_json_has_the_issue_shape(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["arena", str(_votes(tmp_path / "v.jsonl")), "--json", "--rounds", "50"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert list(body["ratings"]) == ["A", "B", "C"]
    a = body["ratings"]["A"]
    assert set(a) == {"bt", "ci95", "elo", "battles"}
    assert a["bt"] == pytest.approx(1000 + 400 * math.log10(2), abs=1e-4)  # 1120.412, by hand
    assert a["battles"] == 8 and len(a["ci95"]) == 2
    assert body["n_battles"] == 11


def test_bad_vote_lines_are_skipped_and_named(tmp_path: Path) -> None:
    path = _votes(
        tmp_path / "v.jsonl", ["not json", '{"model_a": "A", "model_b": "B", "winner": "draw"}', "[1]"]
    )
    result = CliRunner().invoke(app, ["arena", str(path), "--rounds", "0"])
    assert result.exit_code == 0, result.output
    assert "3 votes skipped: line 12: not JSON" in result.output
    assert (
        "line 13: winner 'draw' is not one of" in result.output
        and "line 14: not a JSON object" in result.output
    )
    assert "1120.4" in result.output


def test_an_overlong_line_is_skipped_unread(tmp_path: Path) -> None:
    path = _votes(tmp_path / "v.jsonl", ["x" * 200_000, '{"model_a": "A", "model_b": "C", "winner": "tie"}'])
    data = arena.read_votes(path)
    assert len(data.triples) == len(VOTES) + 1  # the line after the long one is read
    assert "line 12: longer than 65536 bytes" in data.notes[0]


def test_no_vote_at_all_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "v.jsonl").write_text('{"model_a": "A"}\n')
    result = CliRunner().invoke(app, ["arena", str(tmp_path / "v.jsonl")])
    assert result.exit_code == 2 and "no vote" in result.output


def test_markdown_html_and_anchor(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["arena", str(_votes(tmp_path / "v.jsonl")), "--markdown", "--anchor", "B=1200", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--rounds", "20"])
    assert result.exit_code == 0, result.output
    assert "| 2 | B | 1200.0 | [1200.0, 1200.0] |" in result.output  # the anchor does not move
    assert "| A | — | 66.7 % | 80.0 % |" in result.output  # (1 + 2·½)/3 and 4/5
    assert json.loads((out / "arena.json").read_text())["anchor"] == {"model": "B", "rating": 1200.0}
    page = (out / "arena.html").read_text()
    assert "Content-Security-Policy" in page and '<section class="arena"' in page


def test_bad_anchor_and_mixed_inputs_fail(tmp_path: Path) -> None:
    votes = str(_votes(tmp_path / "v.jsonl"))
    bad = CliRunner().invoke(app, ["arena", votes, "--anchor", "B"])
    assert bad.exit_code == 2 and "MODEL=RATING" in bad.output
    mixed = CliRunner().invoke(app, ["arena", votes, str(tmp_path)])
    assert mixed.exit_code == 2 and "not both" in mixed.output
    judged = CliRunner().invoke(app, ["arena", votes, "--judge", "m", "--out", str(tmp_path / "o")])
    assert judged.exit_code == 2 and "already decided" in judged.output


def test_html_section_escapes_and_has_no_inline_style() -> None:
    result = arena.arena_result(
        arena.ArenaInput("x", [("<b>evil</b>", "B", "model_a"), ("B", "<b>evil</b>", "tie")])
    )
    section = arena_section(result)
    assert "<b>evil</b>" not in section and "&lt;b&gt;evil&lt;/b&gt;" in section
    assert "style=" not in section and "<script" not in section
    assert "<script" not in arena_page(result)


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [
        (0.2, 0.9, "tie"),  # both within the finest radius (1 km)
        (5.0, 5.6, "tie"),  # closer than --tie-km 1
        (5.0, 7.0, "model_a"),
        (math.inf, 3.0, "model_b"),  # no answer loses to any answer
        (math.inf, math.inf, "tie"),  # two failures tie
    ],
)
def test_outcome_rules(a: float, b: float, winner: str) -> None:
    assert arena.outcome(a, b, 1.0, True, 1.0) == winner


def test_cli_states_the_same_default_tie_as_the_module() -> None:
    assert cli_arena.DEFAULT_TIE_KM == arena.DEFAULT_TIE_KM


def _run(tmp_path: Path, data: Path, name: str, right: set[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    plan = {
        sid: (
            {"lat": lat, "lon": lon, "country": country, "raw": f"{name} says {sid}"}
            if sid in right
            else {"lat": 0.0, "lon": 0.0, "raw": f"{name} guesses the origin"}
        )
        for sid, lat, lon, country, _ in PLACES
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / f"{name}.json", plan)))
    out = tmp_path / name
    result = CliRunner().invoke(
        app,
        [
            "eval",
            str(data),
            "--out",
            str(out),
            "--agent-fn",
            "eval_fake_agent:planned",
            "--no-report",
            "--model",
            name,
        ],
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    data = make_csv_dataset(tmp_path / "bench")
    a = _run(tmp_path, data, "a", {"paris", "berlin"}, monkeypatch)
    b = _run(tmp_path, data, "b", {"paris", "berlin", "tokyo", "nyc", "sydney", "cairo"}, monkeypatch)
    return a, b


def test_runs_battle_on_shared_samples(two_runs: tuple[Path, Path]) -> None:
    data = arena.fights_from_runs(list(two_runs))
    winners = {f.sample_id: f.winner for f in data.fights}
    # both exact on paris and berlin (tie), both at (0, 0) on lima and delhi (equal errors: tie),
    # b exact where a is at (0, 0) on the other four (b wins)
    assert winners == {
        "paris": "tie", "berlin": "tie", "lima": "tie", "delhi": "tie",
        "tokyo": "model_b", "nyc": "model_b", "sydney": "model_b", "cairo": "model_b",
    }  # fmt: skip
    result = arena.arena_result(data, rounds=0)
    # two models: b scores 4 + 4·½ = 6 of 8, so P(b beats a) = 3/4 = 1/(1 + 10^−Δβ), Δβ = log10 3;
    # Σβ = 0: b = 1000 + 200·log10 3 = 1095.424, a = 904.576
    assert result["ratings"]["b"]["bt"] == pytest.approx(1000 + 200 * math.log10(3), abs=1e-4)
    assert result["ratings"]["a"]["bt"] == pytest.approx(1000 - 200 * math.log10(3), abs=1e-4)
    assert result["win_rate"]["b"]["a"] == pytest.approx(0.75)
    assert result["settings"]["samples"] == 8 and result["settings"]["tie_km"] == arena.DEFAULT_TIE_KM


def test_runs_battles_written_as_votes_rate_the_same(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "arena"
    first = CliRunner().invoke(
        app, ["arena", *map(str, two_runs), "--out", str(out), "--json", "--rounds", "0"]
    )
    assert first.exit_code == 0, first.output
    rows = [json.loads(line) for line in (out / "battles.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and rows[0]["sample_id"] == "berlin" and rows[0]["error_a_km"] == 0.0
    again = CliRunner().invoke(app, ["arena", str(out / "battles.jsonl"), "--json", "--rounds", "0"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["ratings"] == json.loads(first.output)["ratings"]


def test_runs_judge_decides_on_reasoning(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    def script(body: dict[str, Any]):  # type: ignore[no-untyped-def]
        prompt = body["messages"][0]["content"]
        assert "ground truth" not in prompt.lower()  # the judge never sees the truth
        agent_a = prompt.split("<agent_a>", 1)[1].split("</agent_a>", 1)[0]
        return reply(
            '{"winner": "A"}' if "a says" in agent_a or "a guesses" in agent_a else '{"winner": "B"}'
        )

    out = tmp_path / "judged"
    with FakeOpenAIServer(script) as server:
        args = ["arena", *map(str, two_runs), "--judge", "judge", "--judge-base-url", server.base_url]
        result = CliRunner().invoke(app, [*args, "--out", str(out), "--json", "--rounds", "0"])
        assert len(server.chat_requests) == 8
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    # this judge always prefers run a, whichever side it is shown on: a wins all 8
    assert body["pairs"]["a"]["b"] == {"wins": 8, "losses": 0, "ties": 0}
    assert body["settings"]["decided_by"] == "judge"
    assert (out / "arena_judge_cache.sqlite").is_file()


@pytest.mark.slow
def test_arena_bench_prints_each_figure_beside_its_reference() -> None:
    bench = Path(__file__).resolve().parents[2] / "bench" / "arena_bench.py"
    args = ["--battles", "2000", "--rounds", "20", "--reference-rounds", "2"]
    done = subprocess.run([sys.executable, str(bench), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "ratio reference / geosleuth:" in done.stdout
    assert float(done.stdout.split("max |geosleuth - reference|: ")[1].split()[0]) < 0.5  # rating points
