"""Benchmark datasets: the format registry, released layouts, table rows, image references, Hugging Face."""
