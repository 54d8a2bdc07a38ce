"""Published scoring protocols: which parser, which distance, which thresholds, which levels.

Each protocol is data, so "what does --protocol twm compute" reads off one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from geosleuth.core.geo import EARTH_RADIUS_KM, DistanceMethod
from geosleuth.core.metrics import THRESHOLD_PRESETS
from geosleuth.core.parsing import ParseMode

ALL_THRESHOLDS: tuple[float, ...] = tuple(
    sorted({t for ts in THRESHOLD_PRESETS.values() for t in ts} | {3.0})
)


PIGEON_THRESHOLDS: tuple[float, ...] = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 750.0, 1000.0, 2500.0)
"""The radii PIGEON's ``compute_geoguessr_metrics`` reports (``Under_1_km`` … ``Under_2500_km``)."""


@dataclass(frozen=True)
class ScoringProtocol:
    """How one published paper turns model outputs into numbers."""

    name: str
    description: str
    parse_mode: ParseMode = "robust"
    parse_protocol: str | None = None
    geocode: bool = False  # geocode answers that give a place but no coordinates
    distance: DistanceMethod = "haversine"
    radius_km: float = EARTH_RADIUS_KM
    thresholds: tuple[float, ...] = ALL_THRESHOLDS
    strict_threshold: bool = True  # d < t (True) or d <= t
    median_mean: bool = True
    geoguessr: bool = False
    geoscore: bool = False
    reverse: str | None = None  # "reverse_geocoder" (OSV-5M) | "gazetteer" | "polygon" (PIGEON) | None
    coord_levels: tuple[tuple[str, str], ...] = ()  # (metric name, reverse-geocoder key)
    nested_levels: bool = True  # a level counts only if the coarser ones also match
    truth_levels_from_labels: bool = False  # compare with the dataset's labels, not reverse(truth)
    text_levels: tuple[tuple[str, str], ...] = ()  # (metric name, label level)
    level_rule: Literal["names", "geovista"] = "names"  # parsed names vs GeoVista's whole-term rule
    median: Literal["numpy", "lower"] = "numpy"  # np.median vs the lower middle value for even n
    published_drops: bool = False  # released code drops rows: report as published and every row
    file_scorer: str | None = None  # "module:function" scoring whole files (benchmarks with their own rules)
    answer_parser: str | None = (
        None  # "module:function" text -> Prediction: a released regex instead of parse_answer
    )
    out_of_range: Literal["miss", "zero"] = "miss"  # "zero": a coordinate outside its range becomes 0 (G3)
    unparsed_point: tuple[float, float] | None = (
        None  # where released code puts an answer without coordinates
    )
    geoguessr_round: bool = False  # each row's GeoGuessr points rounded to an integer (PIGEON)


PROTOCOLS: dict[str, ScoringProtocol] = {
    p.name: p
    for p in (
        ScoringProtocol(
            name="twm",
            description="Thinking with Map: first JSON object with lat, lon, city, country; "
            "WGS-84 geodesic; strict <; Acc@0.5/2/10/25/200/750 km",
            parse_mode="strict",
            parse_protocol="twm",
            distance="geodesic",
            thresholds=THRESHOLD_PRESETS["map"],
        ),
        ScoringProtocol(
            name="osv5m",
            description="OpenStreetView-5M: haversine R = 6371 km, GeoGuessr score, country / region / "
            "area / city by reverse geocoding (reverse_geocoder semantics)",
            radius_km=6371.0,
            thresholds=THRESHOLD_PRESETS["classic"],
            geoguessr=True,
            reverse="reverse_geocoder",
            coord_levels=(
                ("acc_country", "country_code"),
                ("acc_region", "admin1"),
                ("acc_area", "admin2"),
                ("acc_city", "city"),
            ),
            nested_levels=False,
            truth_levels_from_labels=True,
        ),
        ScoringProtocol(
            name="spotagent",
            description="SpotAgent: <answer> lines; spherical law of cosines R = 6371 km; "
            "Acc@1/25/200/750/2500 km counted as d <= D",
            parse_mode="strict",
            parse_protocol="spotagent",
            distance="cosines",
            radius_km=6371.0,
            thresholds=THRESHOLD_PRESETS["classic"],
            strict_threshold=False,
        ),
        ScoringProtocol(
            name="geovista",
            description="GeoVista: country / state / city credited when the truth occurs as a whole "
            "term in the final turn; answers geocoded, haversine, < 3 km share and lower median km; "
            "as published (rows the released code drops left out) and over every row (all_*)",
            geocode=True,
            thresholds=(3.0,),
            median_mean=False,
            text_levels=(("acc_country", "country"), ("acc_state", "admin1"), ("acc_city", "city")),
            level_rule="geovista",
            median="lower",
            published_drops=True,
        ),
        ScoringProtocol(
            name="wherebench",
            description="WhereBench as released: WhereCountry accuracy over parsed answers and every row; "
            "WhereStreet path score per split, Acc@1-200 km as 0 < d <= k (haversine R = 6371 km), "
            "thinking score Σ w·s, Overall (Eq. 2); needs --truth",
            radius_km=6371.0,
            thresholds=THRESHOLD_PRESETS["street"],
            strict_threshold=False,
            file_scorer="geosleuth.eval.wherebench.files:score_wherebench_file",
        ),
        ScoringProtocol(
            name="geoclip",
            description="GeoCLIP (geoclip/train/eval.py): coordinates as given (robust parsing, no "
            "geocoding); geopy WGS-84 geodesic; Acc@1/25/200/750/2500 km counted as d <= k; mean km",
            distance="geodesic",
            thresholds=THRESHOLD_PRESETS["classic"],
            strict_threshold=False,
        ),
        ScoringProtocol(
            name="g3",
            description="G3 (IndexSearch.py; GeoRanker's evaluate.py counts the same way): first two decimal "
            "numbers are lat, lon; out-of-range coordinates and unparseable answers set to 0 as released; "
            "geopy WGS-84 geodesic; Acc@1/25/200/750/2500 km counted as d < k",
            parse_mode="strict",
            answer_parser="geosleuth.scoring.peers:g3_answer",
            distance="geodesic",
            thresholds=THRESHOLD_PRESETS["classic"],
            out_of_range="zero",
            unparsed_point=(0.0, 0.0),
        ),
        ScoringProtocol(
            name="pigeon",
            description="PIGEON (evaluation/metrics.py): haversine R = 6378.137 km; d < k at "
            "1/5/10/25/50/100/200/750/1000/2500 km; GeoGuessr points rounded per row; country correct "
            "when the truth's country polygon contains the prediction",
            radius_km=6378.137,
            thresholds=PIGEON_THRESHOLDS,
            geoguessr=True,
            geoguessr_round=True,
            reverse="polygon",
            coord_levels=(("acc_country", "country_code"),),
        ),
        ScoringProtocol(
            name="geoestimation",
            description="GeoEstimation (Müller-Budack et al. 2018; classification/utils_global.py): "
            "coordinates as given, haversine R = 6371 km; Acc@1/25/200/750/2500 km counted as d <= k; "
            "mean km (its 'mean deviation')",
            radius_km=6371.0,
            thresholds=THRESHOLD_PRESETS["classic"],
            strict_threshold=False,
        ),
        ScoringProtocol(
            name="default",
            description="robust parsing with geocoding; every threshold preset, GeoGuessr and GeoScore, "
            "levels from reverse-geocoded coordinates and from answer text",
            geocode=True,
            geoguessr=True,
            geoscore=True,
            reverse="gazetteer",
            coord_levels=(("acc_country", "country_code"), ("acc_admin1", "admin1"), ("acc_city", "city")),
            text_levels=(
                ("text_acc_country", "country"),
                ("text_acc_admin1", "admin1"),
                ("text_acc_city", "city"),
            ),
        ),
    )
}


def get_protocol(name: str) -> ScoringProtocol:
    """Look a protocol up by name with a message that lists the valid ones."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; choose one of {', '.join(PROTOCOLS)}") from None
