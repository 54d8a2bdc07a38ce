"""A scripted agent for the web app's run-browsing tests (``--agent-fn webapp_stub_agent:agent``)."""

from __future__ import annotations

from geosleuth.core.records import (
    ParseStatus,
    Prediction,
    Task,
    ToolCallRecord,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from geosleuth.tools.text import wrap_output

ANSWERS = {"paris": (48.85, 2.35, "France"), "berlin": (50.11, 8.68, "Germany")}
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"


async def agent(task: Task) -> Trajectory:
    """Paris and Berlin answered after one zoom call (its result text is hostile HTML); others fail."""
    if task.id not in ANSWERS:
        return Trajectory(sample_id=task.id, model="stub", status=TrajectoryStatus.TIMEOUT, error="too slow")
    lat, lon, country = ANSWERS[task.id]
    shown = (
        wrap_output("image_zoom_in_tool", HOSTILE) if task.id == "berlin" else HOSTILE
    )  # fenced, as the model saw it
    call = ToolCallRecord(
        id="c1", name="image_zoom_in_tool", arguments={"bbox_2d": [0, 0, 10, 10]}, result_text=shown
    )
    return Trajectory(
        sample_id=task.id,
        model="stub",
        turns=[
            Turn(index=0, text="Zooming on the sign.", tool_calls=[call]),
            Turn(index=1, text=f"{country}."),
        ],
        prediction=Prediction(lat=lat, lon=lon, country=country, status=ParseStatus.OK, raw=HOSTILE),
    )
