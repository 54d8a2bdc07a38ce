"""A user's own prompt style (issue 43 item 2): a YAML file given as ``--prompt``, or a style a
package registers under the ``geosleuth.prompt_styles`` entry point."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosleuth.agent.catalog import PROMPT_STYLES
from geosleuth.agent.prompting import available_styles, load_style
from geosleuth.cli.app import app
from geosleuth.testing.fake_openai import FakeOpenAIServer, reply

AUTHORS = "You are an expert with extensive experience in the field of geolocation."  # GeoAgent's first line


def _style(path: Path) -> Path:
    path.write_text(
        "tools: []\nprotocol: geoagent\nanswer_example: '<answer>France; Île-de-France; Paris</answer>'\n"
        f"system: |\n  {AUTHORS}\nuser: |\n  Where is it?\n  {{{{task_extra}}}}\n",
        encoding="utf-8",
    )
    return path


def test_a_style_file_prompts_with_its_exact_text(tmp_path: Path) -> None:
    path = _style(tmp_path / "geoagent_authors.yaml")
    style = load_style(str(path))
    assert style.name == "geoagent_authors" and style.system.strip() == AUTHORS
    image = Path(__file__).resolve().parents[2] / "examples" / "luzern_sign.png"
    answer = reply("<answer>Switzerland; Lucerne; Luzern</answer>")
    with FakeOpenAIServer([answer]) as server:
        result = CliRunner().invoke(
            app,
            ["locate", str(image), "--model", "fake", "--base-url", server.base_url, "--prompt", str(path),
             "--geocode"],
        )  # fmt: skip
        sent = server.chat_requests[0].messages
    assert result.exit_code == 0, result.output
    assert sent[0]["content"] == AUTHORS


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read"), ("system: [unclosed", "not valid YAML"), ("user: hi\n", "system")],
)
def test_a_bad_style_file_is_a_clear_error(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "mine.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_style(str(path))


def test_a_package_registers_a_style_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    style = _style(tmp_path / "authors.yaml")
    dist = tmp_path / "site" / "geo_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: geo-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[geosleuth.prompt_styles]\nauthors = geo_plugin_styles:AUTHORS\n")
    (tmp_path / "site" / "geo_plugin_styles.py").write_text(f"AUTHORS = {str(style)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    load_style.cache_clear()
    PROMPT_STYLES.refresh()  # the package appeared while this process runs
    try:
        assert "authors" in available_styles()
        assert load_style("authors").system.strip() == AUTHORS
    finally:
        sys.modules.pop("geo_plugin_styles", None)
        load_style.cache_clear()
        PROMPT_STYLES.refresh()
