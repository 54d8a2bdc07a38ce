"""Evaluation configuration (flags or a YAML / TOML file) and the run manifest saved beside it.

The manifest records what produced a run (resolved config, package version, model and
provider names, dataset fingerprint) and never a secret: values under key-like names are
redacted before anything is written.
"""

from __future__ import annotations

import json
import platform
import re
import secrets
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import geosleuth
from geosleuth.eval.judges.catalog import JUDGES
from geosleuth.eval.run.store import TRAJECTORIES, RunDirError, write_atomic_lines
from geosleuth.secrets import redact_text
from geosleuth.tools.leakguard import GuardMode

MANIFEST = "run.json"
SAMPLES = "samples.jsonl"
SHARDS = "shards"
SHARD_POSITIONS = "shard_positions.json"
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_SECRET = re.compile(r"(api[_-]?key|secret|password|token(?![a-z])|authorization|bearer)", re.IGNORECASE)
"""Secret-looking keys; ``token`` only as a word end, so ``max_tokens`` / ``tokenizer`` stay readable."""


class ConfigError(Exception):
    """The configuration file or flags are invalid."""


class Price(BaseModel):
    """USD per million tokens."""

    prompt: float = 0.0
    completion: float = 0.0


class JudgeSettings(BaseModel):
    """An OpenAI-compatible model used as judge / verifier of free-text answers."""

    model_config = ConfigDict(extra="forbid")

    model: str
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str | None = None  # name of the environment variable holding the key
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_retries: int = 2
    concurrency: int = 8
    tasks: list[str] = Field(default_factory=lambda: ["levels"])

    @field_validator("tasks")
    @classmethod
    def _registered(cls, tasks: list[str]) -> list[str]:
        unknown = [t for t in tasks if t not in JUDGES]
        if unknown:
            raise ValueError(f"unknown judge {', '.join(unknown)}; choose from {', '.join(JUDGES.names())}")
        return tasks


class EvalConfig(BaseModel):
    """Everything `geosleuth eval` needs; each field has a flag of the same name."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    out: str
    format: str = "auto"
    images: str | None = None
    split: str | None = None
    seed: int = 0
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    prompt: str | None = None
    tools: list[str] | None = None
    samples: int = Field(default=1, ge=1)
    verifier: str | None = None
    verifier_view: Literal["full", "evidence"] | None = None  # None: the prompt style's
    max_turns: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    tool_calling: str | None = None  # native | text (default: the prompt style's)
    resize_factor: int | None = Field(default=None, ge=0)  # Qwen-VL patch multiple: 28 / 32
    observer: str | None = None  # "offline" or a VLM describing images to a text-only model
    observer_base_url: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)  # per model turn
    reasoning_effort: str | None = None
    provider: str | None = None  # request dialect: auto | generic | openai | gemini | deepseek
    agent: dict[str, Any] = Field(default_factory=dict)  # further AgentConfig fields, passed through
    agent_fn: str | None = None  # "module:function", an async (Task) -> Trajectory replacing the agent
    concurrency: int = Field(default=8, ge=1)  # samples in flight per shard (eval.endpoints)
    limit: int | None = Field(default=None, ge=1)
    timeout_s: float | None = None
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    ray_batch_size: int = Field(default=32, ge=1)  # samples per batch sent to an actor
    ray_resources: dict[str, float] = Field(default_factory=dict)  # custom resources pinning the actors
    ray_restart_wait_s: float = Field(default=120.0, gt=0)  # a lost actor's time to come back
    shards: int | None = Field(default=None, ge=1)  # shards of the run (default: one per endpoint)
    endpoints: list[str] = Field(default_factory=list)  # base_url of shard i: endpoints[i % len], any backend
    shard: str | None = None  # "I/N": this job runs shard I of N (job arrays without Ray), see merge
    protocol: str | None = None
    breakdowns: list[str] = Field(default_factory=list)
    prices: dict[str, Price] = Field(default_factory=dict)  # model name -> price
    judge: JudgeSettings | None = None
    skip_invalid: bool = False
    report: bool = True
    allow_metadata: bool = False  # the agent may read the image's metadata (EXIF GPS, captions, …)
    leak_guard: GuardMode = "hosts"  # search / POI results dropped: off | hosts | strict
    leak_hosts: list[str] = Field(default_factory=list)  # source hosts added to the layout's
    manifest: str | None = None  # a frozen benchmark manifest the dataset must match

    @field_validator("shard")
    @classmethod
    def _shard_spec(cls, value: str | None) -> str | None:
        if value is None:
            return None
        index, count = parse_shard(value)
        return f"{index}/{count}"

    @model_validator(mode="after")
    def _one_way_to_shard(self) -> EvalConfig:
        if self.shard is not None and self.backend == "ray":
            raise ValueError("shard is for independent jobs; the ray backend shards by itself")
        return self

    @property
    def shard_spec(self) -> tuple[int, int] | None:
        """(index, count) when this run is one shard of a larger one."""
        return parse_shard(self.shard) if self.shard is not None else None


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` with 0 <= I < N, as job arrays number their tasks (SLURM_ARRAY_TASK_ID from 0)."""
    m = _SHARD.match(text)
    if not m:
        raise ValueError(f"shard must look like I/N (e.g. 0/8), got {text!r}")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1 or index >= count:
        raise ValueError(f"shard {text!r}: need N >= 1 and 0 <= I < N")
    return index, count


def shard_dir(run_dir: Path, index: int, count: int) -> Path:
    """Where shard I of N keeps its own run directory, inside the run it belongs to."""
    return run_dir / SHARDS / f"{index}-of-{count}"


def read_config_file(path: Path) -> dict[str, Any]:
    """A YAML or TOML mapping; an ``eval`` table, if present, is used."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'YAML'}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return dict(data.get("eval", data))


def resolve_config(file_values: dict[str, Any], flags: dict[str, Any]) -> EvalConfig:
    """Config file values overridden by every flag the user actually gave (not ``None``)."""
    merged = {**file_values, **{k: v for k, v in flags.items() if v is not None}}
    try:
        return EvalConfig.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid eval config: {problems}") from exc


def split_list(value: str | None) -> list[str] | None:
    """A comma-separated option (``--tools a,b``) as a list; ``None`` when nothing is named."""
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def judge_settings(
    model: str | None, base_url: str | None, key_env: str | None, tasks: str | None
) -> JudgeSettings | None:
    """The judges of ``--judge-model`` and its companions; ``None`` when no judge model is named."""
    if not model:
        if tasks or base_url:
            raise ValueError("--judges / --judge-base-url need --judge-model")
        return None
    values: dict[str, Any] = {"model": model, "api_key_env": key_env}
    if base_url:
        values["base_url"] = base_url
    if tasks:
        values["tasks"] = split_list(tasks)
    return JudgeSettings.model_validate({k: v for k, v in values.items() if v is not None})


FLAG_FIELDS: Mapping[str, str] = {
    "timeout": "timeout_s",
    "breakdown": "breakdowns",
    "ray_resource": "ray_resources",
    "ray_restart_wait": "ray_restart_wait_s",
    "leak_host": "leak_hosts",
}
"""Flags of `geosleuth eval` (options of `geosleuth.evaluate`) whose config field has another name."""
DEFAULT_MEANS_UNSET: Mapping[str, Any] = {
    "skip_invalid": False,
    "report": True,
    "breakdown": [],
    "allow_metadata": False,
    "leak_host": [],
}
"""Flags whose default value leaves the config file's setting as it is."""
JUDGE_FLAGS = ("judge_model", "judge_base_url", "judge_api_key_env", "judges")


def config_flags(options: Mapping[str, Any]) -> dict[str, Any]:
    """EvalConfig fields from `geosleuth eval`'s flags by their names; ``None`` where not given,
    so that `resolve_config` keeps the config file's value."""
    values = dict(options)
    judge = judge_settings(*(values.pop(name, None) for name in JUDGE_FLAGS))
    flags = {
        FLAG_FIELDS.get(name, name): None
        if name in DEFAULT_MEANS_UNSET and value == DEFAULT_MEANS_UNSET[name]
        else value
        for name, value in values.items()
    }
    if isinstance(flags.get("tools"), str):
        flags["tools"] = split_list(flags["tools"])
    if isinstance(flags.get("ray_resources"), list | tuple):
        flags["ray_resources"] = ray_resources(flags["ray_resources"])
    return {**flags, "judge": judge}


def ray_resources(values: list[str] | tuple[str, ...]) -> dict[str, float] | None:
    """``NAME=AMOUNT`` pairs (``--ray-resource``) as Ray's ``resources`` mapping."""
    if not values:
        return None
    resources = {}
    for value in values:
        name, sep, amount = (part.strip() for part in value.partition("="))
        try:
            number = float(amount)
        except ValueError:
            number = None
        if not sep or not name or number is None:
            raise ValueError(f"--ray-resource must look like NAME=AMOUNT (e.g. geosleuth=1), got {value!r}")
        resources[name] = number
    return resources


def redact(value: Any, key: str = "") -> Any:
    """Copy of a JSON-like value with secret-looking entries replaced (``*_env`` names are kept)."""
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, key) for v in value]
    if value and _SECRET.search(key) and not key.endswith("_env"):
        return "<redacted>"
    return value


def build_manifest(
    config: EvalConfig, dataset_info: dict[str, Any], endpoints: Sequence[str | None] | None = None
) -> dict[str, Any]:
    """The provenance record of a run; ``endpoints``: the base URL of each shard it runs
    (`geosleuth.eval.run.endpoints.plan_lanes`), ``base_url`` alone when not given."""
    providers = sorted({str(v) for k, v in config.agent.items() if "provider" in k and isinstance(v, str)})
    if config.agent_fn is None:
        providers += _tool_providers(config.agent.get("tool_settings"))
    return {
        "geosleuth_version": geosleuth.__version__,
        "python": platform.python_version(),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": config.model or ("offline-pipeline" if not config.agent_fn else config.agent_fn),
        "verifier": config.verifier,
        "judge_model": config.judge.model if config.judge else None,
        **_endpoints(config, [config.base_url] if endpoints is None else endpoints),
        "providers": providers,
        "dataset": dataset_info,
        "config": redact(config.model_dump(mode="json")),
    }


def _endpoints(config: EvalConfig, urls: Sequence[str | None]) -> dict[str, Any]:
    """The model endpoint the run talks to, as the client resolves it (flag, then $OPENAI_BASE_URL);
    with several, ``endpoint`` is None and ``endpoints`` lists them."""
    if config.agent_fn or not config.model:
        return {"endpoint": None}
    from geosleuth.agent.client import resolve_endpoint

    resolved = list(dict.fromkeys(resolve_endpoint(url, None)[0] for url in urls))
    if len(resolved) == 1:
        return {"endpoint": resolved[0]}
    return {"endpoint": None, "endpoints": resolved}


def _tool_providers(settings: Any) -> list[str]:
    """``family:provider`` for each tool family the built-in agent would use (env and file applied)."""
    from geosleuth.tools.registry import coerce_settings

    try:
        selection = coerce_settings(settings).providers
    except ValueError:
        return []
    return [f"{family}:{name}" for family, name in selection.model_dump().items()]


AGENT_FIELDS = (
    "model",
    "prompt",
    "tools",
    "samples",
    "verifier",
    "verifier_view",
    "max_turns",
    "temperature",
    "tool_calling",
    "resize_factor",
    "observer",
    "provider",
    "agent",
    "agent_fn",
    "allow_metadata",
    "leak_guard",
    "leak_hosts",
)
"""Config fields that define the system under test: a resumed run must keep them, and the endpoint
they resolve to (`endpoint` in the manifest); one absent from an older manifest is not checked."""


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Save the manifest; on resume the dataset must be the one the run started with."""
    path = run_dir / MANIFEST
    if path.exists():
        previous = json.loads(path.read_text(encoding="utf-8"))
        old = previous.get("dataset", {}).get("fingerprint")
        new = manifest["dataset"].get("fingerprint")
        if old and new and old != new:
            raise RunDirError(
                f"{run_dir} was started on a different dataset ({old[:19]}… vs {new[:19]}…); "
                "use a new --out directory"
            )
        before, now = previous.get("config", {}), manifest.get("config", {})
        changed = [
            f"{k} {before.get(k)!r} → {now.get(k)!r}"
            for k in AGENT_FIELDS
            if k in before and before.get(k) != now.get(k)
        ]
        endpoint = previous.get("endpoint")
        # a run stopped before its first record (a wrong URL) may be pointed elsewhere
        if endpoint and endpoint != manifest.get("endpoint") and _has_records(run_dir):
            changed.append(f"endpoint {endpoint!r} → {manifest.get('endpoint')!r}")
        if changed:
            shown = ", ".join(changed)
            raise RunDirError(
                f"{run_dir} was started with other agent settings ({shown}); resuming would mix "
                "two systems in one run: use a new --out directory"
            )
        manifest = {**manifest, "created_at": previous.get("created_at", manifest["created_at"])}
        manifest["resumed_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic_lines(path, manifest_chunks(manifest))


@dataclass(frozen=True)
class StreamedDict:
    """A manifest value written entry by entry as ``run.json`` is saved, never held as one dict
    (the image hashes of a million samples); ``entries`` is called once, at the write."""

    entries: Callable[[], Iterable[tuple[str, Any]]]


def manifest_chunks(manifest: Mapping[str, Any]) -> Iterator[bytes]:
    """``run.json``'s text (indented JSON, secrets redacted) in pieces: each `StreamedDict` is
    spliced in entry by entry, laid out exactly as ``json.dumps(..., indent=2)`` lays out a dict."""
    streamed: list[StreamedDict] = []
    nonce = secrets.token_hex(8)  # no value of the manifest can pass for a placeholder

    def placeholder(value: Any) -> str:
        if not isinstance(value, StreamedDict):
            raise TypeError(f"{type(value).__name__} is not JSON serializable")
        streamed.append(value)
        return f"\0{nonce} {len(streamed) - 1}\0"

    text = redact_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=placeholder)) + "\n"
    done = 0
    for found in re.finditer(rf'"\\u0000{nonce} (\d+)\\u0000"', text):
        yield text[done : found.start()].encode()
        line = text[text.rfind("\n", 0, found.start()) + 1 : found.start()]
        depth = len(line) - len(line.lstrip(" "))
        yield from _dict_chunks(streamed[int(found.group(1))].entries(), depth)
        done = found.end()
    yield text[done:].encode()


def _dict_chunks(entries: Iterable[tuple[str, Any]], depth: int) -> Iterator[bytes]:
    inner = "\n" + " " * (depth + 2)
    opened = False
    for key, value in entries:
        item = json.dumps(key, ensure_ascii=False) + ": " + json.dumps(value, indent=2, ensure_ascii=False)
        yield (("," if opened else "{") + inner + redact_text(item).replace("\n", inner)).encode()
        opened = True
    yield ("\n" + " " * depth + "}" if opened else "{}").encode()


def _has_records(run_dir: Path) -> bool:
    path = run_dir / TRAJECTORIES
    return path.exists() and path.stat().st_size > 0


PER_SAMPLE_HASHES = "image_sha256"
"""The ``dataset`` table of run.json with an entry per sample (about 90 bytes each)."""


def read_manifest(run_dir: Path, *, image_hashes: bool = True) -> dict[str, Any]:
    """run.json. Without ``image_hashes`` its per-sample hash table is left undecoded: a report of
    a million-sample run reads none of it (``compare``, ``arena``, ``merge`` and resume ask for it)."""
    path = run_dir / MANIFEST
    if not path.exists() and (run_dir / SHARDS).is_dir():
        raise RunDirError(f"{run_dir} holds shards of a run: `geosleuth merge {run_dir}` makes it one")
    if not path.exists():
        raise RunDirError(f"{run_dir} is not a run directory (no {MANIFEST})")
    data = path.read_bytes()
    if not image_hashes:
        try:
            return _without_hashes(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # not strict JSON (a NaN json.dumps wrote) or not an object: read as before
    return json.loads(data)


def _without_hashes(data: bytes) -> dict[str, Any]:
    """The manifest with ``dataset.image_sha256`` skipped as raw bytes, never made into objects."""
    out: dict[str, Any] = {}
    for key, raw in msgspec.json.decode(data, type=dict[str, msgspec.Raw]).items():
        if key == "dataset":
            fields = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
            out[key] = {k: msgspec.json.decode(v) for k, v in fields.items() if k != PER_SAMPLE_HASHES}
        else:
            out[key] = msgspec.json.decode(raw)
    return out
