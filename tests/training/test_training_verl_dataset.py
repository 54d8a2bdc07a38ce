"""`GeoSleuthRLHFDataset`, the class `grpo_single_node.sh` names: verl's `RLHFDataset` with the
script's `filter_overlong_prompts=True` keeps every row without torchvision, and a filter that
empties the dataset stops the run with an error instead of training on nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]


def _parquet(tmp_path: Path) -> tuple[Path, Any]:
    from geosleuth.core.records import Sample
    from geosleuth.testing.tiny_vlm import build_tiny_vlm
    from geosleuth.training.verl.export import VerlExportOptions, export_verl

    processor = build_tiny_vlm(tmp_path / "m", max_positions=8192, hub_files=False)
    samples = []
    for i in range(3):
        Image.new("RGB", (320, 240), (i, 2, 3)).save(tmp_path / f"{i}.jpg")
        samples.append(Sample(id=str(i), image=str(tmp_path / f"{i}.jpg"), lat=48.85, lon=2.35))
    export_verl(samples, tmp_path / "t.parquet", VerlExportOptions(pixel_budget=64 * 64))
    return tmp_path / "t.parquet", processor


def _config(tmp_path: Path, max_prompt_length: int) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {"prompt_key": "prompt", "image_key": "images", "max_prompt_length": max_prompt_length,
         "return_raw_chat": True, "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1,
         "cache_dir": str(tmp_path / "cache")}
    )  # fmt: skip


def test_the_launch_script_names_the_class_and_verl_loads_it() -> None:
    pytest.importorskip("verl.utils.dataset.rl_dataset")
    from verl.utils.import_utils import load_extern_object

    script = (ROOT / "examples" / "training" / "verl" / "grpo_single_node.sh").read_text()
    path = script.split("data.custom_cls.path=")[1].split()[0]
    name = script.split("data.custom_cls.name=")[1].split()[0]
    cls = load_extern_object(path, name)
    from geosleuth.training.verl.dataset import GeoSleuthRLHFDataset

    assert cls is GeoSleuthRLHFDataset


def test_overlong_filter_keeps_rows_without_torchvision_and_an_emptied_set_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("verl.utils.dataset.rl_dataset")
    from geosleuth.training.verl.dataset import GeoSleuthRLHFDataset

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data, processor = _parquet(tmp_path)
    ds = GeoSleuthRLHFDataset([str(data)], processor.tokenizer, _config(tmp_path, 4096), processor)
    assert len(ds) == 3  # qwen_vl_utils (torchvision) would have failed every row: length 0
    images, _, _ = GeoSleuthRLHFDataset._process_multi_modal_info(ds[0]["raw_prompt"], 16, None)
    assert images is not None and images[0].size == (320, 240)
    with pytest.raises(ValueError, match="dropped all 3 rows"):
        GeoSleuthRLHFDataset([str(data)], processor.tokenizer, _config(tmp_path / "b", 5), processor)


def test_a_filter_that_drops_some_rows_says_how_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("verl.utils.dataset.rl_dataset")
    from geosleuth.core.records import Sample
    from geosleuth.tools.registry import build_registry
    from geosleuth.training.verl.dataset import GeoSleuthRLHFDataset
    from geosleuth.training.verl.export import VerlExportOptions, export_verl

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    short, processor = _parquet(tmp_path)
    sample = Sample(id="long", image=str(tmp_path / "0.jpg"), lat=48.85, lon=2.35)
    schemas = tuple(build_registry(names=["geocode", "web_search"]).schemas())  # in the system prompt
    export_verl([sample], tmp_path / "long.parquet", VerlExportOptions(schemas=schemas, pixel_budget=64 * 64))

    def tokens(path: Path) -> int:
        import pyarrow.parquet as pq

        prompt = pq.read_table(path).to_pylist()[0]["prompt"]
        text = processor.tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        return len(processor.tokenizer(text)["input_ids"])

    limit = (tokens(short) + tokens(tmp_path / "long.parquet")) // 2  # the short rows fit, the long one not
    files = [str(short), str(tmp_path / "long.parquet")]
    with caplog.at_level("WARNING", logger="geosleuth.training.verl.dataset"):
        ds = GeoSleuthRLHFDataset(files, processor.tokenizer, _config(tmp_path, limit), processor)
    assert len(ds) == 3
    assert "dropped 1 of 4 rows" in caplog.text
