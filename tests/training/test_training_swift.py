"""ms-swift: the plugin loads and scores through ms-swift 4.x's own code (installed by
scripts/test.sh into .swift-deps, apart from the venv because its pins conflict with the
`train` extra), and through a faithful copy of 3.x's ORM construction; `data export-swift`
writes the dataset those ORMs read."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.training.swift.reward import GeoORM, orm_class, register_orms

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "training" / "swift" / "geo_orm_plugin.py"
SWIFT_DEPS = ROOT / ".swift-deps"

PARIS = '<answer>{"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}</answer>'
LYON = '<answer>{"lat": 45.764, "lon": 4.8357, "city": "Lyon", "country": "France"}</answer>'
# Paris -> Lyon is 392 km (haversine): Thinking-with-Map's step reward is 0.1 (200 < d <= 750 km),
# SpotAgent's piecewise reward is 0 beyond 200 km; the exact answer is 1.0 for both.


@pytest.fixture
def swift_dataset(tmp_path: Path) -> Path:
    return write_swift_dataset(tmp_path)


def write_swift_dataset(tmp_path: Path) -> Path:
    """`data export-swift` of one usable Paris photo (and one broken row, reported and skipped)."""
    images = tmp_path / "img"
    images.mkdir()
    Image.new("RGB", (1000, 700), (10, 20, 30)).save(images / "paris.jpg")
    rows = [
        {"id": "paris", "image": "img/paris.jpg", "lat": 48.8566, "lon": 2.3522,
         "labels": {"country": "France", "city": "Paris"}},
        {"id": "broken", "image": "img/missing.jpg", "lat": 1.0, "lon": 2.0},
    ]  # fmt: skip
    src = tmp_path / "samples.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "swift.jsonl"
    res = CliRunner().invoke(
        app, ["data", "export-swift", str(src), "--out", str(out), "--tools", "image_zoom_in_tool,geocode"]
    )
    assert res.exit_code == 0, res.output
    assert "wrote 1 rows" in res.output and "failed broken" in res.output
    return out


def test_export_swift_writes_messages_images_and_solution(swift_dataset: Path) -> None:
    (row,) = [json.loads(line) for line in swift_dataset.read_text().splitlines()]
    assert [m["role"] for m in row["messages"]] == ["system", "user"]
    assert row["messages"][1]["content"].startswith("<image>")
    assert row["messages"][1]["content"].count("<image>") == len(row["images"]) == 1
    assert Path(row["images"][0]).is_absolute() and Path(row["images"][0]).is_file()
    truth = json.loads(row["solution"])
    assert truth["lat"] == 48.8566 and truth["levels"]["city"] == "Paris"
    assert [t["function"]["name"] for t in json.loads(row["tools"])] == ["image_zoom_in_tool", "geocode"]
    assert row["model_size"] == [1008, 700]  # smart_resize: 1000 / 28 = 35.7 rounds to 36 x 28, 700 = 25 x 28
    assert GeoORM("step")([PARIS, LYON, "no idea"], solution=[row["solution"]] * 3) == [1.0, 0.1, 0.0]


def test_export_swift_fails_cleanly_when_nothing_is_usable(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_text(json.dumps({"id": "a", "image": "nope.jpg", "lat": 1, "lon": 2}) + "\n")
    res = CliRunner().invoke(app, ["data", "export-swift", str(src), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 1 and "Traceback" not in res.output


def test_orm_without_a_solution_column_says_how_to_make_one() -> None:
    with pytest.raises(ValueError, match="export-swift"):
        GeoORM()(["x"])


SWIFT4 = """
import json, sys, types
import torch
from swift.utils import import_external_file
import_external_file(sys.argv[1])
from swift.rewards import orms
from swift.rlhf_trainers.utils import resolve_reward_funcs
from swift.rl_core.data import GRPOSample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func
rows = [json.loads(line) for line in open(sys.argv[2])]
completions = json.loads(sys.argv[3])
funcs, names = resolve_reward_funcs(["geo_step", "geo_piecewise"], args=types.SimpleNamespace())
samples = [
    GRPOSample.from_row({**rows[0], "messages": rows[0]["messages"] + [{"role": "assistant", "content": c}]})
    for c in completions
]
rewards = compute_rewards_per_func(samples, funcs, None, device=torch.device("cpu"))
registered = sorted(k for k in orms if k.startswith("geo_"))
_, spatial_names = resolve_reward_funcs(["geo_spatial", "geo_spatial_200"], args=types.SimpleNamespace())
print(json.dumps({"names": names + spatial_names, "rewards": rewards.tolist(), "registered": registered}))
"""


def test_plugin_loads_and_scores_in_ms_swift_4(swift_dataset: Path) -> None:
    if not (SWIFT_DEPS / "swift" / "rewards").is_dir():
        pytest.skip("ms-swift 4.x not installed in .swift-deps (scripts/test.sh installs it)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SWIFT_DEPS), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", SWIFT4, str(PLUGIN), str(swift_dataset), json.dumps([PARIS, LYON, "no idea"])],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    rows = [pytest.approx(r) for r in ([1.0, 1.0], [0.1, 0.0], [0.0, 0.0])]  # geo_step, geo_piecewise
    assert out["rewards"] == rows  # float32 tensor
    # ms-swift names (and logs) an ORM by its class name: each reward logs under its own name
    assert out["names"] == ["geo_step", "geo_piecewise", "geo_spatial", "geo_spatial_200"]
    assert {"geo_step", "geo_piecewise", "geo_spatial", "geo_hierarchical", "geo_spatial_200"} <= set(
        out["registered"]
    )


def _swift3_build(orms: dict[str, Any], name: str, args: Any) -> Any:
    """ms-swift 3.12's ORM construction, copied from ``GRPOTrainer._prepare_rewards``
    (swift/trainers/rlhf_trainer/grpo_trainer.py): keyword arguments named in ``__init__``
    (minus self / args / kwargs) that the GRPO config has."""
    reward_func_class = orms[name]
    reward_func_args = list(inspect.signature(reward_func_class.__init__).parameters)
    reward_func_kwargs = {
        key: getattr(args, key)
        for key in reward_func_args
        if key not in ["self", "args", "kwargs"] and hasattr(args, key)
    }
    return reward_func_class(**reward_func_kwargs)


def test_plugin_loads_and_scores_on_the_ms_swift_3_interface(
    swift_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in for ms-swift 3.x: ``swift.plugin.orms`` exists, ``swift.rewards`` does not."""
    swift = types.ModuleType("swift")
    plugin = types.ModuleType("swift.plugin")
    plugin.orms = {}  # type: ignore[attr-defined]
    swift.plugin = plugin  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "swift", swift)
    monkeypatch.setitem(sys.modules, "swift.plugin", plugin)
    monkeypatch.setitem(sys.modules, "swift.rewards", None)  # `from swift.rewards import …` fails
    namespace: dict[str, Any] = {"__name__": "geo_orm_plugin"}
    exec(compile(PLUGIN.read_text(), str(PLUGIN), "exec"), namespace)
    config = types.SimpleNamespace(beta=0.04, reward="would-be-wrong", consistency_fn="also-wrong")
    step = _swift3_build(plugin.orms, "geo_step", config)  # type: ignore[attr-defined]
    row = json.loads(swift_dataset.read_text().splitlines()[0])
    assert step([PARIS, LYON], solution=[row["solution"]] * 2) == [1.0, 0.1]


def test_orm_classes_are_fixed_to_their_reward_and_reject_bad_specs() -> None:
    registry: dict[str, Any] = {}
    made = register_orms(registry, {"geo_near": "piecewise"})
    assert registry == made and registry["geo_near"](args=object()).spec.name == "piecewise"
    assert GeoORM("spatial:tau_km=200").spec.params == {"tau_km": 200.0}
    with pytest.raises(ValueError, match="unknown reward"):
        orm_class("teleport")
