"""Benchmark evaluation: datasets, the resumable runner, judges, reports, comparisons, scale-out.

Where things live:

- ``datasets`` / ``hf``: loaders for every released layout, with up-front row validation;
- ``config``: the eval config (flags, YAML or TOML) and the run manifest (no secrets);
- ``store`` / ``runner`` / ``run``: the durable JSONL log, bounded-concurrency execution of
  any async ``(Task) -> Trajectory`` and the end-to-end `eval` flow;
- ``backends``: sharding and lost-worker retries; ``ray_backend``: the Ray actors (spread,
  restartable); ``merge``: one run from ``--shard I/N`` job arrays;
- ``scores`` / ``summary`` / ``report`` / ``plots`` / ``html``: per-sample scores, aggregated
  metrics (math from ``geosleuth.core.metrics``, protocols from ``geosleuth.scoring``) and outputs;
- ``judges`` (+ ``judge_prompts/``): LLM-as-a-judge; ``compare``: paired significance between runs.
"""
