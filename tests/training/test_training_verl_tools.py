"""verl tool classes and tool-config YAML, against verl's own BaseTool and loader when installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from geosleuth.tools.base import ToolContext, ToolError, ToolRegistry, ToolResult, tool
from geosleuth.training.verl import tools as verl_tools
from geosleuth.training.verl.tool_config import dump_tool_config, tool_config, verl_schema
from geosleuth.training.verl.tools import GeoSleuthTool

FACTORY = "test_training_verl_tools:fake_registry"


@tool
def crop(bbox_2d: list[int], ctx: ToolContext) -> ToolResult:
    """Crop the query image.

    Args:
        bbox_2d: [x1, y1, x2, y2] in pixels.
    """
    if ctx.image is None:
        raise ToolError("no image in this trajectory")
    x1, y1, x2, y2 = bbox_2d
    if x2 <= x1 or y2 <= y1:
        raise ToolError("bbox_2d must have x2 > x1 and y2 > y1")
    return ToolResult(text=f"zoomed {x2 - x1}x{y2 - y1}", images=[ctx.image.crop((x1, y1, x2, y2))])


@tool
def web_search(query: str, max_results: int | None = None) -> str:
    """Search the web.

    Args:
        query: what to look for.
        max_results: how many results.
    """
    return "result " * 50 + query


def fake_registry(settings_path: str | None) -> ToolRegistry:
    return ToolRegistry([crop, web_search])  # type: ignore[list-item]


@pytest.fixture()
def image_path(tmp_path: Path) -> Path:
    p = tmp_path / "q.png"
    Image.new("RGB", (64, 48), (10, 200, 30)).save(p)
    return p


def test_verl_schema_folds_rich_json_schema() -> None:
    s = verl_schema(web_search.schema())  # type: ignore[union-attr]
    props = s["function"]["parameters"]["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for."}
    assert props["max_results"]["type"] == "integer"  # anyOf [integer, null] -> integer
    assert s["function"]["parameters"]["required"] == ["query"]
    c = verl_schema(crop.schema())  # type: ignore[union-attr]
    bbox = c["function"]["parameters"]["properties"]["bbox_2d"]
    assert bbox["type"] == "array" and "array of integers" in bbox["description"]


def _write_yaml(tmp_path: Path, max_chars: int = 40) -> Path:
    doc = tool_config(
        [crop.schema(), web_search.schema()], registry_factory=FACTORY, max_text_chars=max_chars
    )  # type: ignore[union-attr]
    path = tmp_path / "tools.yaml"
    path.write_text(dump_tool_config(doc))
    return path


async def test_tools_through_verls_loader(tmp_path: Path, image_path: Path) -> None:
    verl_registry = pytest.importorskip("verl.tools.tool_registry")
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse

    assert verl_tools.HAVE_VERL
    tools = {t.name: t for t in verl_registry.initialize_tools_from_config(str(_write_yaml(tmp_path)))}
    assert set(tools) == {"crop", "web_search"}
    zoom = tools["crop"]
    assert isinstance(zoom, BaseTool) and isinstance(zoom, GeoSleuthTool)
    # verl >= 0.5 style: create(create_kwargs=...) per call, then execute, then release
    iid, created = await zoom.create(create_kwargs={"image": str(image_path)})
    assert isinstance(created, ToolResponse)
    resp, reward, metrics = await zoom.execute(iid, {"bbox_2d": [0, 0, 32, 24]})
    assert isinstance(resp, ToolResponse)
    assert resp.text == "zoomed 32x24" and resp.image[0].size == (32, 24)
    assert reward == 0.0 and metrics["ok"] == 1.0 and metrics["n_images"] == 1.0
    bad, _, bad_metrics = await zoom.execute(iid, {"bbox_2d": [5, 5, 1, 1]})
    assert "x2 > x1" in bad.text and bad.image is None and bad_metrics["ok"] == 0.0
    await zoom.release(iid)
    assert iid not in zoom._instances
    # old style: create(instance_id, **create_kwargs); missing image is a model-readable error
    iid2, _ = await zoom.create("traj-1")
    resp2, _, _ = await zoom.execute(iid2, {"bbox_2d": [0, 0, 2, 2]})
    assert iid2 == "traj-1" and "no image" in resp2.text
    # our truncation, with a notice, instead of verl's silent cut
    search = tools["web_search"]
    sid, _ = await search.create()
    text_resp, _, _ = await search.execute(sid, {"query": "Zürich"})
    assert text_resp.text.startswith("result result") and "truncated at 40 characters" in text_resp.text
    schema = search.get_openai_tool_schema()
    assert schema.function.name == "web_search"


def test_tool_needs_a_name() -> None:
    with pytest.raises(ValueError, match="config.tool"):
        GeoSleuthTool({"type": "native"}, None)
    with pytest.raises(ValueError, match="no tool 'nope'"):
        GeoSleuthTool({"type": "native", "tool": "nope", "registry_factory": FACTORY}, None)


def test_schema_built_from_the_registry_when_yaml_has_none() -> None:
    t = GeoSleuthTool({"type": "native", "tool": "crop", "registry_factory": FACTORY}, None)
    assert t.get_openai_tool_schema().function.name == "crop"
    assert "bbox_2d" in t.get_openai_tool_schema().function.parameters.properties


async def test_cli_yaml_with_geosleuths_real_tools(
    tmp_path: Path, image_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from geosleuth.cli.app import app

    verl_registry = pytest.importorskip("verl.tools.tool_registry")
    monkeypatch.setenv("GEOSLEUTH_DATA_DIR", str(tmp_path / "data"))
    settings = tmp_path / "tools.yaml"
    settings.write_text("cache:\n  backend: none\n")
    out = tmp_path / "verl_tools.yaml"
    res = CliRunner().invoke(
        app,
        ["data", "verl-tool-config", "-o", str(out), "--tools", "image_zoom_in_tool,web_search",
         "--tool-settings", str(settings)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    tools = {t.name: t for t in verl_registry.initialize_tools_from_config(str(out))}
    assert set(tools) == {"image_zoom_in_tool", "web_search"}
    zoom = tools["image_zoom_in_tool"]
    iid, _ = await zoom.create(create_kwargs={"image": str(image_path), "model_scale": 1.0})
    resp, _, metrics = await zoom.execute(iid, {"bbox_2d": [0, 0, 32, 24]})
    assert metrics["ok"] == 1.0 and resp.image and resp.image[0].size[0] >= 32
    await zoom.release(iid)
    bad = CliRunner().invoke(app, ["data", "verl-tool-config", "-o", str(out), "--tools", "nope"])
    assert bad.exit_code == 1 and "nope" in bad.output


def test_create_kwargs_carry_the_exact_model_frame(image_path: Path) -> None:
    ctx = verl_tools._context({"image": str(image_path), "model_size": [32, 24]}, {})
    assert ctx.model_size == (32, 24) and ctx.image is not None and ctx.image.size == (64, 48)
    assert verl_tools._context({"image": str(image_path)}, {}).model_size is None


async def test_create_decodes_the_image_only_for_tools_that_read_it(
    image_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PIL import Image

    opened: list[str] = []
    real_open = Image.open

    def counting_open(fp: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(fp))
        return real_open(fp, *args, **kwargs)

    monkeypatch.setattr(Image, "open", counting_open)
    search = GeoSleuthTool({"tool": "web_search", "registry_factory": FACTORY})
    sid, _ = await search.create(create_kwargs={"image": str(image_path)})
    await search.execute(sid, {"query": "Zürich"})
    assert opened == []  # web search never decodes the query image
    crop_tool = GeoSleuthTool({"tool": "crop", "registry_factory": FACTORY})
    cid, _ = await crop_tool.create(create_kwargs={"image": str(image_path)})
    resp, _, _ = await crop_tool.execute(cid, {"bbox_2d": [0, 0, 8, 8]})
    assert opened == [str(image_path)] and resp.text == "zoomed 8x8"
