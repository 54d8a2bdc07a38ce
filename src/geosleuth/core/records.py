"""Records shared by parsing, metrics, tools, the agent, evaluation and training.

Pydantic models so that every record round-trips through JSON (trajectory JSONL, run dirs).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from geosleuth.core.surrogates import clean_json

LEVELS: tuple[str, ...] = ("country", "admin1", "city", "admin2", "town", "street", "poi")
"""Place hierarchy, coarse to fine (DESIGN.md)."""
PLACE_LEVELS: tuple[str, ...] = ("admin1", "city", "admin2", "town")
"""Levels a lone place name of open level ("Hesse" in "Hesse, Germany") may stand for."""


class Record(BaseModel):
    """Base of the shared records: validators are built on first use, not at import, so a
    command that touches two of these models does not pay for all of them at start-up."""

    model_config = ConfigDict(defer_build=True)


class ParseStatus(StrEnum):
    """Outcome of turning model text into a prediction."""

    OK = "ok"  # coordinates (and/or the requested answer) found
    PARTIAL = "partial"  # some fields (e.g. only a country) but no coordinates
    FAILED = "failed"  # text present, nothing usable
    EMPTY = "empty"  # no text at all


class Prediction(Record):
    """One parsed answer. Coordinates are WGS-84; ``None`` means the model did not say."""

    model_config = ConfigDict(extra="forbid")

    lat: float | None = None
    lon: float | None = None
    country: str | None = None
    country_code: str | None = None  # ISO 3166-1 alpha-2 when the country text resolved
    admin1: str | None = None
    city: str | None = None
    admin2: str | None = None
    town: str | None = None
    street: str | None = None
    poi: str | None = None
    place: str | None = None  # a lone place name whose level the answer leaves open ("Hesse, Germany")
    address: str | None = None
    choice: str | None = None  # multiple-choice letter ("A") when the task is one
    confidence: float | None = None
    radius_km: float | None = None  # uncertainty radius when the producer gives one
    raw: str = ""
    status: ParseStatus = ParseStatus.EMPTY
    format: str | None = None  # which answer format matched ("json", "answer_lines", …)
    coords_source: Literal["model", "geocoded", "exif", "aggregate"] | None = None
    recovered: list[str] = Field(default_factory=list)  # what robust parsing repaired
    evidence: list[str] = Field(default_factory=list)

    @property
    def has_coords(self) -> bool:
        return self.lat is not None and self.lon is not None

    def level(self, name: str) -> str | None:
        """Text at one hierarchy level (``country``, ``admin1``, …); None if absent or unknown.

        A lone ``place`` of open level stands in at the levels it may be (admin1, city,
        admin2, town) when the answer gives that level no text of its own.
        """
        value = getattr(self, name, None)
        if value is None and name in PLACE_LEVELS:
            return self.place
        return value


class Place(Record):
    """A gazetteer or provider place."""

    id: str
    name: str
    lat: float
    lon: float
    country_code: str | None = None
    country: str | None = None
    admin1: str | None = None
    admin2: str | None = None
    population: int = 0
    kind: str = "city"  # city | admin | country | poi | …
    address: str | None = None
    score: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ReversePlace(Record):
    """What is at a point: country by polygon, admin levels and nearest city by gazetteer."""

    lat: float
    lon: float
    country_code: str | None = None
    country: str | None = None
    admin1: str | None = None
    admin2: str | None = None
    city: str | None = None
    city_distance_km: float | None = None
    on_land: bool | None = None  # False when the country came from the nearest-polygon fallback


class Sample(Record):
    """One benchmark item."""

    model_config = ConfigDict(extra="forbid")

    id: str
    image: str | None = None  # path to the image file
    lat: float | None = None
    lon: float | None = None
    labels: dict[str, str] = Field(default_factory=dict)  # level -> text (country, admin1, city, …)
    answer_type: Literal["coordinates", "level", "choice"] = "coordinates"
    answer_level: str | None = None  # WhereStreet: level the answer is given at
    hint: str | None = None
    hint_level: str | None = None
    choices: list[str] = Field(default_factory=list)
    answer: str | None = None  # correct choice letter or reference answer text
    key_clues: list[str] = Field(default_factory=list)
    clue_weights: list[float] = Field(default_factory=list)
    split: str | None = None
    data_source: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Usage(Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


MAX_ARGUMENT_CHARS = 8192
"""Longest tool-call arguments (as JSON) a record keeps; longer ones are kept cut, with their length."""

TRUNCATED_KEY = "_truncated"
ORIGINAL_CHARS_KEY = "_original_chars"


def cap_arguments(arguments: dict[str, Any], max_chars: int = MAX_ARGUMENT_CHARS) -> dict[str, Any]:
    """Arguments as a record keeps them: unchanged when short, else the first ``max_chars`` of
    their JSON under ``_truncated`` and the full length under ``_original_chars``.

    A model can emit megabytes of arguments; the record (and the conversation it replays)
    must not grow with them.
    """
    if TRUNCATED_KEY in arguments and ORIGINAL_CHARS_KEY in arguments:
        return arguments  # already capped
    try:
        text = json.dumps(arguments, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        return {TRUNCATED_KEY: "(arguments too deeply nested to store)", ORIGINAL_CHARS_KEY: None}
    if len(text) <= max_chars:
        return arguments
    return {TRUNCATED_KEY: text[:max_chars], ORIGINAL_CHARS_KEY: len(text)}


MAX_TURN_TEXT_CHARS = 200_000
"""Longest model text (content, reasoning) a turn stores; a longer one keeps its head and tail."""


def cap_text(text: str, max_chars: int = MAX_TURN_TEXT_CHARS) -> tuple[str, int | None]:
    """``text`` unchanged when at most ``max_chars`` long, else at most ``max_chars`` of it: head
    and tail around a marker naming the cut, with the original length (None when nothing was
    cut). The tail is kept because final answers come last; cutting a cut text changes nothing
    more than its marker."""
    if len(text) <= max_chars:
        return text, None
    marker = f"\n[… {len(text):,} characters, cut to {max_chars:,} here …]\n"
    keep = max(0, max_chars - len(marker))
    head = keep * 3 // 4
    return text[:head] + marker + text[len(text) - (keep - head) :], len(text)


class ToolCallRecord(Record):
    """One tool call as the trajectory keeps it; arguments are capped (`cap_arguments`)."""

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool = True
    error: str | None = None
    result_text: str = ""
    result_images: list[str] = Field(default_factory=list)  # paths beside the JSONL
    latency_s: float = 0.0
    cache_hit: bool = False
    provider: str | None = None

    @field_validator("arguments")
    @classmethod
    def _capped(cls, value: dict[str, Any]) -> dict[str, Any]:
        return cap_arguments(value)


class Turn(Record):
    """One generate → act step."""

    index: int
    text: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    latency_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    note: str | None = None  # e.g. "reminder sent", "final-answer nudge"
    truncated: dict[str, int] = Field(default_factory=dict)  # field -> original length, where a cap cut it
    dropped_calls: int = 0  # tool calls past the per-turn cap: counted, not stored, not run


class TrajectoryStatus(StrEnum):
    OK = "ok"
    PARSE_FAILED = "parse_failed"
    MODEL_ERROR = "model_error"
    TOOL_ERROR = "tool_error"
    TIMEOUT = "timeout"
    BUDGET_EXHAUSTED = "budget_exhausted"
    NO_EVIDENCE = "no_evidence"
    INPUT_ERROR = "input_error"


class Trajectory(Record):
    """One JSONL record per trajectory (DESIGN.md): shared by eval, export and the web app."""

    sample_id: str
    model: str
    prompt_style: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)  # OpenAI format, images by path
    turns: list[Turn] = Field(default_factory=list)
    prediction: Prediction | None = None
    status: TrajectoryStatus = TrajectoryStatus.OK
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    image_scale: float | None = None  # resized / original, for zoom mapping
    samples: list[Trajectory] = Field(default_factory=list)  # the N trajectories when N > 1
    aggregator: str | None = None  # "verifier:<model>" | "medoid" when samples were aggregated
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def usage(self) -> Usage:
        u = Usage()
        for t in self.turns:
            u.prompt_tokens += t.usage.prompt_tokens
            u.completion_tokens += t.usage.completion_tokens
        return u

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [c for t in self.turns for c in t.tool_calls]


def trajectory_from_json(line: str | bytes) -> Trajectory:
    """A trajectory record from its JSON line; one whose text carries a lone surrogate escape
    (``"\\ud800"``: valid JSON, refused by pydantic's parser) is read with it replaced by U+FFFD,
    counted under ``metadata["replaced_surrogates"]["file"]``. Raises ValueError otherwise."""
    try:
        return Trajectory.model_validate_json(line)
    except ValueError as exc:
        error = exc
    if (b"\\u" if isinstance(line, bytes) else "\\u") not in line:
        raise error
    try:
        data, replaced = clean_json(json.loads(line))
        trajectory = Trajectory.model_validate(data)
    except (ValueError, RecursionError):
        raise error from None
    if replaced:
        counts = trajectory.metadata.setdefault("replaced_surrogates", {})
        counts["file"] = counts.get("file", 0) + replaced
    return trajectory


class Task(Record):
    """What the agent may see of a sample: the image and the question, never its ground truth."""

    model_config = ConfigDict(extra="forbid")

    id: str
    image: str | None = None
    answer_type: Literal["coordinates", "level", "choice"] = "coordinates"
    answer_level: str | None = None
    hint: str | None = None
    hint_level: str | None = None
    choices: list[str] = Field(default_factory=list)

    @classmethod
    def from_sample(cls, sample: Sample) -> Task:
        return cls(
            id=sample.id,
            image=sample.image,
            answer_type=sample.answer_type,
            answer_level=sample.answer_level,
            hint=sample.hint,
            hint_level=sample.hint_level,
            choices=list(sample.choices),
        )
