"""Benchmark evaluation: datasets, the resumable runner, reports, judges, WhereBench.

Where things live:

- ``datasets/``: the format registry (``formats``), released layouts, table rows, image
  references, Hugging Face rows and the loaders (``loading``) with up-front row validation;
- ``run/``: the eval config and run manifest (``config``), the durable JSONL log (``store``),
  bounded-concurrency execution (``runner``), the end-to-end flow (``pipeline``), backends
  (sharding, job arrays, Ray) and ``merge``;
- ``report/``: per-sample score rows, the summary (protocol figures from ``geosleuth.scoring``),
  Markdown / CSV / HTML / plots and ``compare`` (paired significance between runs);
- ``judges/``: LLM-as-a-judge tasks and their prompt files;
- ``wherebench/``: WhereBench's rules, released files and released judge.
"""
