"""Request parsing and response bodies of the vLLM, TGI, SGLang and llama.cpp HTTP APIs, as pure functions.

The shapes follow vLLM's OpenAI-compatible server (``vllm/entrypoints/openai``), TGI's router
(``router/src/server.rs``, ``router/src/lib.rs``), SGLang's OpenAI server
(``python/sglang/srt/entrypoints/openai/protocol.py`` and ``serving_*.py``) and llama.cpp's
``llama-server`` (``tools/server/server.cpp``, ``server-common.cpp``; its own ``/completion`` and the
OpenAI-compatible routes, in ``loadgen.engine.api_llamacpp``). Only what a load generator or a dashboard looks at is
filled in. Sampling parameters are validated as vLLM validates them (``SamplingParams._verify_args`` in
``vllm/sampling_params.py``) and otherwise ignored: the text is deterministic (``loadgen.engine.tokens``). In vLLM
mode ``n`` yields n choices and ``stop`` strings end generation where the deterministic text first contains
one (``find_stop``).

Error texts are the engines' own. vLLM answers an over-long prompt with 400 and
``This model's maximum context length is N tokens. However, your request has M input tokens. Please reduce
the length of the input messages.`` TGI answers 422 with ``Input validation error: `inputs` must have less
than N tokens. Given: M`` (``InferError::ValidationError`` wrapping ``ValidationError::InputLength``).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferscale.api import Engine

from loadgen.engine.model import Rejection, RejectReason
from loadgen.engine.tokens import chat_prompt, output_token_id, output_token_text

__all__ = [
    "ApiError",
    "Choice",
    "Endpoint",
    "GenerationRequest",
    "StopHit",
    "find_stop",
    "parse_request",
    "sse",
    "tgi_error",
    "tgi_overloaded",
    "tgi_rejection",
    "vllm_error",
    "vllm_rejection",
]

TGI_VERSION = "3.0.0"
VLLM_VERSION = "0.11.0"
SGLANG_VERSION = "0.5.4"
LLAMACPP_BUILD = "b7100"


# Engines whose OpenAI routes validate `n`, `stop` and the sampling parameters as vLLM does (SGLang's
# SamplingParams.verify in sampling/sampling_params.py checks temperature, top_p and n the same way).
OPENAI_SAMPLING = frozenset({Engine.VLLM, Engine.SGLANG})


class Endpoint(enum.StrEnum):
    """The generation endpoints."""

    COMPLETIONS = "completions"  # /v1/completions
    CHAT = "chat"  # /v1/chat/completions
    GENERATE = "generate"  # TGI /generate and /generate_stream
    COMPLETION = "completion"  # llama.cpp's own /completion


class ApiError(Exception):
    """A request the HTTP layer answers with ``status`` and the JSON ``body``."""

    def __init__(self, status: int, body: Mapping[str, Any], error_kind: str = "validation") -> None:
        super().__init__(json.dumps(body))
        self.status = status
        self.body = body
        self.error_kind = error_kind


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A parsed generation request: what the engine needs plus how to answer."""

    endpoint: Endpoint
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    details: bool
    model: str | None
    n: int = 1
    """Choices to generate (vLLM's ``n``); each is a sequence of its own in the engine."""
    stop: tuple[str, ...] = ()
    """vLLM's ``stop`` strings."""
    prompt: Sequence[object] = ()
    """The prompt's tokens (words, or token ids), which the prefix cache hashes block by block."""


# --- errors ----------------------------------------------------------------------------------------


def vllm_error(status: int, message: str, err_type: str = "BadRequestError") -> ApiError:
    """vLLM's OpenAI-style error (``{"error": {"message", "type", "param", "code"}}``)."""
    body = {"error": {"message": message, "type": err_type, "param": None, "code": status}}
    return ApiError(status, body)


def tgi_error(status: int, message: str, error_type: str = "validation") -> ApiError:
    """TGI's ``ErrorResponse`` (``{"error", "error_type"}``)."""
    return ApiError(status, {"error": message, "error_type": error_type}, error_kind=error_type)


def sglang_error(status: int, message: str, err_type: str = "BadRequestError") -> ApiError:
    """SGLang's ``ErrorResponse`` (``create_error_response`` in ``entrypoints/openai/serving_base.py``)."""
    body = {"object": "error", "message": message, "type": err_type, "param": None, "code": status}
    return ApiError(status, body)


def llamacpp_error(status: int, message: str, err_type: str = "invalid_request_error") -> ApiError:
    """llama-server's ``format_error_response``: ``{"error": {"code", "message", "type"}}``."""
    return ApiError(status, {"error": {"code": status, "message": message, "type": err_type}}, error_kind=err_type)


def engine_error(engine: Engine, status: int, message: str) -> ApiError:
    """An error in ``engine``'s own body shape, with its own default type for ``status``."""
    if engine is Engine.VLLM:
        kind = {404: "NotFoundError", 503: "ServiceUnavailableError"}.get(status, "BadRequestError")
        return vllm_error(status, message, kind)
    if engine is Engine.SGLANG:
        return sglang_error(status, message, "ServiceUnavailableError" if status == 503 else "BadRequestError")
    if engine is Engine.LLAMACPP:
        kind = {404: "not_found_error", 503: "unavailable_error"}.get(status, "invalid_request_error")
        return llamacpp_error(status, message, kind)
    return tgi_error(status, message, "unhealthy" if status == 503 else "validation")


def tgi_overloaded() -> ApiError:
    """TGI's answer when ``--max-concurrent-requests`` requests are already in flight."""
    return tgi_error(429, "Model is overloaded", "overloaded")


def vllm_rejection(rejection: Rejection) -> ApiError:
    """vLLM's 400 for a request the engine refuses."""
    n, m, limit = rejection.prompt_tokens, rejection.max_tokens, rejection.max_model_len
    if rejection.reason is RejectReason.PROMPT_TOO_LONG:
        return vllm_error(
            400,
            f"This model's maximum context length is {limit} tokens. However, your request has {n} input "
            "tokens. Please reduce the length of the input messages.",
        )
    if rejection.reason is RejectReason.TOTAL_TOO_LONG:
        return vllm_error(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {m}. This model's maximum context length "
            f"is {limit} tokens and your request has {n} input tokens ({m} > {limit} - {n}).",
        )
    if rejection.reason is RejectReason.EMPTY_PROMPT:
        return vllm_error(400, "The decoder prompt cannot be empty")
    return vllm_error(400, f"max_tokens must be at least 1, got {m}.")


def tgi_rejection(rejection: Rejection) -> ApiError:
    """TGI's 422 for a request its validation refuses (``max_input_tokens = max_model_len - 1``)."""
    n, m, limit = rejection.prompt_tokens, rejection.max_tokens, rejection.max_model_len
    if rejection.reason is RejectReason.PROMPT_TOO_LONG:
        text = f"`inputs` must have less than {limit - 1} tokens. Given: {n}"
    elif rejection.reason is RejectReason.TOTAL_TOO_LONG:
        text = (
            f"`inputs` tokens + `max_new_tokens` must be <= {limit}. Given: {n} `inputs` tokens and "
            f"{m} `max_new_tokens`"
        )
    elif rejection.reason is RejectReason.EMPTY_PROMPT:
        text = "`inputs` cannot be empty"
    else:
        text = "`max_new_tokens` must be strictly positive"
    return tgi_error(422, f"Input validation error: {text}")


def sglang_rejection(rejection: Rejection) -> ApiError:
    """SGLang's 400 for a request its tokenizer manager refuses (``_validate_one_request``)."""
    n, m, limit = rejection.prompt_tokens, rejection.max_tokens, rejection.max_model_len
    if rejection.reason is RejectReason.PROMPT_TOO_LONG:
        text = f"The input ({n} tokens) is longer than the model's context length ({limit} tokens)."
    elif rejection.reason is RejectReason.TOTAL_TOO_LONG:
        text = (
            f"Requested token count exceeds the model's maximum context length of {limit} tokens. You requested "
            f"a total of {n + m} tokens: {n} tokens from the input messages and {m} tokens for the completion. "
            "Please reduce the number of tokens in the input messages or the completion to fit within the limit."
        )
    elif rejection.reason is RejectReason.EMPTY_PROMPT:
        text = "The input is empty."
    else:
        text = f"max_new_tokens must be at least 0, got {m}."
    return sglang_error(400, text)


def llamacpp_rejection(rejection: Rejection) -> ApiError:
    """llama-server's 400 for a prompt that does not fit the slot's context (``exceed_context_size_error``)."""
    if rejection.reason is RejectReason.EMPTY_PROMPT:
        return llamacpp_error(400, "Input prompt is empty")
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": rejection.prompt_tokens,
            "n_ctx": rejection.max_model_len,
        }
    }
    return ApiError(400, body, error_kind="exceed_context_size_error")


def rejection_error(engine: Engine, rejection: Rejection) -> ApiError:
    """The engine's own answer to a request its validation refuses."""
    if engine is Engine.VLLM:
        return vllm_rejection(rejection)
    if engine is Engine.SGLANG:
        return sglang_rejection(rejection)
    if engine is Engine.LLAMACPP:
        return llamacpp_rejection(rejection)
    return tgi_rejection(rejection)


# --- parsing ---------------------------------------------------------------------------------------


def _bad(engine: Engine, message: str) -> ApiError:
    return engine_error(engine, 422 if engine is Engine.TGI else 400, message)


def _int_field(engine: Engine, body: Mapping[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(engine, f"{name} must be an integer, got {value!r}")
        return value
    return None


def _float_field(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise vllm_error(400, f"{name} must be a number, got {value!r}")
    return float(value)


def _vllm_sampling(body: Mapping[str, Any]) -> tuple[int, tuple[str, ...]]:
    """``n`` and ``stop`` of a vLLM request, after the checks of vLLM's ``SamplingParams._verify_args``
    (``vllm/sampling_params.py``), whose ``ValueError`` the OpenAI server turns into a 400 ``BadRequestError``.
    """
    n = _int_field(Engine.VLLM, body, "n")
    n = 1 if n is None else n
    if n < 1:
        raise vllm_error(400, f"n must be at least 1, got {n}.")
    temperature = _float_field(body, "temperature")
    if temperature is not None and temperature < 0.0:
        raise vllm_error(400, f"temperature must be non-negative, got {temperature}.")
    top_p = _float_field(body, "top_p")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise vllm_error(400, f"top_p must be in (0, 1], got {top_p}.")
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    else:
        raise vllm_error(400, "stop must be a string or a list of strings")
    return n, tuple(s for s in stops if s)


def _prompt(engine: Engine, prompt: object) -> Sequence[object]:
    if isinstance(prompt, str):
        return prompt.split()
    if isinstance(prompt, list):
        if prompt and all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
            return prompt  # token ids
        if len(prompt) == 1 and isinstance(prompt[0], str):
            return prompt[0].split()
    raise _bad(
        engine,
        "prompt must be a string, a list with one string, or a list of token ids "
        "(the simulator serves one prompt per request)",
    )


def parse_request(
    engine: Engine, endpoint: Endpoint, body: object, *, max_model_len: int, stream_default: bool = False
) -> GenerationRequest:
    """Read a request body; raises ``ApiError`` with the engine's status for malformed input."""
    if not isinstance(body, Mapping):
        raise _bad(engine, "the request body must be a JSON object")
    stream_value = body.get("stream", stream_default)
    stream = bool(stream_value)
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
    model = body.get("model")
    model_name = model if isinstance(model, str) else None

    if endpoint is Endpoint.GENERATE:
        inputs = body.get("inputs")
        if not isinstance(inputs, str):
            raise tgi_error(422, "Failed to deserialize the JSON body into the target type: missing field `inputs`")
        params = body.get("parameters") or {}
        if not isinstance(params, Mapping):
            raise tgi_error(422, "`parameters` must be an object")
        tokens = inputs.split()
        max_new = _int_field(engine, params, "max_new_tokens")
        details = bool(params.get("details", False))
        max_tokens = max_new if max_new is not None else max_model_len - len(tokens)
        return GenerationRequest(endpoint, len(tokens), max_tokens, stream, False, details, model_name, prompt=tokens)

    if endpoint is Endpoint.CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
            raise _bad(engine, "messages must be a list of message objects")
        tokens = chat_prompt(messages)
        max_tokens_opt = _int_field(engine, body, "max_completion_tokens", "max_tokens")
        max_tokens = max_tokens_opt if max_tokens_opt is not None else max_model_len - len(tokens)
        if engine is Engine.LLAMACPP:
            max_tokens = _llamacpp_budget(max_tokens_opt, len(tokens), max_model_len)
        n, stop = _sampling(engine, body)
        return GenerationRequest(
            endpoint, len(tokens), max_tokens, stream, include_usage, False, model_name, n, stop, tokens
        )

    if endpoint is Endpoint.COMPLETION:
        prompt = _prompt(engine, body.get("prompt"))
        n_predict = _int_field(engine, body, "n_predict")
        n, stop = _sampling(engine, body)
        max_tokens = _llamacpp_budget(n_predict, len(prompt), max_model_len)
        return GenerationRequest(endpoint, len(prompt), max_tokens, stream, False, False, model_name, n, stop, prompt)

    prompt = _prompt(engine, body.get("prompt"))
    max_tokens_opt = _int_field(engine, body, "max_tokens")
    n, stop = _sampling(engine, body)
    if engine is Engine.LLAMACPP:
        max_tokens_opt = _llamacpp_budget(max_tokens_opt, len(prompt), max_model_len)
    elif max_tokens_opt is None:
        # vLLM's and SGLang's CompletionRequest default max_tokens to 16; TGI's /v1/completions to 100.
        max_tokens_opt = 100 if engine is Engine.TGI else 16
    return GenerationRequest(
        endpoint, len(prompt), max_tokens_opt, stream, include_usage, False, model_name, n, stop, prompt
    )


def _sampling(engine: Engine, body: Mapping[str, Any]) -> tuple[int, tuple[str, ...]]:
    """``n`` and ``stop`` as the engine reads them (TGI's OpenAI routes take neither here)."""
    if engine in OPENAI_SAMPLING:
        try:
            return _vllm_sampling(body)
        except ApiError as err:
            if engine is Engine.VLLM:
                raise
            raise sglang_error(400, err.body["error"]["message"]) from None
    if engine is Engine.LLAMACPP:
        n = _int_field(engine, body, "n")
        if n is not None and n != 1:
            raise llamacpp_error(400, "Only one completion choice is allowed")
        stop = body.get("stop")
        stops = (stop,) if isinstance(stop, str) else tuple(s for s in stop or () if isinstance(s, str))
        return 1, tuple(s for s in stops if s)
    return 1, ()


def _llamacpp_budget(n_predict: int | None, prompt_tokens: int, slot_ctx: int) -> int:
    """Tokens a llama.cpp slot generates: ``n_predict`` (-1 or unset: no limit), but never past the end of the
    slot's context, where the server stops the generation (``n_ctx`` reached, ``stop_type`` limit) rather than
    refusing the request; a prompt that alone overflows is refused by validation."""
    room = max(1, slot_ctx - prompt_tokens)
    return room if n_predict is None or n_predict < 0 else min(n_predict, room)


@dataclass(frozen=True, slots=True)
class StopHit:
    """Where a stop string ends generation: at output token ``tokens``, the one that completes ``stop``;
    the output text keeps its first ``text_chars`` characters (the stop string itself is cut, as vLLM does
    unless ``include_stop_str_in_output``)."""

    tokens: int
    text_chars: int
    stop: str


def find_stop(max_tokens: int, stops: Sequence[str]) -> StopHit | None:
    """The first place the deterministic output of ``max_tokens`` tokens contains one of ``stops``.

    vLLM checks the stop strings after each detokenized token, over the new text plus enough before it to
    hold a stop string (``check_stop_strings`` in ``vllm/v1/engine/detokenizer.py``): generation ends on the
    token that completes the first occurrence and the text is cut where that occurrence begins.
    """
    if not stops:
        return None
    text = ""
    for index in range(1, max_tokens + 1):
        piece = output_token_text(index)
        text += piece
        for stop in stops:
            found = text.find(stop, max(0, len(text) - len(piece) - len(stop) + 1))
            if found != -1:
                return StopHit(index, found, stop)
    return None


# --- responses -------------------------------------------------------------------------------------


def sse(payload: Mapping[str, Any] | str) -> bytes:
    """One server-sent event, ``data: {...}``, as both engines frame it: vLLM writes the prefix itself
    (``f"data: {...}\\n\\n"`` in ``vllm/entrypoints/openai/serving_completion.py``), TGI's router through
    axum's ``sse::Event`` (``EventDataWriter`` writes ``data: `` in ``axum/src/response/sse.rs``), for
    ``data: [DONE]`` too; ``huggingface_hub`` matches ``data: [DONE]`` exactly to end a stream."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def usage(prompt_tokens: int, completion_tokens: int, engine: Engine) -> dict[str, Any]:
    """The OpenAI ``usage`` object."""
    body: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if engine in OPENAI_SAMPLING:
        body["prompt_tokens_details"] = None
    return body


def generated_text(count: int) -> str:
    """The text of ``count`` output tokens."""
    return "".join(output_token_text(i) for i in range(1, count + 1))


@dataclass(frozen=True, slots=True)
class ResponseContext:
    """Identifiers shared by all chunks of one response."""

    engine: Engine
    request_id: str
    model: str
    created: int

    @property
    def fingerprint(self) -> str:
        return f"{TGI_VERSION}-native"

    def openai_id(self, prefix: str) -> str:
        """The response id: vLLM's ``cmpl-``/``chatcmpl-`` + request id; SGLang's bare request id (a uuid hex)."""
        return self.request_id if self.engine is Engine.SGLANG else f"{prefix}-{self.request_id}"

    @property
    def stop_key(self) -> str:
        """Where a choice says which stop string ended it: vLLM's ``stop_reason``, SGLang's ``matched_stop``."""
        return "matched_stop" if self.engine is Engine.SGLANG else "stop_reason"


@dataclass(frozen=True, slots=True)
class Choice:
    """One finished choice of a response: its text, tokens generated, and why it ended."""

    text: str
    tokens: int
    finish_reason: str
    stop_reason: str | None = None


def completion_chunk(
    ctx: ResponseContext,
    text: str,
    finish_reason: str | None,
    *,
    choice: int = 0,
    stop_reason: str | None = None,
    usage_body: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A streamed ``/v1/completions`` chunk carrying ``text`` for choice ``choice``.

    TGI's router tags every chunk ``"object": "text_completion"`` (``#[serde(tag = "object")] enum
    Completion`` in ``router/src/lib.rs``), sends ``finish_reason: ""`` until the last token, and puts the
    finish reason and the usage in that last chunk (``CompletionFinal`` in ``completions`` of
    ``router/src/server.rs``).
    """
    if ctx.engine in OPENAI_SAMPLING:
        body: dict[str, Any] = {
            "id": ctx.openai_id("cmpl"),
            "object": "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [
                {
                    "index": choice,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                    ctx.stop_key: stop_reason,
                }
            ],
        }
        if ctx.engine is Engine.SGLANG:
            body["usage"] = None
        return body
    choices = [{"index": choice, "text": text, "logprobs": None, "finish_reason": finish_reason or ""}]
    if finish_reason is None:
        return {
            "object": "text_completion",
            "id": "",
            "created": ctx.created,
            "choices": choices,
            "model": ctx.model,
            "system_fingerprint": ctx.fingerprint,
        }
    return {
        "object": "text_completion",
        "id": "",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": ctx.fingerprint,
        "choices": choices,
        "usage": dict(usage_body) if usage_body is not None else None,
    }


def chat_chunk(
    ctx: ResponseContext,
    text: str,
    finish_reason: str | None,
    *,
    choice: int = 0,
    first: bool = False,
    stop_reason: str | None = None,
) -> dict[str, Any]:
    """A streamed chat chunk for choice ``choice``: the role opener (``first``), or ``text``."""
    delta: dict[str, Any]
    if first:
        delta = {"role": "assistant", "content": ""}
    else:
        delta = {"content": text}
        if ctx.engine is Engine.TGI:
            delta = {"role": "assistant", **delta}
    body: dict[str, Any] = {"index": choice, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    if ctx.engine is Engine.SGLANG:
        body[ctx.stop_key] = stop_reason
        return {
            "id": ctx.openai_id("chatcmpl"),
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [body],
            "usage": None,
        }
    if ctx.engine is Engine.VLLM:
        if finish_reason is not None:
            body["stop_reason"] = stop_reason  # vLLM dumps chat chunks with exclude_unset: only the last has it
        return {
            "id": f"chatcmpl-{ctx.request_id}",
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [body],
        }
    return {
        "object": "chat.completion.chunk",
        "id": "",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": ctx.fingerprint,
        "choices": [body],
        "usage": None,
    }


def usage_chunk(ctx: ResponseContext, endpoint: Endpoint, prompt: int, completion: int) -> dict[str, Any]:
    """The final chunk of a stream sent with ``stream_options.include_usage``."""
    obj = "chat.completion.chunk" if endpoint is Endpoint.CHAT else "text_completion"
    prefix = "chatcmpl" if endpoint is Endpoint.CHAT else "cmpl"
    body: dict[str, Any] = {
        "id": ctx.openai_id(prefix) if ctx.engine in OPENAI_SAMPLING else "",
        "object": obj,
        "created": ctx.created,
        "model": ctx.model,
        "choices": [],
        "usage": usage(prompt, completion, ctx.engine),
    }
    if ctx.engine is Engine.TGI:
        body["system_fingerprint"] = ctx.fingerprint
    return body


def completion_response(
    ctx: ResponseContext, endpoint: Endpoint, prompt: int, choices: Sequence[Choice]
) -> dict[str, Any]:
    """The non-streamed body of ``/v1/completions`` or ``/v1/chat/completions``."""
    vllm = ctx.engine is Engine.VLLM
    openai = ctx.engine in OPENAI_SAMPLING
    bodies: list[dict[str, Any]] = []
    for index, result in enumerate(choices):
        body: dict[str, Any]
        if endpoint is Endpoint.CHAT:
            message: dict[str, Any] = {"role": "assistant", "content": result.text}
            if vllm:
                message["tool_calls"] = []
            elif openai:
                message.update(reasoning_content=None, tool_calls=None)
            body = {"index": index, "message": message, "logprobs": None, "finish_reason": result.finish_reason}
        else:
            body = {"index": index, "text": result.text, "logprobs": None, "finish_reason": result.finish_reason}
        if openai:
            body[ctx.stop_key] = result.stop_reason
            if vllm and endpoint is not Endpoint.CHAT:
                body["prompt_logprobs"] = None
        bodies.append(body)
    chat = endpoint is Endpoint.CHAT
    response: dict[str, Any] = {
        "id": ctx.openai_id("chatcmpl" if chat else "cmpl") if openai else "",
        "object": "chat.completion" if chat else "text_completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": bodies,
        "usage": usage(prompt, sum(c.tokens for c in choices), ctx.engine),
    }
    if not openai:
        response["system_fingerprint"] = ctx.fingerprint
    return response


def _tgi_token(index: int) -> dict[str, Any]:
    return {"id": output_token_id(index), "text": output_token_text(index), "logprob": -0.25, "special": False}


def tgi_finish_reason(reason: str) -> str:
    """TGI's ``FinishReason`` serialisation (``length``, ``eos_token``, ``stop_sequence``)."""
    return "length" if reason == "length" else reason


def tgi_stream_token(
    index: int, *, final: bool, prompt: int, generated: int, details: bool, finish_reason: str
) -> dict[str, Any]:
    """A ``/generate_stream`` event for token ``index``; the final one carries the text and details."""
    event: dict[str, Any] = {
        "index": index,
        "token": _tgi_token(index),
        "top_tokens": None,
        "generated_text": generated_text(generated) if final else None,
        "details": None,
    }
    if final and details:
        event["details"] = {
            "finish_reason": tgi_finish_reason(finish_reason),
            "generated_tokens": generated,
            "seed": None,
            "input_length": prompt,
        }
    return event


def tgi_generate_response(prompt: int, generated: int, *, details: bool, finish_reason: str) -> dict[str, Any]:
    """The body of ``/generate``."""
    body: dict[str, Any] = {"generated_text": generated_text(generated)}
    if details:
        body["details"] = {
            "finish_reason": tgi_finish_reason(finish_reason),
            "generated_tokens": generated,
            "seed": None,
            "prefill": [],
            "tokens": [_tgi_token(i) for i in range(1, generated + 1)],
            "top_tokens": [],
            "best_of_sequences": None,
        }
    return body


def vllm_models(model: str, max_model_len: int, created: int) -> dict[str, Any]:
    """vLLM's ``/v1/models``."""
    return {
        "object": "list",
        "data": [
            {
                "id": model,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": model,
                "parent": None,
                "max_model_len": max_model_len,
                "permission": [],
            }
        ],
    }


def sglang_models(model: str, max_model_len: int, created: int) -> dict[str, Any]:
    """SGLang's ``/v1/models`` (``ModelCard`` in ``entrypoints/openai/protocol.py``)."""
    card = {
        "id": model,
        "object": "model",
        "created": created,
        "owned_by": "sglang",
        "root": model,
        "parent": None,
        "max_model_len": max_model_len,
    }
    return {"object": "list", "data": [card]}


def sglang_model_info(model: str) -> dict[str, Any]:
    """SGLang's ``/get_model_info`` (``http_server.py``)."""
    return {
        "model_path": model,
        "tokenizer_path": model,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
    }


def tgi_info(model: str, max_model_len: int, max_concurrent_requests: int) -> dict[str, Any]:
    """TGI's ``/info``."""
    return {
        "model_id": model,
        "model_sha": None,
        "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": max_concurrent_requests,
        "max_best_of": 2,
        "max_stop_sequences": 4,
        "max_input_tokens": max_model_len - 1,
        "max_total_tokens": max_model_len,
        "validation_workers": 2,
        "max_client_batch_size": 4,
        "router": "text-generation-router",
        "version": TGI_VERSION,
        "sha": None,
        "docker_label": None,
    }


def tgi_models(model: str) -> dict[str, Any]:
    """TGI's ``/v1/models``."""
    return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": model}]}
