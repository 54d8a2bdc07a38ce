"""The parts of verl's tool interface geosleuth builds on, for environments without verl.

Mirrors ``verl.tools.schemas`` (OpenAI function schemas, ``ToolResponse``) and
``verl.tools.base_tool.BaseTool`` (verl ≥ 0.5 signatures) so that tool classes and the
YAML generator import and can be exercised without verl; inside verl the real classes are used.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from pydantic import BaseModel, Field


class OpenAIFunctionPropertySchema(BaseModel):
    type: str | list[str]
    description: str | None = None
    enum: list[Any] | None = None


class OpenAIFunctionParametersSchema(BaseModel):
    type: str
    properties: dict[str, OpenAIFunctionPropertySchema]
    required: list[str] = Field(default_factory=list)


class OpenAIFunctionSchema(BaseModel):
    name: str
    description: str
    parameters: OpenAIFunctionParametersSchema = Field(
        default_factory=lambda: OpenAIFunctionParametersSchema(type="object", properties={}, required=[])
    )
    strict: bool = False


class OpenAIFunctionToolSchema(BaseModel):
    type: str
    function: OpenAIFunctionSchema


class ToolResponse(BaseModel):
    text: str | None = None
    image: list[Any] | None = None
    video: list[Any] | None = None


class BaseTool:
    """create -> execute -> release; ``execute`` returns (ToolResponse, step reward, metrics)."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema) -> None:
        self.config = config
        self.tool_schema = tool_schema
        self.name = tool_schema.function.name

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        return instance_id or str(uuid4()), ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        return ToolResponse(text="Updated the tool state."), 0.0, {}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        return None
