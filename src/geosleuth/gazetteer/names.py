"""The gazetteer's name search: a name or an address to places, prefixes, and place names in free text.

A part of `Gazetteer` (gazetteer/index.py), over the ``names`` table of ``places.sqlite``;
`gazetteer.address` splits and normalises the queries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.countries import country_family, resolve_country
from geosleuth.core.geo import haversine_km
from geosleuth.core.records import Place
from geosleuth.core.text import normalize, script_of
from geosleuth.gazetteer.address import (
    MAX_PARTS,
    Qualified,
    cjk_substrings,
    cyrillic_stem,
    designator_free,
    name_variants,
    segment,
    split_qualified,
    whole_keys,
)

_NO_SPACE_SCRIPTS = {"Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar"}

_TOKEN = re.compile(r"\S+")

CITY_BONUS = 0.5
"""A bare name leans to a town (photos are taken in places), by about a threefold population;
within one country `_settlement_first` settles town against province, so this only weighs a
town against a namesake region abroad: "Bali" is the Indonesian province, not Bāli, India."""

SETTLEMENT_SHARE = 0.01
"""A town outranks its same-named province only with at least this share of its people."""

SETTLEMENT_NEAR_KM = 150.0
"""A town outside its namesake province outranks it only this close to the province's centre (a
capital district beside its province: Buenos Aires); farther it is a namesake elsewhere
("Wyoming", Michigan for the state; "Delaware", Ohio)."""

MAX_CANDIDATES = 40
"""Candidates kept per address component (the most populous): "San José" has hundreds. With
`split_address`'s cap on components this bounds the consistency check of one query."""

QUALIFIED_SCAN = 20_000
"""Names starting with a head word ("weil ...") read when looking for the one its qualifier
picks ("Weil (Rhein)" -> "weil am rhein"): "san ..." has about 8,000, so this bounds the scan."""

TOWN_DENSITY = 100.0
"""People per km² over a town's surroundings, for how far a named town reaches around it."""

_RANK = {"city": 0, "admin1": 1, "country": 2}
"""How coarse a kind of place is: only a coarser component can contradict a candidate."""


@dataclass(frozen=True)
class NameMatch:
    """A place name found in free text (OCR output, captions, reasoning)."""

    text: str
    start: int  # token or character offset in the normalised text
    end: int
    place: Place
    is_primary: bool


def _ids(values: list[str]) -> NDArray[np.int64]:
    """Small integer per distinct value, so equality tests between candidates vectorise."""
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(v, len(seen)) for v in values], dtype=np.int64)


class NameSearch:
    """Forward geocoding: `search`, `suggest` and `match_names`."""

    def prepare_search(self) -> None:
        """Build what `search` loads on first use (country names, territory families, the name
        index's pages), so that later searches take under a millisecond and may run inline."""
        resolve_country("Germany")
        country_family("CN")
        self.search("Springfield, Illinois, United States")

    def _lookup(self, keys: list[str]) -> list[tuple[str, int, int]]:
        if not keys:
            return []
        marks = ",".join("?" * len(keys))
        return self._db.execute(
            f"SELECT key, idx, is_primary FROM names WHERE key IN ({marks})", keys
        ).fetchall()

    def search(self, query: str, country: str | None = None, limit: int = 10) -> list[Place]:
        """Places matching a name or an address, best first.

        An address ("Schöneberger Straße, 22149 Hamburg, Germany", "China; Hong Kong; Kowloon",
        "Springfield, Illinois") resolves to its most specific component that the gazetteer
        knows and that the other components agree with: each component's candidates are scored
        by how many other components contain them (a country, its territories, an admin-1
        region, a larger town around them) and how many contradict them; streets, postcodes and
        unknown names are skipped. ``country`` (anything `resolve_country` reads) filters.
        A name with a parenthesis or slash that is a place name as written ("Frankfurt (Oder)",
        "Neustadt (Hessen)") or that picks one of the head word's names ("Weil (Rhein)": Weil am
        Rhein) is one component (see `_qualified_parts`).
        """
        country_code = resolve_country(country) if country else None
        family = country_family(country_code) if country_code else None  # China covers Hong Kong
        parts = self._segment(self._qualified_parts(split_qualified(query), family))
        if not parts:
            return []
        rows: dict[int, tuple[Any, ...]] = {}
        groups = self._part_candidates(parts, family, rows)
        if not any(groups):
            return []
        ranked = self._rank_components(groups, rows)
        ranked.sort(key=lambda r: r[0])
        seen: set[int] = set()
        out: list[Place] = []
        for _, score, idx in ranked:
            if idx not in seen:
                seen.add(idx)
                out.append(self._row_to_place(rows[idx][1:], round(score, 4)))
            if len(out) == limit:
                break
        return out

    def _qualified_parts(self, stretches: list[Qualified], family: frozenset[str] | None) -> list[str]:
        """The query's components, a qualified name as one where the gazetteer knows it.

        A stretch written with a parenthesis or slash is first read whole, as GeoNames spells
        such towns (its name, ASCII and alternate names: "Frankfurt (Oder)", "Halle/Saale",
        "Mülheim (Ruhr)"); then as the head word's name that carries the qualifier's words after
        it ("Freiburg (Breisgau)": Freiburg im Breisgau); only then as separate components, where a
        country or region in the parenthesis ("France (Réunion)", "Córdoba (Argentina)") still
        decides by containment. A match must lie in ``family`` when one is given. Before all
        that, an address of several stretches that is a name as a whole ("Georgetown, IL") is one.
        """
        whole = whole_keys(stretches)
        wanted = sorted({k for s in stretches for k in s.keys} | set(whole))
        known = {r[0] for r in self._lookup_rows(wanted) if family is None or r[7] in family}
        if whole and whole[0] in known:
            return [whole[0]]
        out: list[str] = []
        for stretch in stretches:
            key = next((k for k in stretch.keys if k in known), None)
            if key is None and stretch.keys:
                key = self._qualifier_pick(stretch, family)
            out.extend([key] if key else stretch.parts)
        return out[:MAX_PARTS]

    def _qualifier_pick(self, stretch: Qualified, family: frozenset[str] | None) -> str | None:
        """The name key that starts with the head word and has every qualifier word after it
        ("weil am rhein" for "Weil (Rhein)"), of the most populous such place (own names first);
        None when no name does. Reads at most `QUALIFIED_SCAN` names."""
        head, words = normalize(stretch.head), stretch.qualifier_words
        if not head or not words:
            return None
        tests = " AND ".join(["instr(' ' || substr(key, ?) || ' ', ?) > 0"] * len(words))
        args: list[Any] = [head + " ", head + " \U0010ffff"]
        for word in words:
            args += [len(head) + 2, f" {word} "]
        rows = self._db.execute(
            "SELECT s.key, s.is_primary, p.population, p.cc FROM "
            "(SELECT key, idx, is_primary FROM names WHERE key > ? AND key < ? "
            f"LIMIT {QUALIFIED_SCAN}) s JOIN places p ON p.idx = s.idx WHERE {tests}",
            args,
        ).fetchall()
        best = max(
            (r for r in rows if family is None or r[3] in family),
            key=lambda r: (r[1], r[2] or 0, r[0]),
            default=None,
        )
        return best[0] if best else None

    def _segment(self, parts: list[str]) -> list[str]:
        """Chinese/Japanese components that are no name as a whole ("東京都渋谷区", "北京市朝阳区建国路")
        become the place names they are made of, in their order; at most `MAX_PARTS` in all."""
        wanted = {p: normalize(p) for p in parts}
        grams = {w: cjk_substrings(k) for w, k in wanted.items() if " " not in k and len(k) > 2}
        grams = {w: g for w, g in grams.items() if g}
        if not grams:
            return parts
        keys = sorted({g for gs in grams.values() for g in gs} | {wanted[w] for w in grams})
        known = {k for (k,) in self._db.execute(
            f"SELECT DISTINCT key FROM names WHERE key IN ({','.join('?' * len(keys))})", keys
        )}  # fmt: skip
        out: list[str] = []
        for part in parts:
            key = wanted[part]
            out.extend((segment(key, known) or [part]) if part in grams and key not in known else [part])
        return out[:MAX_PARTS]

    def _part_candidates(
        self, parts: list[str], family: frozenset[str] | None, rows: dict[int, tuple[Any, ...]]
    ) -> list[dict[int, bool]]:
        """For each address component, matching places (index -> is a primary name), capped;
        their stored rows are collected into ``rows``.

        Exact name keys first; then spelling variants ("St. Robert", "Brick Township"); then the
        key without region designators ("Moscow Oblast", "山东省") or, for a Cyrillic adjective
        ("Токийская обл."), its stem, both only among admin-1 regions; then a country name
        `resolve_country` reads in looser forms.
        """
        keys = [normalize(p) for p in parts]
        found: list[dict[int, bool]] = [{} for _ in parts]
        for key, is_primary, *row in self._lookup_rows(sorted({k for k in keys if k})):
            idx = row[0]
            if family is not None and row[5] not in family:
                continue
            rows[idx] = tuple(row)
            for i, k in enumerate(keys):
                if k == key:
                    found[i][idx] = found[i].get(idx, False) or bool(is_primary)
        for i, key in enumerate(keys):
            if found[i] or not key:
                continue
            fallback = [tuple(r[2:]) for r in self._lookup_rows(name_variants(key))]
            fallback = fallback or self._region_fallback(key)
            if not fallback and family is None:
                code = resolve_country(parts[i])
                fallback = self._rows_where("id = ?", (f"country:{code}",)) if code else []
            for row in fallback:
                if family is None or row[5] in family:
                    rows[row[0]] = row
                    found[i][row[0]] = row[8] == "country"
        for i, group in enumerate(found):
            if len(group) > MAX_CANDIDATES:
                best = sorted(group, key=lambda idx: -int(self.population[idx]))[:MAX_CANDIDATES]
                found[i] = {idx: group[idx] for idx in best}
        return found

    def _region_fallback(self, key: str) -> list[tuple[Any, ...]]:
        """Admin-1 regions named by ``key`` without its designator, or by its Cyrillic stem."""
        bare = designator_free(key)
        found = [tuple(r[2:]) for r in self._lookup_rows([bare])] if bare else []
        stem = cyrillic_stem(bare or key)
        if not found and stem:
            found = self._rows_where("idx IN (SELECT idx FROM stems WHERE key = ?)", (stem,))
        return [r for r in found if r[8] == "admin1"]

    def _lookup_rows(self, keys: list[str]) -> list[tuple[Any, ...]]:
        """(key, is_primary, idx, id, name, lat, lon, cc, admin1, population, kind) per name match."""
        if not keys:
            return []
        return self._db.execute(
            "SELECT n.key, n.is_primary, p.idx, p.id, p.name, p.lat, p.lon, p.cc, p.admin1, p.population, "
            "p.kind FROM names n JOIN places p ON p.idx = n.idx "
            f"WHERE n.key IN ({','.join('?' * len(keys))})",
            keys,
        ).fetchall()

    def _rows_where(self, where: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        sql = f"SELECT idx, id, name, lat, lon, cc, admin1, population, kind FROM places WHERE {where}"
        return [tuple(r) for r in self._db.execute(sql, args).fetchall()]

    def _rank_part(self, group: dict[int, bool], rows: dict[int, tuple[Any, ...]]) -> list[tuple[float, int]]:
        """One component's candidates by name quality and population, towns before namesake regions."""
        scored = []
        for idx, is_primary in group.items():
            score = np.log10(float(self.population[idx]) + 10.0) + (1.0 if is_primary else 0.0)
            score += CITY_BONUS if self.kind[idx] == "city" else 0.0
            scored.append((float(score), idx))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return self._settlement_first(scored, rows)

    def _part_priority(self, groups: list[dict[int, bool]]) -> list[int]:
        """Rank of each component by how fine it is likely to be, from the written order.

        An address that starts with a country ("China; Hong Kong; Kowloon") runs coarse to
        fine, so later components rank first; otherwise (the Western order) earlier ones do.
        """
        known = [i for i, g in enumerate(groups) if g]
        first = known[0]
        coarse_first = len(known) > 1 and any(self.kind[idx] == "country" for idx in groups[first])
        coarse_first = coarse_first and not any(self.kind[idx] == "country" for idx in groups[known[-1]])
        n = len(groups)
        return [n - i if coarse_first else i for i in range(n)]

    def _rank_components(
        self, groups: list[dict[int, bool]], rows: dict[int, tuple[Any, ...]]
    ) -> list[tuple[tuple[int, int, int, int, int], float, int]]:
        """Every component's candidates with their sort key (contradicted by a country, -support,
        component priority, conflicts, rank within the component), and their score.

        Support decides first, then specificity: "Lyon, Île-de-France, France" is Lyon (both are
        in France; a model's contradictory region must not earn it the region's position), while
        "Springfield, Illinois" and "Paris, Texas" pick the namesake the coarser part contains.

        A candidate is supported by a component that contains it (or names it again) and
        contradicted by a coarser component that does not contain it ("Paris, Texas" for Paris,
        France). A same-level component that does not contain it is no contradiction: a ward
        whose namesakes lie elsewhere ("大阪市中央区") must not hand the answer to the province.
        """
        priority = self._part_priority(groups)
        lists = [list(g) for g in groups]
        only_countries = [all(self.kind[q] == "country" for q in g) for g in lists]
        coarsest = [max((_RANK[self.kind[q]] for q in g), default=-1) for g in lists]
        matrix: tuple[dict[int, int], NDArray[np.bool_]] | None = None
        ranked = []
        for i, mine in enumerate(lists):
            support = dict.fromkeys(mine, 0)
            conflicts = dict.fromkeys(mine, 0)
            abroad = dict.fromkeys(mine, 0)  # contradicted by a country component
            for j, theirs in enumerate(lists):
                if j == i or not theirs:
                    continue
                if only_countries[i] or only_countries[j]:
                    inside, around = self._country_relation(mine, theirs, groups[j])
                else:
                    if matrix is None:
                        everyone = sorted({q for g in lists for q in g})
                        at = {q: k for k, q in enumerate(everyone)}
                        admin1 = [rows[q][6] or "" for q in everyone]
                        matrix = at, self._containment(np.array(everyone, dtype=np.int64), admin1)
                    at, contains = matrix
                    a, b = [at[p] for p in mine], [at[q] for q in theirs]
                    inside = (contains[np.ix_(b, a)].any(axis=0) | [p in groups[j] for p in mine]).tolist()
                    around = contains[np.ix_(a, b)].any(axis=1).tolist()
                for p, is_in, is_around in zip(mine, inside, around, strict=True):
                    if is_in:
                        support[p] += 1
                    elif not is_around and coarsest[j] > _RANK[self.kind[p]]:
                        conflicts[p] += 1
                        abroad[p] += int(only_countries[j])
            for pos, (score, idx) in enumerate(self._rank_part(groups[i], rows)):
                key = (abroad[idx], -support[idx], priority[i], conflicts[idx], pos)
                ranked.append((key, score, idx))
        return ranked

    def _country_relation(
        self, mine: list[int], theirs: list[int], theirs_set: dict[int, bool]
    ) -> tuple[list[bool], list[bool]]:
        """(inside, around) of each candidate against a component, when one of the two holds
        countries only: containment is then a matter of country families, no geometry."""
        covered = {c for q in theirs if self.kind[q] == "country" for c in country_family(self.cc[q])}
        inside = [p in theirs_set or self.cc[p] in covered for p in mine]
        around = [
            self.kind[p] == "country"
            and any(q != p and self.cc[q] in country_family(self.cc[p]) for q in theirs)
            for p in mine
        ]
        return inside, around

    def _containment(self, idx: NDArray[np.int64], admin1: list[str]) -> NDArray[np.bool_]:
        """``C[a, b]``: place ``idx[a]`` contains place ``idx[b]`` — a country (with its territories)
        any place of its family, an admin-1 region its towns, a town a smaller town within its
        reach (the radius of a disc at `TOWN_DENSITY`, 15–60 km: "Creve Coeur (St. Louis)")."""
        n = idx.size
        kind, cc, pop = self.kind[idx], self.cc[idx], self.population[idx].astype(np.float64)
        cc_id, a1_id = _ids(cc.tolist()), _ids([normalize(a) for a in admin1])
        town, region = kind == "city", kind == "admin1"
        same = cc_id[:, None] == cc_id[None, :]
        out = np.zeros((n, n), dtype=bool)
        for a in np.flatnonzero(kind == "country"):
            family = country_family(cc[a])
            out[a] = [c in family for c in cc]
        named = np.array([bool(a) for a in admin1])
        out |= (region & named)[:, None] & town[None, :] & same & (a1_id[:, None] == a1_id[None, :])
        pairs = town[:, None] & town[None, :] & same & (pop[:, None] > pop[None, :])
        if pairs.any():
            a, b = np.nonzero(pairs)
            reach = np.clip(np.sqrt(pop[a] / (np.pi * TOWN_DENSITY)), 15.0, 60.0)
            lat, lon = self.lat[idx], self.lon[idx]
            out[a, b] = haversine_km(lat[a], lon[a], lat[b], lon[b]) <= reach
        np.fill_diagonal(out, False)
        return out

    def _settlement_first(
        self, scored: list[tuple[float, int]], rows: dict[int, tuple[Any, ...]]
    ) -> list[tuple[float, int]]:
        """A town outranks its same-named province ("São Paulo", "New York"): photos are taken in places.

        Every candidate already carries the queried name, so the best city of the province's
        country that lies in the province (or within `SETTLEMENT_NEAR_KM` of its centre) is the
        one to promote, provided it is the province's namesake city and not a village that shares
        (or merely has an alternate spelling of) the name: "Illinois" or "Florida" mean the state,
        not a town of 3,000, and "Wyoming" not Wyoming, Michigan.
        """
        if not scored or self.kind[scored[0][1]] != "admin1":
            return scored
        province = scored[0][1]
        country, region = self.cc[province], normalize(rows[province][6] or "")
        min_population = SETTLEMENT_SHARE * int(self.population[province])
        for pos, (_, idx) in enumerate(scored):
            if self.kind[idx] != "city" or self.cc[idx] != country:
                continue
            inside = normalize(rows[idx][6] or "") == region
            near = haversine_km(self.lat[idx], self.lon[idx], self.lat[province], self.lon[province])
            if not inside and float(near) > SETTLEMENT_NEAR_KM:
                continue
            if self.population[idx] < min_population:
                return scored
            return [scored[pos]] + scored[:pos] + scored[pos + 1 :]
        return scored

    def suggest(self, prefix: str, country: str | None = None, limit: int = 10) -> list[Place]:
        """Autocomplete: own names before alternate names, towns before regions, then by population.

        Within each group the most populous come first ("Luz" -> Luzern before a large city
        that merely has an alternate spelling starting with those letters).
        """
        key = normalize(prefix)
        if not key:
            return []
        rows = self._db.execute(
            "SELECT idx, max(is_primary) FROM names WHERE key >= ? AND key < ? GROUP BY idx LIMIT 5000",
            (key, key + "\U0010ffff"),
        ).fetchall()
        code = resolve_country(country) if country else None
        ranked = sorted(
            ((idx, primary) for idx, primary in rows if code is None or self.cc[idx] == code),
            key=lambda r: (-r[1], self.kind[r[0]] != "city", -int(self.population[r[0]])),
        )
        idxs = [idx for idx, _ in ranked[:limit]]
        places = self._places(idxs)
        return [places[i] for i in idxs]

    def match_names(self, text: str, min_population: int = 0, max_ngram: int = 4) -> list[NameMatch]:
        """Place names in ``text``: word n-grams, or character n-grams for scripts without spaces."""
        key = normalize(text)
        grams: dict[str, tuple[int, int]] = {}
        tokens = _TOKEN.findall(key)
        for n in range(max_ngram, 0, -1):
            for i in range(len(tokens) - n + 1):
                gram = " ".join(tokens[i : i + n])
                if len(gram) >= 4 or script_of(gram) in _NO_SPACE_SCRIPTS:
                    grams.setdefault(gram, (i, i + n))
        for token in tokens:
            if script_of(token) in _NO_SPACE_SCRIPTS:
                for n in range(min(len(token), 8), 1, -1):
                    for i in range(len(token) - n + 1):
                        grams.setdefault(token[i : i + n], (i, i + n))
        best: dict[str, tuple[int, bool]] = {}
        for gram, idx, is_primary in self._lookup(list(grams)):
            if int(self.population[idx]) < min_population:
                continue
            current = best.get(gram)
            if current is None or self._text_rank(idx, is_primary) > self._text_rank(*current):
                best[gram] = (idx, bool(is_primary))
        places = self._places([i for i, _ in best.values()])
        return [
            NameMatch(text=g, start=grams[g][0], end=grams[g][1], place=places[i], is_primary=p)
            for g, (i, p) in sorted(best.items(), key=lambda kv: grams[kv[0]])
        ]

    def _text_rank(self, idx: int, is_primary: int | bool) -> tuple[bool, int]:
        """A name in text means the most populous place of that name, but a region's other-language
        name ("Luzern" for the canton Lucerne) yields to a town whose own name it is."""
        return (bool(is_primary) or self.kind[idx] != "admin1", int(self.population[idx]))
