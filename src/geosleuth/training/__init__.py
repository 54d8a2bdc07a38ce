"""Training kit, by role and by engine.

- ``rewards/``: every reward by name (registry, scorers, rollouts, reading, truth, similarity,
  consistency, geocoding);
- ``data/``: SFT export, cold-start synthesis, difficulty filtering, sampling, MCQ;
- ``qwen/``: the Qwen-VL chat template, processors and image frame the engines share;
- ``verl/``, ``trl/``, ``swift/``: each engine's adapters and exports;
- ``toolcall`` / ``leaks``: what every engine's tool path shares.

Submodules import their engines (torch, trl, verl, pyarrow) lazily so that this package stays
importable without any of them.
"""
