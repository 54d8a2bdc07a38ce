"""A job's answer as evidence to take away: JSON, GeoJSON, KML, CSV and a one-page HTML report.

Each carries the same provenance record (`provenance`): the upload's original name, the
SHA-256 of its bytes, its full EXIF, geosleuth's version, the settings the job ran with and the
UTC time of every step, so an analyst can show which file gave which answer, how and when.
No export names a folder of the server: paths the record holds are made relative to the job
(`Job.public_text`) and the image is named as it was uploaded. The uncertainty circle is a
polygon (GeoJSON, KML) so GIS tools draw the area the answer claims, not only its centre.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import geosleuth
from geosleuth.core.geo import destination
from geosleuth.core.records import Trajectory
from geosleuth.secrets import redact_text
from geosleuth.webapp.jobs import PREVIEW_FILE, Job, utc_iso
from geosleuth.webapp.views import answer_geojson

CIRCLE_VERTICES = 64
KML_NS = "http://www.opengis.net/kml/2.2"
MEDIA = {
    "json": "application/json",
    "geojson": "application/geo+json",
    "kml": "application/vnd.google-earth.kml+xml",
    "csv": "text/csv; charset=utf-8",
    "html": "text/html; charset=utf-8",
}
CSV_COLUMNS = (
    "role",
    "label",
    "lat",
    "lon",
    "radius_km",
    "score",
    "confidence",
    "country_code",
    "city",
    "evidence",
    "image_name",
    "image_sha256",
    "job_id",
    "model",
    "geosleuth_version",
    "finished_at_utc",
)


def provenance(job: Job, case: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where the answer came from: the file, the software, the settings and the time of each step."""
    events = job.events
    started = next((e["at"] for e in events if e["type"] == "status" and e.get("status") == "running"), None)
    ended = next((e["at"] for e in reversed(events) if e["type"] in ("result", "error", "cancelled")), None)
    record = {
        "image": {
            "original_name": job.image_name,
            "sha256": job.sha256,
            "size_bytes": job.size_bytes,
            "exif": job.exif,
        },
        "geosleuth_version": geosleuth.__version__,
        "job_id": job.id,
        "rerun_of": job.source_job,
        "settings": job.settings,
        "status": job.status,
        "created_at_utc": utc_iso(job.created_at),
        "started_at_utc": started,
        "finished_at_utc": ended,
        "steps": step_times(events),
    }
    if case is not None:
        record["case"] = {k: case[k] for k in ("id", "name", "tags", "notes")}
    return record


def step_times(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step (a tool call, or an offline pipeline step) with the UTC time it was first seen done."""
    seen: set[tuple[Any, ...]] = set()
    steps: list[dict[str, Any]] = []
    for event in events:
        if event["type"] != "turn":
            continue
        turn = event["turn"]
        key = (event.get("sample", 0), turn["index"])
        if key not in seen and event.get("mode") == "model":
            seen.add(key)
            steps.append(
                {"sample": key[0] + 1, "step": f"turn {turn['index'] + 1}", "finished_at_utc": event["at"]}
            )
        for i, call in enumerate(turn.get("tool_calls") or []):
            if (*key, i) in seen:
                continue
            seen.add((*key, i))
            steps.append(
                {
                    "sample": key[0] + 1,
                    "step": call["name"],
                    "ok": call["ok"],
                    "latency_s": call.get("latency_s"),
                    "finished_at_utc": event["at"],
                }
            )
    return steps


def circle_ring(
    lat: float, lon: float, radius_km: float, vertices: int = CIRCLE_VERTICES
) -> list[list[float]]:
    """The circle as a closed [lon, lat] ring, counter-clockwise (RFC 7946's exterior ring order)."""
    ring = []
    for i in range(vertices):
        plat, plon = destination(lat, lon, 360.0 - i * 360.0 / vertices, radius_km)
        ring.append([round(plon, 6), round(plat, 6)])
    return [*ring, ring[0]]


def _public(job: Job, body: Any) -> Any:
    """``body`` (JSON data) with this server's paths taken out and credentials redacted."""
    text = json.dumps(body, ensure_ascii=False)
    for image in (job.dir / job.image_file, (job.dir / job.image_file).resolve()):
        text = text.replace(json.dumps(str(image))[1:-1], json.dumps(job.image_name)[1:-1])
    return json.loads(redact_text(job.public_text(text)))


def record_json(job: Job, case: dict[str, Any] | None) -> dict[str, Any]:
    """The trajectory record with its provenance."""
    assert job.trajectory is not None
    return _public(job, job.trajectory.model_dump(mode="json") | {"provenance": provenance(job, case)})


def geojson(job: Job, case: dict[str, Any] | None) -> dict[str, Any]:
    """`answer_geojson` plus the uncertainty circle as a polygon and the provenance."""
    assert job.trajectory is not None
    body = answer_geojson(job.trajectory)
    pred = job.trajectory.prediction
    if pred is not None and pred.lat is not None and pred.lon is not None and pred.radius_km:
        body["features"].append(
            {
                "type": "Feature",
                "geometry": {
                    "type": "Polygon",
                    "coordinates": [circle_ring(pred.lat, pred.lon, pred.radius_km)],
                },
                "properties": {"role": "uncertainty", "radius_km": pred.radius_km},
            }
        )
    body["properties"]["provenance"] = provenance(job, case)
    return _public(job, body)


def _rows(job: Job, case: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per point of the answer (answer, samples, candidates) with the provenance columns."""
    geo = geojson(job, case)
    prov = geo["properties"]["provenance"]
    evidence = (
        "; ".join(job.trajectory.prediction.evidence) if job.trajectory and job.trajectory.prediction else ""
    )
    rows = []
    for feature in geo["features"]:
        if feature["geometry"]["type"] != "Point":
            continue
        props = feature["properties"]
        lon, lat = feature["geometry"]["coordinates"]
        rows.append(
            {
                "role": props["role"],
                "label": props.get("label")
                or ", ".join(str(props[k]) for k in ("city", "country") if props.get(k)),
                "lat": lat,
                "lon": lon,
                "radius_km": props.get("radius_km"),
                "score": props.get("score"),
                "confidence": props.get("confidence"),
                "country_code": props.get("country_code"),
                "city": props.get("city"),
                "evidence": evidence if props["role"] == "answer" else props.get("verdict"),
                "image_name": prov["image"]["original_name"],
                "image_sha256": prov["image"]["sha256"],
                "job_id": prov["job_id"],
                "model": prov["settings"].get("model"),
                "geosleuth_version": prov["geosleuth_version"],
                "finished_at_utc": prov["finished_at_utc"],
            }
        )
    return rows


def _cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string that would start a formula gets a quote."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value


def csv_text(job: Job, case: dict[str, Any] | None) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    for row in _rows(job, case):
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buffer.getvalue()


def kml_text(job: Job, case: dict[str, Any] | None) -> str:
    """KML 2.2: the answer, samples and candidates as placemarks, the circle as a polygon, the
    provenance as the document's ExtendedData."""
    geo = geojson(job, case)
    prov = geo["properties"]["provenance"]
    ET.register_namespace("", KML_NS)

    def sub(parent: ET.Element, tag: str, text: str | None = None) -> ET.Element:
        node = ET.SubElement(parent, f"{{{KML_NS}}}{tag}")
        if text is not None:
            node.text = text
        return node

    root = ET.Element(f"{{{KML_NS}}}kml")
    doc = sub(root, "Document")
    sub(doc, "name", f"geosleuth: {prov['image']['original_name']}")
    sub(doc, "description", f"SHA-256 {prov['image']['sha256']}; geosleuth {prov['geosleuth_version']}")
    data = sub(doc, "ExtendedData")
    flat = {
        "image_name": prov["image"]["original_name"],
        "image_sha256": prov["image"]["sha256"],
        "image_size_bytes": str(prov["image"]["size_bytes"]),
        "geosleuth_version": prov["geosleuth_version"],
        "job_id": prov["job_id"],
        "settings": json.dumps(prov["settings"], ensure_ascii=False),
        "created_at_utc": prov["created_at_utc"],
        "finished_at_utc": prov["finished_at_utc"] or "",
        "exif": json.dumps(prov["image"]["exif"], ensure_ascii=False),
        "steps": json.dumps(prov["steps"], ensure_ascii=False),
    }
    for key, value in flat.items():
        node = sub(data, "Data")
        node.set("name", key)
        sub(node, "value", value)
    for feature in geo["features"]:
        props, geom = feature["properties"], feature["geometry"]
        mark = sub(doc, "Placemark")
        label = props.get("label") or ", ".join(str(props[k]) for k in ("city", "country") if props.get(k))
        sub(mark, "name", f"{props['role']}: {label}" if label else props["role"])
        details = {k: v for k, v in props.items() if v is not None and k != "role"}
        sub(mark, "description", json.dumps(details, ensure_ascii=False))
        if geom["type"] == "Point":
            sub(sub(mark, "Point"), "coordinates", "{},{}".format(*geom["coordinates"]))
        else:
            ring = sub(sub(sub(mark, "Polygon"), "outerBoundaryIs"), "LinearRing")
            sub(ring, "coordinates", " ".join(f"{x},{y}" for x, y in geom["coordinates"][0]))
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


REPORT_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:60rem;color:#1d2430;padding:0 1rem}
h1{font-size:1.4rem;overflow-wrap:anywhere}
h2{font-size:1.1rem;margin-top:1.4rem;border-bottom:1px solid #dde1e7}
table{border-collapse:collapse;width:100%;font-size:.88rem;table-layout:fixed}
td,th{border:1px solid #dde1e7;padding:.25rem .5rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f4f5f7}table.kv th{width:30%}.mono{font-family:ui-monospace,monospace;font-size:.85rem}
.imgs{display:flex;gap:1rem;flex-wrap:wrap}.imgs img{max-width:100%;max-height:22rem;border:1px solid #dde1e7}
.conflict{color:#9a6700}pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.8rem}
@media print{body{margin:0;max-width:none}h2{break-after:avoid}table,img{break-inside:avoid}}
"""


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


_STYLE = _csp_hash(REPORT_CSS)
REPORT_CSP = f"default-src 'none'; img-src data:; style-src {_STYLE}; base-uri 'none'; form-action 'none'"
"""The job report's policy, as the run report's: its one inline stylesheet by hash, data: images,
no script, no requests. A <meta> in the page, so it holds when opened from disk."""


def _data_uri(path: Path, media: str) -> str | None:
    return f"data:{media};base64,{base64.b64encode(path.read_bytes()).decode()}" if path.is_file() else None


def _table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<tr><th>{html.escape(k)}</th><td class=mono>{html.escape('' if v is None else str(v))}</td></tr>"
        for k, v in rows
    )
    return f"<table class=kv>{cells}</table>"


def html_report(job: Job, case: dict[str, Any] | None) -> str:
    """One printable, offline page for the case record: image, answer, map, candidates, evidence,
    conflicts, provenance, EXIF and the timed steps; nothing is fetched, nothing runs."""
    trajectory: Trajectory = job.trajectory  # type: ignore[assignment]
    record = record_json(job, case)
    prov, pred = record["provenance"], record.get("prediction") or {}
    place = (
        ", ".join(str(pred[k]) for k in ("street", "city", "admin1", "country") if pred.get(k))
        or "not located"
    )
    images = [
        f'<figure><img src="{uri}" alt="{alt}"><figcaption>{alt}</figcaption></figure>'
        for uri, alt in (
            (_data_uri(job.dir / PREVIEW_FILE, "image/jpeg"), "the uploaded image"),
            (
                _data_uri(job.dir / job.map_file, "image/png") if job.map_file else None,
                "offline map around the answer",
            ),
        )
        if uri
    ]
    answer = _table(
        [
            ("place", place),
            (
                "coordinates (WGS-84)",
                f"{pred['lat']:.6f}, {pred['lon']:.6f}" if pred.get("lat") is not None else None,
            ),
            ("uncertainty radius", f"± {pred['radius_km']:g} km" if pred.get("radius_km") else None),
            ("confidence", pred.get("confidence")),
            ("coordinates from", pred.get("coords_source")),
            ("street-level geocode", _street_line(record.get("metadata", {}).get("street_geocode"))),
            ("status", trajectory.status.value),
            ("error", record.get("error")),
        ]
    )
    candidates = record.get("metadata", {}).get("candidates") or []
    cand_rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(c.get(k, '')))}</td>"
            for k in ("label", "score", "lat", "lon", "radius_km", "verdict")
        )
        + "</tr>"
        for c in candidates
    )
    cand_html = (
        "<table><tr><th>candidate</th><th>score</th><th>lat</th><th>lon</th><th>radius km</th>"
        "<th>evidence</th></tr>" + cand_rows + "</table>"
        if candidates
        else "<p>No ranked candidates were recorded.</p>"
    )
    evidence = (
        "".join(f"<li>{html.escape(e)}</li>" for e in pred.get("evidence") or []) or "<li>none recorded</li>"
    )
    conflicts = record.get("metadata", {}).get("conflicts") or []
    conflict_html = "".join(f"<li class=conflict>{html.escape(str(c))}</li>" for c in conflicts)
    steps = _table(
        [
            (
                s["step"],
                f"{s['finished_at_utc']}"
                + (f" ({s['latency_s']:.2f} s)" if s.get("latency_s") is not None else ""),
            )
            for s in prov["steps"]
        ]
    )
    provenance_table = _table(
        [
            ("original file name", prov["image"]["original_name"]),
            ("SHA-256 of the uploaded bytes", prov["image"]["sha256"]),
            ("size", f"{prov['image']['size_bytes']} bytes"),
            ("geosleuth version", prov["geosleuth_version"]),
            ("job", prov["job_id"]),
            ("re-run of job", prov["rerun_of"]),
            ("settings", json.dumps(prov["settings"], ensure_ascii=False)),
            ("created (UTC)", prov["created_at_utc"]),
            ("started (UTC)", prov["started_at_utc"]),
            ("finished (UTC)", prov["finished_at_utc"]),
        ]
        + (
            [("case", f"{case['name']} ({', '.join(case['tags'])})"), ("case notes", case["notes"])]
            if case
            else []
        )
    )
    exif = (
        f"<pre>{html.escape(json.dumps(prov['image']['exif'], ensure_ascii=False, indent=1))}</pre>"
        if prov["image"]["exif"]
        else "<p>The file has no EXIF.</p>"
    )
    title = html.escape(f"geosleuth report: {prov['image']['original_name']}")
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{REPORT_CSP}">'
        f'<meta name=viewport content="width=device-width, initial-scale=1"><title>{title}</title>'
        f"<style>{REPORT_CSS}</style></head><body><h1>{title}</h1>"
        f"<div class=imgs>{''.join(images)}</div><h2>Answer</h2>{answer}"
        f"<h2>Evidence</h2><ul>{evidence}</ul>"
        + (f"<h2>Conflicting clues</h2><ul>{conflict_html}</ul>" if conflicts else "")
        + f"<h2>Ranked candidates</h2>{cand_html}<h2>Provenance</h2>{provenance_table}"
        f"<h2>Steps (UTC)</h2>{steps}<h2>EXIF of the uploaded file</h2>{exif}"
        "</body></html>"
    )


def _street_line(street: dict[str, Any] | None) -> str | None:
    """Which provider geocoded which address, and whether the answer uses it."""
    if not street:
        return None
    used = "used" if street.get("used") else "not used: it disagreed with the place the sign names"
    return f"{street.get('address')} by {street.get('provider')} ({used})"


def download_name(job: Job, fmt: str) -> str:
    """``<image stem>-<job id>.<fmt>``: the image's name, made safe for every file system."""
    stem = Path(job.image_name).stem
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem).strip("._")[:80] or "image"
    return f"{safe}-{job.id}.{fmt}"


def export(job: Job, fmt: str, case: dict[str, Any] | None) -> str:
    """The job's answer in ``fmt`` (one of `MEDIA`) as text."""
    if fmt == "json":
        return json.dumps(record_json(job, case), ensure_ascii=False, indent=1)
    if fmt == "geojson":
        return json.dumps(geojson(job, case), ensure_ascii=False, indent=1)
    if fmt == "kml":
        return kml_text(job, case)
    if fmt == "csv":
        return csv_text(job, case)
    return html_report(job, case)
