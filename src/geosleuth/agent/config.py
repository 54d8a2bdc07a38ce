"""`AgentConfig`: everything that decides how one image is located.

Settings left as ``None`` take the prompt style's default (tools, calling mode, bbox
convention, turn budget), so ``AgentConfig(model="qwen2.5-vl", prompt_style="spotagent")``
reproduces that paper's setup and any field can still be overridden.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from geosleuth.agent.images import DEFAULT_PIXEL_BUDGET
from geosleuth.core.records import MAX_TURN_TEXT_CHARS

MAX_RESPONSE_BYTES = 16 * 2**20
"""Largest response body read from the model server (decoded); a longer one fails the request."""

MAX_CALLS_PER_TURN = 10
"""Tool calls run from one model turn; the rest get an error the model reads (GeoVista/SpotAgent
models make one call a turn, Thinking-with-Map a few in parallel)."""


class AgentConfig(BaseModel):
    """How the agent runs; ``model=None`` selects the offline clue pipeline."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None  # model name, or a server URL whose first listed model is used
    base_url: str | None = None  # default: $OPENAI_BASE_URL, then api.openai.com
    api_key_env: str = "OPENAI_API_KEY"  # name of the variable holding the key (never the key)
    prompt_style: str = "geovista"
    tools: list[str] | None = None  # None: the style's tools
    tool_calling: Literal["native", "text"] | None = None  # None: the style's mode
    tool_result_role: Literal["user", "tool"] = "user"  # where tool images go (vLLM rejects them in "tool")
    bbox_convention: Literal["absolute", "relative1000"] | None = None
    max_turns: int | None = Field(default=None, ge=1)  # None: the style's budget (8 when unset)
    max_tool_calls: int | None = Field(default=None, ge=0)  # all tools together
    tool_call_limits: dict[str, int] = Field(default_factory=dict)  # per tool name
    max_total_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=600.0, gt=0)  # wall clock per trajectory
    request_timeout_s: float = Field(default=120.0, gt=0)
    parse_timeout_s: float = Field(default=10.0, gt=0)  # one parse of model output, in a worker process
    max_retries: int = Field(default=3, ge=0)
    max_response_bytes: int = Field(default=MAX_RESPONSE_BYTES, ge=1024)  # a longer reply fails the turn
    max_turn_text_chars: int = Field(default=MAX_TURN_TEXT_CHARS, ge=1000)  # per text field a turn stores
    max_calls_per_turn: int = Field(default=MAX_CALLS_PER_TURN, ge=1)  # tool calls run from one turn
    retry_backoff_s: float = Field(default=1.0, ge=0)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None  # per completion
    seed: int | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)  # server-specific request fields
    reasoning_effort: str | None = None  # sent only where the endpoint accepts it
    provider: Literal["auto", "generic", "openai", "gemini", "deepseek"] = "auto"  # request dialect
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] | None = None  # None: the provider's
    echo_reasoning: bool | None = None  # send reasoning text back on assistant turns (None: the provider's)
    observer: str | None = None  # "offline", or a VLM (name or URL) describing images to a text-only model;
    # unused by the offline pipeline (model=None), which reads the image itself
    observer_base_url: str | None = None  # default: base_url
    observer_max_tokens: int = Field(default=1024, ge=16)
    samples: int = Field(default=1, ge=1)
    verifier_model: str | None = None  # None with samples > 1: geodesic medoid aggregation
    verifier_base_url: str | None = None
    verifier_view: Literal["full", "evidence"] | None = None  # None: the style's (full for thinking_with_map)
    cluster_radius_km: float = Field(default=25.0, gt=0)
    pixel_budget: int = Field(default=DEFAULT_PIXEL_BUDGET, ge=0)
    max_image_pixels: int | None = Field(
        default=None, gt=0
    )  # decode limit; None: $GEOSLEUTH_MAX_IMAGE_PIXELS or 64 M
    image_format: Literal["JPEG", "PNG"] = "JPEG"
    resize_factor: int = Field(default=0, ge=0)  # send images snapped to the processor's frame (Qwen: 28/32)
    nudge_turns_left: int = Field(
        default=1, ge=0
    )  # send the final-answer nudge this many turns before the end
    tool_settings: Any = None  # passed to geosleuth.tools.build_registry
    offline_use_ocr: bool = True
    pixels_only: bool = False  # benchmark runs: no file metadata or path reaches model, tools or observer
    geocode_answers: bool = False  # answers naming a place but no coordinates get the gazetteer's

    @model_validator(mode="after")
    def _check(self) -> AgentConfig:
        if self.verifier_model and self.samples < 2:
            raise ValueError("a verifier needs samples >= 2")
        if self.model is not None and not self.model.strip():
            raise ValueError("model name is empty")
        if self.observer is not None and not self.observer.strip():
            raise ValueError("observer is empty: use 'offline' or a vision model name")
        return self
