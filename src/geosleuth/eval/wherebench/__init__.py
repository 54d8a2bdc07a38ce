"""WhereBench in one place: its rules (pure), its released file format and its released LLM judge."""
