"""``geosleuth serve``: a local web app to watch the agent work and browse evaluation runs.

`create_app(ServeSettings(...))` returns a Starlette app with three parts:

- **Locate**: choose an image (click, keyboard, drag and drop or paste; or the bundled
  example), run the agent (the configured model, or the offline clue pipeline without one)
  and watch each turn, tool call and result stream in (Server-Sent Events; offline, each
  pipeline step as it finishes), with the elapsed time, the place in the queue while
  waiting and a Cancel button; then the answer with a map (each parallel sample's point
  beside the combined one), to download as its JSON trajectory record or as GeoJSON.
- **Runs**: the evaluation run directories given with ``--runs``: headline numbers from
  ``summary.json``, the samples (previous / next between them), each trajectory, and
  ``per_sample.csv``, ``summary.json`` and the HTML report to take away.
- A JSON API behind both (``POST /api/locate``, ``GET /api/jobs/{id}``,
  ``GET /api/jobs/{id}/events``, ``POST /api/jobs/{id}/cancel``,
  ``GET /api/jobs/{id}/answer.json|geojson``, ``GET /api/runs`` …) for scripts.

Everything is served from 127.0.0.1 by default; pages load nothing from elsewhere (a
Content-Security-Policy forbids it) and render model and tool output as text, never as HTML.
"""

from geosleuth.webapp.app import ServeSettings, create_app

__all__ = ["ServeSettings", "create_app"]
