"""Training kit: reward adapters for verl / TRL / ms-swift, verl tool classes, SFT and RL data tooling.

Submodules import their engines (torch, trl, verl, pyarrow) lazily so that this package stays
importable without any of them.
"""
