"""``geosleuth serve``: a local web app to watch the agent work and browse evaluation runs.

`create_app(ServeSettings(...))` returns a Starlette app with three parts:

- **Locate**: upload an image (or use the bundled example), run the agent (the configured
  model, or the offline clue pipeline without one) and watch each turn, tool call and
  result stream in (Server-Sent Events), then the answer with a map.
- **Runs**: the evaluation run directories given with ``--runs``: headline numbers from
  ``summary.json``, the samples, and each trajectory.
- A JSON API behind both (``POST /api/locate``, ``GET /api/jobs/{id}``,
  ``GET /api/jobs/{id}/events``, ``GET /api/runs`` …) for scripts.

Everything is served from 127.0.0.1 by default; pages load nothing from elsewhere (a
Content-Security-Policy forbids it) and render model and tool output as text, never as HTML.
"""

from geosleuth.webapp.app import ServeSettings, create_app

__all__ = ["ServeSettings", "create_app"]
