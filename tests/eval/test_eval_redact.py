"""run.json redaction: secrets hidden, ordinary settings that merely mention tokens kept."""

from __future__ import annotations

from geosleuth.eval.run.config import redact


def test_secrets_are_redacted_but_token_budgets_are_not() -> None:
    config = {
        "agent": {
            "max_tokens": 512,
            "max_total_tokens": 9000,
            "tokenizer": "qwen",
            "api_key": "sk-1",
            "api_key_env": "OPENAI_API_KEY",
            "tool_settings": {"keys": {"access_token": "t-1", "Auth-Token-Value": "t-2", "password": "p"}},
            "extra_body": {"authorization": "Bearer x"},
        }
    }
    agent = redact(config)["agent"]
    assert (agent["max_tokens"], agent["max_total_tokens"], agent["tokenizer"]) == (512, 9000, "qwen")
    assert agent["api_key"] == "<redacted>" and agent["api_key_env"] == "OPENAI_API_KEY"
    assert set(agent["tool_settings"]["keys"].values()) == {"<redacted>"}
    assert agent["extra_body"]["authorization"] == "<redacted>"
