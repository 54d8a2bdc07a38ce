"""The search leak guard: in a benchmark run, search and POI results that hand the model its
sample's answer are dropped before the model, the verifier or a judge sees them.

An agent with web search can find the benchmark photo's own page (its Flickr page carries the
geotag) instead of reasoning from pixels (SpotAgent, appendix C.6). The runner gives each
sample a `GuardSpec`; while that sample runs, `active_guard()` is its `LeakGuard`, and the
search and POI tools pass their results through `LeakGuard.keep`. Modes:

- ``hosts``: a result whose URL lies on one of the dataset's source hosts (``flickr.com`` for
  IM2GPS3K and YFCC, ``mapillary.com`` for OSV-5M, plus hosts the user adds), or whose text
  holds the sample's id, its file name, or a long number of its file name (a Flickr photo id);
- ``strict``: also a result that states coordinates within `STRICT_RADIUS_KM` of the truth;
- ``off``: nothing is screened.

The truth lives only inside the distance test of a strict guard: no attribute or method hands
it back, and the tools learn only how many results went.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal, TypeVar, get_args
from urllib.parse import urlsplit

from geosleuth.core.geo import haversine_km
from geosleuth.core.parsing.coordinates import coordinate_pairs

GuardMode = Literal["off", "hosts", "strict"]
GUARD_MODES: tuple[str, ...] = get_args(GuardMode)
STRICT_RADIUS_KM = 1.0
MIN_NEEDLE = 5
"""Shorter ids and names are not looked for in result text: ``42`` would match any page."""
_LONG_NUMBER = re.compile(r"\d{6,}")
T = TypeVar("T")


def host_of(value: str) -> str:
    """The lower-case host of a URL or a bare host name, without ``www.`` or a port."""
    text = value.strip().lower()
    try:
        host = urlsplit(text if "//" in text else "//" + text).hostname or ""
    except ValueError:  # "http://[" and other unparseable text: no host to match
        return ""
    return host.removeprefix("www.")


def sample_needles(sample_id: str, image: str | None) -> tuple[str, ...]:
    """What names the sample in a result's text: its id, its file name and stem, and the long
    numbers in that stem (Flickr's photo id in ``<photo>_<secret>_<server>.jpg``)."""
    names = {sample_id}
    if image:
        path = PurePath(image)
        names |= {path.name, path.stem, *_LONG_NUMBER.findall(path.stem)}
    names |= set(_LONG_NUMBER.findall(sample_id))
    return tuple(sorted(n for n in names if len(n) >= MIN_NEEDLE))


@dataclass(frozen=True)
class GuardSpec:
    """How one sample's results are screened (picklable: it travels to scale-out workers)."""

    mode: GuardMode
    hosts: tuple[str, ...] = ()
    needles: tuple[str, ...] = ()
    truth: tuple[float, float] | None = field(default=None, repr=False)

    def start(self) -> LeakGuard:
        """A guard with its own count, for one run of the sample."""
        near = _near_test(self.truth) if self.mode == "strict" and self.truth is not None else None
        return LeakGuard(self.mode, self.hosts, self.needles, near)


def _near_test(truth: tuple[float, float]) -> Callable[[float, float], bool]:
    lat0, lon0 = truth

    def near(lat: float, lon: float) -> bool:
        return bool(haversine_km(lat, lon, lat0, lon0) <= STRICT_RADIUS_KM)

    return near


class LeakGuard:
    """One sample's screen; ``blocked`` counts the results it dropped."""

    def __init__(
        self,
        mode: GuardMode,
        hosts: Iterable[str] = (),
        needles: Iterable[str] = (),
        near: Callable[[float, float], bool] | None = None,
    ) -> None:
        self.mode = mode
        self.hosts = tuple(sorted({host_of(h) for h in hosts if host_of(h)}))
        self._needle_names = tuple(needles)
        self._needles: re.Pattern[str] | None = None  # compiled on the first result screened
        self._near = near
        self.blocked = 0

    def __repr__(self) -> str:
        return f"LeakGuard(mode={self.mode!r}, hosts={len(self.hosts)}, blocked={self.blocked})"

    def leaks(self, url: str | None, text: str) -> bool:
        """Whether a result (its URL, its text) would give the sample's answer away."""
        if self.mode == "off":
            return False
        host = host_of(url) if url else ""
        if host and any(host == h or host.endswith("." + h) for h in self.hosts):
            return True
        haystack = f"{url or ''}\n{text}".lower()
        if self._needle_names and self._needle_pattern().search(haystack):
            return True
        if self._near is not None:
            return any(self._near(lat, lon) for lat, lon in _positions(haystack))
        return False

    def _needle_pattern(self) -> re.Pattern[str]:
        """Any needle as a whole word: one pattern, built when a sample first sees a result (a
        run of a million samples whose agents search little compiles few)."""
        if self._needles is None:
            names = "|".join(re.escape(n.lower()) for n in self._needle_names)
            self._needles = re.compile(rf"(?<![A-Za-z0-9])(?:{names})(?![A-Za-z0-9])")
        return self._needles

    def keep(self, items: Sequence[T], view: Callable[[T], tuple[str | None, str]]) -> list[T]:
        """The items that do not leak; the others are counted in ``blocked``."""
        kept = [item for item in items if not self.leaks(*view(item))]
        self.blocked += len(items) - len(kept)
        return kept


def _positions(text: str) -> Iterator[tuple[float, float]]:
    """Stated pairs in both orders (a page may write ``lon, lat``), valid ones only."""
    for _, a, b in coordinate_pairs(text, any_pair=True):
        for lat, lon in ((a, b), (b, a)):
            if abs(lat) <= 90 and abs(lon) <= 180:
                yield lat, lon


_ACTIVE: ContextVar[LeakGuard | None] = ContextVar("geosleuth_leak_guard", default=None)


def active_guard() -> LeakGuard | None:
    """The guard of the sample whose tool call is running, if its run has one."""
    return _ACTIVE.get()


@contextmanager
def guarding(guard: LeakGuard | None) -> Iterator[LeakGuard | None]:
    """Make ``guard`` the active one for the code (and the tasks it starts) inside the block."""
    token = _ACTIVE.set(guard)
    try:
        yield guard
    finally:
        _ACTIVE.reset(token)
