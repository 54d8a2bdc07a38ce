"""The agent: VLM client, think–act–observe loop, prompts, test-time scaling, offline pipeline.

Public entry points::

    from geosleuth.agent import AgentConfig, run_task, run_task_sync, run_tasks

    config = AgentConfig(model="Qwen2.5-VL-7B-Instruct", base_url="http://127.0.0.1:8000/v1",
                         prompt_style="spotagent", samples=4, verifier_model="Qwen2.5-VL-72B-Instruct")
    trajectory = await run_task(Task(id="img1", image="photo.jpg"), config, artifacts_dir=Path("run"))

- `AgentConfig` (pydantic): model (name, or a server URL: its first listed model), base_url
  (default ``$OPENAI_BASE_URL``), api_key_env, prompt_style (``geovista``,
  ``thinking_with_map``, ``spotagent``, ``direct``), tools, tool_calling (``native`` |
  ``text``), tool_result_role, bbox_convention, max_turns (8 unless the style says
  otherwise), max_tool_calls, tool_call_limits, max_total_tokens, timeout_s, sampling
  (temperature, top_p, top_k, max_tokens, seed), samples, verifier_model, pixel_budget
  (2 M). ``model=None`` runs the offline clue pipeline instead of a VLM.
- `run_task(task, config, *, artifacts_dir=None, client=None, registry=None)` →
  `Trajectory`. It never raises for a bad image or a failing model: the trajectory's
  ``status`` says what happened. Tool images are written under ``artifacts_dir`` (put the
  JSONL there: paths in the trajectory are relative to it). With ``samples > 1`` the
  returned record holds the N trajectories in ``samples`` and the aggregate prediction.
- `run_tasks(tasks, config, concurrency=16)` shares one HTTP client and tool registry.
- `write_trajectories`, `read_trajectories`, `to_openai_chat`: the JSONL format and the
  OpenAI chat export.
"""

from __future__ import annotations

from geosleuth.lazy import lazy_getattr

_EXPORTS = {
    "ChatClient": "geosleuth.agent.client",
    "ModelError": "geosleuth.agent.client",
    "AgentConfig": "geosleuth.agent.config",
    "ImageInputError": "geosleuth.agent.images",
    "load_image": "geosleuth.agent.images",
    "available_styles": "geosleuth.agent.prompting",
    "load_style": "geosleuth.agent.prompting",
    "run_task": "geosleuth.agent.runner",
    "run_task_sync": "geosleuth.agent.runner",
    "run_tasks": "geosleuth.agent.runner",
    "medoid_aggregate": "geosleuth.agent.scaling",
    "verifier_view": "geosleuth.agent.scaling",
    "read_trajectories": "geosleuth.agent.trajectory",
    "to_openai_chat": "geosleuth.agent.trajectory",
    "write_trajectories": "geosleuth.agent.trajectory",
}
"""Public name -> its module, imported on first use (the prompt-style registry stays light)."""

__all__ = list(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
