"""The HTTP API's request and response bodies (pydantic): OpenAI's shapes, Colibri's extensions.

Requests are strict: a field Colibri does not know is refused (400 naming it), types are not
coerced ("1" is not 1), numbers must be finite and in range. The response models describe
exactly what the server sends; they make the OpenAPI schema (/openapi.json).
"""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

INT32_MAX = 2**31 - 1
SEED_MAX = 2**53 - 1    # the largest integer every JSON parser (and the schema's float bounds) holds exactly
MAX_N = 8
MAX_STOPS = 4
FinishReason = Literal["stop", "length"]


def _integral(value):
    """JSON Schema counts 2.0 as an integer: integral floats become ints, in lists and objects too
    (harmless for number fields; strict mode still keeps "2" and true out of integer fields)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data):
        return _integral(data)


class Open(BaseModel):
    """Response bodies."""


# ---- requests -----------------------------------------------------------------------------
class StreamOptions(Strict):
    include_usage: bool = Field(False, description="Send a last chunk with the usage of the whole request.")


class ColibriOptions(Strict):
    routes: bool = Field(False, description="Report every token's routing: the experts and gates each MoE "
                                            "layer chose in the step that produced it.")


NonEmptyText = Annotated[str, Field(min_length=1)]


class GenerationFields(Strict):
    """Fields common to chat and text completions."""

    model: str | None = Field(None, description="The served model's id (GET /v1/models); omitted: that model.")
    max_tokens: int | None = Field(None, ge=1, le=INT32_MAX,
                                   description="Most tokens to generate.")
    temperature: float | None = Field(None, ge=0, le=2, description="0 is greedy. Default: the model's "
                                      "generation_config.json, else 0.")
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1, le=INT32_MAX, description="0 or -1: off.")
    min_p: float | None = Field(None, ge=0, le=1)
    seed: int | None = Field(None, ge=0, le=SEED_MAX, description="Choice i samples with seed + i; with a seed "
                             "the tokens do not depend on other requests.")
    stop: NonEmptyText | Annotated[list[NonEmptyText], Field(max_length=MAX_STOPS)] | None = Field(
        None, description="Up to 4 strings; the text ends before the first that appears.")
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    repetition_penalty: float | None = Field(None, gt=0, le=100, description="Hugging Face's, over prompt "
                                             "and output; 1 is off.")
    n: int = Field(1, ge=1, le=MAX_N, description="Choices to generate.")
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(None, max_length=256, description="Logged with the request.")
    ignore_eos: bool = Field(False, description="Keep generating past end-of-sequence tokens.")
    colibri: ColibriOptions | None = None

    @model_validator(mode="after")
    def _stream_options_need_stream(self):
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options: only allowed with stream: true")
        return self


def _given(name: str) -> dict:
    """JSON Schema: `name` is present and not null."""
    return {"properties": {name: {"not": {"type": "null"}}}, "required": [name]}


def _rules(*rules: dict):
    """The cross-field rules of a request model, stated in its JSON Schema (allOf)."""
    def extra(schema: dict) -> None:
        schema["allOf"] = list(rules)
    return extra


STREAM_OPTIONS_RULE = {"if": _given("stream_options"), "then": {"properties": {"stream": {"const": True}},
                                                                 "required": ["stream"]}}


class TextPart(Strict):
    type: Literal["text"]
    text: str


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]
    name: str | None = Field(None, max_length=256)

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatCompletionRequest(GenerationFields):
    model_config = ConfigDict(json_schema_extra=_rules(
        STREAM_OPTIONS_RULE,
        {"if": _given("top_logprobs"), "then": {"properties": {"logprobs": {"const": True}}, "required": ["logprobs"]}},
        {"not": {"allOf": [_given("max_tokens"), _given("max_completion_tokens")]}}))

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, le=INT32_MAX,
                                              description="Alias of max_tokens (give one of them).")
    logprobs: bool = Field(False, description="Return each output token's log-probability.")
    top_logprobs: int | None = Field(None, ge=0, le=20, description="Also the most likely tokens at each "
                                     "position (needs logprobs: true).")

    @model_validator(mode="after")
    def _checks(self):
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs: needs logprobs: true")
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("max_completion_tokens: give max_tokens or max_completion_tokens, not both")
        return self


TokenId = Annotated[int, Field(ge=0, le=INT32_MAX)]
TokenIds = Annotated[list[TokenId], Field(min_length=1)]


class CompletionRequest(GenerationFields):
    model_config = ConfigDict(json_schema_extra=_rules(STREAM_OPTIONS_RULE))

    prompt: Annotated[str, Field(min_length=1)] | TokenIds | Annotated[list[Annotated[str, Field(min_length=1)]],
                                                                      Field(min_length=1, max_length=MAX_N)] \
        | Annotated[list[TokenIds], Field(min_length=1, max_length=MAX_N)] = Field(
            description="Text, token ids, or a list of either (several prompts).")
    logprobs: int | None = Field(None, ge=0, le=5, description="Each output token's log-probability and this "
                                 "many most likely tokens.")


class TokenizeText(Strict):
    model: str | None = None
    prompt: str = Field(description="Text to tokenize.")
    add_special_tokens: bool = Field(True, description="Add the tokenizer's BOS etc.")


class TokenizeChat(Strict):
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, description="A conversation, rendered with the model's "
                                        "chat template.")
    add_generation_prompt: bool = Field(True, description="End with the assistant's header.")


TokenizeRequest = Union[TokenizeText, TokenizeChat]


class DetokenizeRequest(Strict):
    model: str | None = None
    tokens: list[TokenId]


# ---- responses ----------------------------------------------------------------------------
class ErrorBody(Open):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(Open):
    error: ErrorBody


class PromptTokensDetails(Open):
    cached_tokens: int = Field(description="Prompt tokens whose KV the prefix cache supplied.")


class UsageInfo(Open):
    prompt_tokens: int
    completion_tokens: int = Field(description="Every sampled token, an end-of-sequence token included.")
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class RouteStep(Open):
    token: int
    experts: list[list[int]] = Field(description="[MoE layer][k]: the experts chosen, by descending weight.")
    gates: list[list[float]] = Field(description="[MoE layer][k]: their gate weights (6 decimals).")


class ColibriRoutes(Open):
    layers: list[int] = Field(description="The MoE layers the rows of experts and gates stand for.")
    routes: list[RouteStep] = Field(description="One entry per token of this chunk or choice.")


class TopLogprob(Open):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(Open):
    content: list[TokenLogprob] | None


class AssistantMessage(Open):
    role: Literal["assistant"]
    content: str


class ChatChoice(Open):
    index: int
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None
    finish_reason: FinishReason
    colibri: ColibriRoutes | None = None


class ChatCompletion(Open):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo


class ChatDelta(Open):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChatChunkChoice(Open):
    index: int
    delta: ChatDelta
    logprobs: ChoiceLogprobs | None
    finish_reason: FinishReason | None
    colibri: ColibriRoutes | None = None


class ChatCompletionChunk(Open):
    """One server-sent event of a streamed chat completion (`data: {...}`; the stream ends `data: [DONE]`)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: UsageInfo | None = None


class CompletionLogprobs(Open):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(Open):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: FinishReason | None
    colibri: ColibriRoutes | None = None


class Completion(Open):
    """A text completion, or with stream: true one server-sent event of it (finish_reason null until the last)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo | None = None


class ModelMoE(Open):
    layers: int
    moe_layers: list[int]
    experts: int
    top_k: int


class ModelCard(Open):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    max_model_len: int
    colibri: ModelMoE


class ModelList(Open):
    object: Literal["list"]
    data: list[ModelCard]


class Health(Open):
    status: Literal["ok", "loading"]


class TokenizeResponse(Open):
    tokens: list[int]
    count: int
    max_model_len: int


class DetokenizeResponse(Open):
    prompt: str


GenerationRequest = Union[ChatCompletionRequest, CompletionRequest]
