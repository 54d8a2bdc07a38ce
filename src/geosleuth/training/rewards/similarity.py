"""Place-name similarity for the training rewards: multilingual by default, pluggable.

`multilingual_similarity` accepts the same place written in another language or script
("山东" / "Shandong", "青岛" / "Qingdao", "Deutschland" / "Germany"): countries resolve through
their aliases, other names through the offline gazetteer (two names naming the same gazetteer
place, or the same admin-1 region, match). A user similarity is any callable
``(predicted, reference, level) -> float in [0, 1]`` named by a dotted path
(``pkg.module:function``); `embedding_similarity` builds one from a sentence-transformers
model the user already has (GeoAgent's own R_sem is a multilingual embedding cosine).
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from typing import Any

from geosleuth.core.reward_math import Similarity, default_similarity
from geosleuth.core.text import normalize, strip_generic
from geosleuth.plugins import load_callable

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 200
"""Longer "names" are prose, not places: they get string similarity only (bounded gazetteer work)."""


def _key(name: str) -> str:
    return strip_generic(normalize(name))


@lru_cache(maxsize=65_536)
def _gazetteer_keys(name: str) -> frozenset[str]:
    """Identities a name may stand for: the gazetteer places it finds and their admin-1 regions."""
    from geosleuth.gazetteer import get_gazetteer

    try:
        places = get_gazetteer().search(name, limit=3)
    except Exception as exc:  # noqa: BLE001 - no gazetteer: the string similarity still answers
        log.warning("similarity: gazetteer lookup of %r failed: %s", name[:80], exc)
        return frozenset()
    keys: set[str] = set()
    for p in places:
        if p.id:
            keys.add(p.id)
        if p.kind == "admin1" or (p.id or "").startswith("admin1:"):
            keys.add(f"region:{p.country_code}:{_key(p.admin1 or p.name)}")
    return frozenset(keys)


def multilingual_similarity(predicted: str, reference: str, level: str) -> float:
    """`default_similarity`, raised to 1 when both names resolve to the same gazetteer place."""
    base = default_similarity(predicted, reference, level)
    if base >= 1.0 or level == "country" or not predicted or not reference:
        return base
    if len(predicted) > MAX_NAME_CHARS or len(reference) > MAX_NAME_CHARS:
        return base
    a, b = _gazetteer_keys(predicted.strip()), _gazetteer_keys(reference.strip())
    return 1.0 if _below_country(a) & _below_country(b) else base


def _below_country(keys: frozenset[str]) -> frozenset[str]:
    """The identities that can match below the country level: a name's sub-country places, and
    its country only when it names nothing else. "Scotland" and "England" are each an admin-1
    region and also, as aliases, the United Kingdom: they must not meet at the country (GeoVista's
    rule gives Glasgow, Scotland against London, England the country alone), nor "Wales" at
    "United Kingdom"; "香港" and "Hong Kong" still meet at Hong Kong."""
    below = frozenset(k for k in keys if not k.startswith("country:"))
    return below or keys


def embedding_similarity(model: str, device: str | None = None) -> Similarity:
    """Cosine of a sentence-transformers model's embeddings (the user's model; nothing is downloaded
    unless the user's own configuration allows it). Embeddings are cached per text."""
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(model, device=device)
    lock = threading.Lock()

    @lru_cache(maxsize=100_000)
    def embed(text: str) -> Any:
        with lock:
            return encoder.encode([text], normalize_embeddings=True)[0]

    def similarity(predicted: str, reference: str, level: str) -> float:
        return float(embed(predicted) @ embed(reference))

    return similarity


def resolve_similarity(value: Similarity | str | None, model: str | None = None) -> Similarity:
    """The similarity a reward uses: a callable, a dotted path, a sentence-transformers model, the default."""
    if model:
        return _embedding_cached(model)
    if value is None or value == "multilingual":
        return multilingual_similarity
    if value == "string":
        return default_similarity
    if callable(value):
        return value
    return load_callable(str(value), "similarity function")


@lru_cache(maxsize=4)
def _embedding_cached(model: str) -> Similarity:
    return embedding_similarity(model)
