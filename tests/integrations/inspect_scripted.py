"""A scripted inspect model provider for the CLI test, found through a test-only entry point.

inspect loads every ``inspect_ai`` entry point when ``--model PROVIDER/NAME`` names a provider
it does not know; the test puts a dist-info naming this module on PYTHONPATH. The model answers
``GEOSLEUTH_TEST_ANSWERS`` (a JSON list) in order, each with a preset usage so nothing counts
tokens with a downloaded tokenizer.
"""

from __future__ import annotations

import json
import os
from typing import Any

from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, ModelUsage, modelapi


class ScriptedAPI(ModelAPI):
    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008 - inspect's provider signature
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        self.answers = iter(json.loads(os.environ["GEOSLEUTH_TEST_ANSWERS"]))

    async def generate(self, input: Any, tools: Any, tool_choice: Any, config: GenerateConfig) -> ModelOutput:
        output = ModelOutput.from_content(model=self.model_name, content=next(self.answers))
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output


@modelapi(name="geosleuth_scripted")
def geosleuth_scripted() -> type[ModelAPI]:
    return ScriptedAPI
