"""Tool settings: which provider serves each tool, keys, cache, HTTP behaviour.

Loaded from a YAML/TOML file and the environment. API keys come from
``GEOSLEUTH_<PROVIDER>_API_KEY`` (or the file) and are held as ``SecretStr`` so that they
never print, serialise into a trajectory or enter a cache key.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from geosleuth.bounds.httpbody import DEFAULT_MAX_BODY_BYTES
from geosleuth.tools.base import BBoxConvention

GeocodeProviderName = Literal["offline", "nominatim", "photon", "google", "opencage", "amap"]
PoiProviderName = Literal["offline", "nominatim", "photon", "google", "amap"]
SearchProviderName = Literal["offline", "tavily", "serper", "brave", "searxng"]
StaticMapProviderName = Literal["offline", "google", "osm", "amap"]
SatelliteMapProviderName = Literal["offline", "google", "esri", "amap"]
OcrEngineName = Literal["rapidocr", "tesseract"]
CacheMode = Literal["read_write", "replay", "refresh", "off"]

PROVIDER_TOOLS: dict[str, str] = {
    "geocode": "geocode",
    "reverse_geocode": "geocode",
    "poi_input_tips": "poi",
    "poi_keyword_search": "poi",
    "poi_detail_query": "poi",
    "web_search": "search",
    "static_map_query": "static_map",
    "satellite_map_query": "satellite_map",
    "ocr": "ocr",
}
"""Tool name -> the ``providers`` field that chooses its backend."""


class ProviderSelection(BaseModel):
    """One backend per tool family; ``offline`` needs no key and no network."""

    model_config = ConfigDict(extra="forbid")

    geocode: GeocodeProviderName = "offline"
    poi: PoiProviderName = "offline"
    search: SearchProviderName = "offline"
    static_map: StaticMapProviderName = "offline"
    satellite_map: SatelliteMapProviderName = "offline"
    ocr: OcrEngineName = "rapidocr"


class ServiceConfig(BaseModel):
    """Per-service connection settings (key, base URL for self-hosted or test servers, rate)."""

    model_config = ConfigDict(extra="forbid")

    api_key: SecretStr | None = None
    base_url: str | None = None
    requests_per_second: float | None = None
    timeout_s: float | None = None
    language: str | None = None


class HttpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_s: float = 15.0  # one attempt, whole: connect, send and read the capped body
    max_response_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)  # decoded; longer fails the call
    max_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    allow_private_urls: bool = False  # tests flip this to reach fake servers on 127.0.0.1
    pool_connections: bool = True  # one pooled client per event loop; False opens one per request
    redis_url: str | None = None  # rate limits shared by every process using this Redis server
    user_agent: str = "geosleuth/0.1 (+https://github.com/geosleuth/geosleuth)"


class CacheSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Literal["sqlite", "redis", "none"] = "sqlite"
    path: Path | None = None  # default: <data dir>/tools/cache.sqlite
    redis_url: str | None = None
    ttl_s: float | None = 30 * 24 * 3600.0  # None: never expires
    mode: CacheMode = "read_write"
    cache_offline: bool = False  # offline providers are already fast and deterministic


class ZoomSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_side_px: int = 28
    max_upscale: float = 4.0
    target_long_side: int = 1024
    max_output_pixels: int = 2_000_000


class MapSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    width: int = 640
    height: int = 640
    default_zoom: int = 12
    satellite_default_zoom: int = 17


class ToolSettings(BaseModel):
    """Everything tools need besides the call arguments."""

    model_config = ConfigDict(extra="forbid")

    providers: ProviderSelection = Field(default_factory=ProviderSelection)
    services: dict[str, ServiceConfig] = Field(default_factory=dict)
    http: HttpSettings = Field(default_factory=HttpSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    zoom: ZoomSettings = Field(default_factory=ZoomSettings)
    maps: MapSettings = Field(default_factory=MapSettings)
    bbox_convention: BBoxConvention = "absolute"
    max_result_chars: int = 4000
    max_results: int = 10
    poi_files: list[Path] = Field(default_factory=list)  # GeoJSON / CSV points for offline POI search
    search_documents: list[Path] = Field(default_factory=list)  # .txt / .md / .jsonl for offline search
    data_dir: Path | None = None  # default: $GEOSLEUTH_DATA_DIR or ~/.cache/geosleuth/<version>

    @model_validator(mode="after")
    def _share_rate_limits(self) -> ToolSettings:
        """A Redis cache means many workers: their rate limits share that server unless told otherwise."""
        if self.http.redis_url is None and self.cache.backend == "redis" and self.cache.redis_url:
            self.http = self.http.model_copy(update={"redis_url": self.cache.redis_url})
        return self

    def service(self, name: str) -> ServiceConfig:
        return self.services.get(name) or ServiceConfig()

    def api_key(self, service: str) -> str | None:
        """Key for a service: environment first, then the config file."""
        env = os.environ.get(f"GEOSLEUTH_{service.upper()}_API_KEY")
        if env:
            return env
        key = self.service(service).api_key
        return key.get_secret_value() if key else None

    def base_url(self, service: str, default: str | None) -> str | None:
        return (
            os.environ.get(f"GEOSLEUTH_{service.upper()}_BASE_URL")
            or self.service(service).base_url
            or default
        )

    def resolved_data_dir(self) -> Path:
        if self.data_dir:
            return self.data_dir
        env = os.environ.get("GEOSLEUTH_DATA_DIR")
        if env:
            return Path(env)
        from geosleuth import __version__

        return Path.home() / ".cache" / "geosleuth" / __version__

    def cache_path(self) -> Path:
        return self.cache.path or self.resolved_data_dir() / "tools" / "cache.sqlite"

    @classmethod
    def load(cls, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> ToolSettings:
        """Read a YAML/TOML file (the whole file, or its ``tools:`` section; default
        ``$GEOSLEUTH_TOOLS_CONFIG``) and apply environment overrides."""
        env = os.environ if env is None else env
        path = path if path is not None else env.get("GEOSLEUTH_TOOLS_CONFIG") or None
        data: dict[str, Any] = _read_config_file(Path(path)) if path is not None else {}
        _apply_env(data, env)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"invalid tool settings: {problems}") from None


def _read_config_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"tool settings file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text) if path.suffix.lower() == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot parse {path}: {exc}") from None
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must contain a mapping of settings")
    section = raw.get("tools", raw)
    if not isinstance(section, dict):
        return {}
    return {k: v for k, v in section.items() if v is not None}  # an empty `providers:` means the defaults


_ENV_SELECTION = {f"GEOSLEUTH_{field.upper()}_PROVIDER": field for field in ProviderSelection.model_fields}


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    """Environment variables override the file: provider choice, cache mode and path."""
    for var, field in _ENV_SELECTION.items():
        if env.get(var):
            data.setdefault("providers", {})[field] = env[var].strip().lower()
    if env.get("GEOSLEUTH_TOOL_CACHE_MODE"):
        data.setdefault("cache", {})["mode"] = env["GEOSLEUTH_TOOL_CACHE_MODE"].strip().lower()
    if env.get("GEOSLEUTH_TOOL_CACHE"):
        data.setdefault("cache", {})["path"] = env["GEOSLEUTH_TOOL_CACHE"]
    if env.get("GEOSLEUTH_REDIS_URL"):
        data.setdefault("cache", {}).update(backend="redis", redis_url=env["GEOSLEUTH_REDIS_URL"])
        data.setdefault("http", {})["redis_url"] = env["GEOSLEUTH_REDIS_URL"]
