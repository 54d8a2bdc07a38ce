"""Reporting a run: score rows, the summary (through the scoring engine), Markdown / CSV / HTML /
plots, comparisons.
"""
