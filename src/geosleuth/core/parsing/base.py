"""What every answer family hands back: the fields one candidate answer yields."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ParseMode = Literal["robust", "strict"]


class _Searchable(Protocol):
    def search(self, query: str, country: str | None = None, limit: int = 10) -> Sequence[Any]: ...


GeocodeFn = Callable[[str, str | None], tuple[float, float] | None]
"""``(address, country_hint) -> (lat, lon)`` or ``None`` when nothing matched."""

Geocoder = GeocodeFn | _Searchable

PlaceLevelFn = Callable[[str, str | None], str | None]
"""``(name, country_code) -> level`` ("city", "admin1", …) of an ambiguous place, or ``None``."""


@dataclass
class _Found:
    """Fields collected from one candidate answer before they become a Prediction."""

    lat: float | None = None
    lon: float | None = None
    fields: dict[str, str] = field(default_factory=dict)
    confidence: float | None = None
    fmt: str | None = None
    recovered: list[str] = field(default_factory=list)
    labeled: bool = False  # coordinates came under latitude / longitude keys (never swapped)

    @property
    def has_coords(self) -> bool:
        return self.lat is not None and self.lon is not None

    @property
    def useful(self) -> bool:
        return self.has_coords or bool(self.fields)
