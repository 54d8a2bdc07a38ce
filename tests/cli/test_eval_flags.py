"""`geosleuth eval`'s flags reach the run config through one table (eval.config.config_flags),
shared with `geosleuth.evaluate`: every flag is a config field, a judge flag or an invocation switch."""

from __future__ import annotations

import inspect

from geosleuth.cli.eval import NOT_CONFIG, eval_command
from geosleuth.eval.run.config import FLAG_FIELDS, JUDGE_FLAGS, EvalConfig, config_flags, resolve_config


def test_every_eval_flag_is_a_config_field_a_judge_flag_or_a_switch() -> None:
    flags = set(inspect.signature(eval_command).parameters)
    fields = {FLAG_FIELDS.get(name, name) for name in flags - NOT_CONFIG - set(JUDGE_FLAGS)}
    assert fields <= set(EvalConfig.model_fields), fields - set(EvalConfig.model_fields)
    assert {"model", "timeout_s", "breakdowns", "shard", "report"} <= fields


def test_defaults_leave_the_config_file_alone_and_given_flags_win() -> None:
    defaults = {name: p.default for name, p in inspect.signature(eval_command).parameters.items()}
    flags = config_flags({k: v for k, v in defaults.items() if k not in NOT_CONFIG})
    assert {k: v for k, v in flags.items() if v is not None} == {}
    from_file = {"dataset": "d", "out": "o", "report": False, "skip_invalid": True, "breakdowns": ["x"]}
    assert resolve_config(from_file, flags).model_dump(include={"report", "skip_invalid", "breakdowns"}) == {
        "report": False,
        "skip_invalid": True,
        "breakdowns": ["x"],
    }
    given = config_flags({"tools": "a, b", "timeout": 5.0, "breakdown": ["split"], "judge_model": "j"})
    assert given["tools"] == ["a", "b"] and given["timeout_s"] == 5.0 and given["breakdowns"] == ["split"]
    assert given["judge"].model == "j"
