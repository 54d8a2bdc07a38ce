"""``geosleuth serve``: a local web app to watch the agent work and browse evaluation runs.

`create_app(ServeSettings(...))` returns a Starlette app with three parts:

- **Locate**: choose one image, several, or a folder (click, keyboard, drag and drop or paste;
  or the bundled example), run the agent (the configured model, or the offline clue pipeline
  without one) and watch each turn, tool call and result stream in (Server-Sent Events;
  offline, each pipeline step as it finishes), with the elapsed time, the place in the queue
  while waiting and a Cancel button; then the answer with a map (the ranked candidates with
  their scores and evidence, each parallel sample's point, a pin to drop and measure from), the
  clues that disagree, and the answer to take away with its provenance (original file name,
  SHA-256, EXIF, version, settings, UTC step times) as JSON, GeoJSON and KML (the uncertainty
  circle as a polygon), CSV, or a one-page printable HTML report.
- **Cases**: every job belongs to a case with a name, notes and tags; a job's image can be
  re-run with other settings (model or offline, prompt style, tools, OCR) and the runs compared
  side by side; deleting a case deletes its files. With ``--workdir W`` cases live in
  ``W/cases.sqlite`` (`casestore`, schema versioned and migrated) and survive a restart or a
  crash (bookmarks of ``#/locate/<id>`` keep working); one server holds a workdir at a time.
- **Runs**: the evaluation run directories given with ``--runs``: headline numbers from
  ``summary.json``, the samples (previous / next between them), each trajectory, and
  ``per_sample.csv``, ``summary.json`` and the HTML report to take away.
- A JSON API behind all three (``POST /api/locate``, ``GET /api/jobs/{id}``,
  ``GET /api/jobs/{id}/events``, ``POST /api/jobs/{id}/cancel``, ``POST /api/jobs/{id}/rerun``,
  ``GET /api/jobs/{id}/answer.json|geojson|kml|csv|html``, ``GET|POST /api/cases``,
  ``GET|PATCH|DELETE /api/cases/{id}``, ``GET /api/runs`` …) for scripts. No answer, page or
  message names a folder of the server.

Everything is served from 127.0.0.1 by default; pages load nothing from elsewhere (a
Content-Security-Policy forbids it) and render model and tool output as text, never as HTML.
"""

from geosleuth.webapp.app import ServeSettings, create_app

__all__ = ["ServeSettings", "create_app"]
