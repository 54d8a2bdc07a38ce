"""LLM-as-a-judge tasks over a finished run, and their prompt files."""
