"""A chat template that renders tools and tool responses for Qwen2.5-VL / Qwen3-VL style models.

verl renders every rollout with the model's chat template. Qwen2.5-VL's stock template
(``chat_template.json`` of the processor) ignores ``tools`` and renders a tool message as a
bare ``<|im_start|>tool`` turn: the policy never sees the tool schemas, and tool output is
not fenced by ``<tool_response>`` markers. `QWEN_VL_TOOL_TEMPLATE` is the Qwen2.5 (text)
hermes tool format with Qwen-VL's image and video placeholders: the ``# Tools`` block in the
system turn, assistant ``<tool_call>`` JSON, and tool output inside ``<tool_response>`` in a
user turn (consecutive tool messages share one turn). Qwen3-VL's stock template already
does this; `check_chat_template` tells the two cases apart, and ``export-verl`` runs it.

verl takes the template through ``actor_rollout_ref.model.custom_chat_template``;
`hydra_override_value` quotes it for a command-line override.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

_TEMPLATES = resources.files("geosleuth.training").joinpath("templates")
QWEN_VL_TOOL_TEMPLATE = _TEMPLATES.joinpath("qwen_vl_tools.jinja").read_text(encoding="utf-8")
"""The shipped tool-capable template (``training/templates/qwen_vl_tools.jinja``)."""

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "geosleuth_probe_tool",
        "description": "probe",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
}
PROBE_OUTPUT = "GEOSLEUTH-PROBE-TOOL-OUTPUT"
_RESPONSE = re.compile(r"<tool_response>\s*" + PROBE_OUTPUT + r"\s*</tool_response>")


def render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    """Render as transformers does (sandboxed Jinja, ``tojson``, trimmed blocks)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=True)


def check_chat_template(template: str | None) -> list[str]:
    """What a chat template gets wrong for tool-using rollouts; empty when it renders both."""
    if not template:
        return ["the model has no chat template"]
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where?"}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "geosleuth_probe_tool", "arguments": {"q": "x"}}}
            ],
        },
        {"role": "tool", "content": PROBE_OUTPUT},
    ]
    try:
        text = render(template, messages, [PROBE_TOOL])
    except Exception as exc:  # noqa: BLE001 - a template that cannot render is the finding
        return [f"the chat template does not render a tool conversation: {exc}"]
    problems = []
    if "geosleuth_probe_tool" not in text.split(PROBE_OUTPUT)[0].split("<tool_call>")[0]:
        problems.append(
            "the chat template does not render the tool schemas (the policy never sees the tools)"
        )
    if not _RESPONSE.search(text):
        problems.append("the chat template does not wrap tool output in <tool_response> markers")
    return problems


def model_chat_template(model: str | Path) -> str | None:
    """The chat template a local model directory uses (the processor's for VL models); no download."""
    root = Path(model).expanduser()
    if not root.is_dir():
        raise ValueError(f"{model}: not a local model directory (templates are checked without downloading)")
    for name in (
        "chat_template.jinja",
        "chat_template.json",
        "tokenizer_config.json",
        "processor_config.json",
    ):
        path = root / name
        if not path.exists():
            continue
        if name.endswith(".jinja"):
            return path.read_text(encoding="utf-8")
        data = json.loads(path.read_text(encoding="utf-8"))
        template = data.get("chat_template")
        if isinstance(template, list):  # named templates: the default one
            template = next((t.get("template") for t in template if t.get("name") == "default"), None)
        if template:
            return str(template)
    return None


def hydra_override_value(template: str) -> str:
    """The template as a single-quoted Hydra override value (``key=<this>`` reproduces it exactly)."""
    if "${" in template:
        raise ValueError("the template contains '${', which Hydra would read as an interpolation")
    body = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, template)
    return "'" + re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", body) + "'"


def prepare_chat_template(out_dir: Path, choice: str = "auto", model: Path | None = None) -> dict[str, Any]:
    """Decide the chat template a verl run needs for tool rollouts, and write it beside the data.

    ``choice``: ``auto`` (the model's own template when ``model`` is a local directory whose
    template renders tools and tool responses, else the shipped tool template), ``model``
    (the model's, refused if it fails the check), ``qwen-vl-tools`` (the shipped one) or a
    template file. A chosen override is written as ``chat_template.jinja`` and, quoted for a
    Hydra override, ``chat_template.hydra`` (the launch scripts pass it as
    ``actor_rollout_ref.model.custom_chat_template``).
    """
    report: dict[str, Any] = {"choice": choice}
    own = model_chat_template(model) if model is not None else None
    if model is not None:
        report["model_problems"] = check_chat_template(own)
    if choice == "model" or (choice == "auto" and model is not None and not report["model_problems"]):
        if model is None:
            raise ValueError("--chat-template model needs --model (a local model directory)")
        if report["model_problems"]:
            raise ValueError(f"{model}: " + "; ".join(report["model_problems"]))
        report["template"] = "model"
        return report
    if choice in ("auto", "qwen-vl-tools"):
        template = QWEN_VL_TOOL_TEMPLATE
        report["template"] = "qwen-vl-tools"
    else:
        path = Path(choice).expanduser()
        if not path.is_file():
            raise ValueError(f"--chat-template {choice!r}: use auto, model, qwen-vl-tools or a template file")
        template = path.read_text(encoding="utf-8")
        report["template"] = str(path)
    problems = check_chat_template(template)
    if problems:
        raise ValueError(f"chat template {report['template']}: " + "; ".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "chat_template.jinja").write_text(template, encoding="utf-8")
    (out_dir / "chat_template.hydra").write_text(hydra_override_value(template), encoding="utf-8")
    report["written"] = [str(out_dir / "chat_template.jinja"), str(out_dir / "chat_template.hydra")]
    return report
