"""The flat Python API (``geosleuth.locate``, ``score``, ``load_dataset``, ``evaluate``, ``reward``).

Each function is a thin front over the layer that does the work, taking the CLI's options by
the CLI's names, so a notebook and a shell give the same answer. ``geosleuth/__init__.py``
imports these modules lazily, on first use of a name.
"""
