"""Request parsing and response bodies of the vLLM and TGI HTTP APIs, as pure functions.

The shapes follow vLLM's OpenAI-compatible server (``vllm/entrypoints/openai``) and TGI's router
(``router/src/server.rs``, ``router/src/lib.rs``). Only what a load generator or a dashboard looks at is
filled in; sampling parameters are accepted and ignored (the simulator always generates ``max_tokens``).

Error texts are the engines' own. vLLM answers an over-long prompt with 400 and
``This model's maximum context length is N tokens. However, your request has M input tokens. Please reduce
the length of the input messages.`` TGI answers 422 with ``Input validation error: `inputs` must have less
than N tokens. Given: M`` (``InferError::ValidationError`` wrapping ``ValidationError::InputLength``).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadgen.engine_model import Rejection, RejectReason
from loadgen.tokens import chat_prompt_tokens, output_token_id, output_token_text, text_tokens

__all__ = [
    "ApiError",
    "Endpoint",
    "Engine",
    "GenerationRequest",
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


class Engine(enum.StrEnum):
    """Which engine's API to speak."""

    VLLM = "vllm"
    TGI = "tgi"


class Endpoint(enum.StrEnum):
    """The generation endpoints."""

    COMPLETIONS = "completions"  # /v1/completions
    CHAT = "chat"  # /v1/chat/completions
    GENERATE = "generate"  # TGI /generate and /generate_stream


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


# --- errors ----------------------------------------------------------------------------------------


def vllm_error(status: int, message: str, err_type: str = "BadRequestError") -> ApiError:
    """vLLM's OpenAI-style error (``{"error": {"message", "type", "param", "code"}}``)."""
    body = {"error": {"message": message, "type": err_type, "param": None, "code": status}}
    return ApiError(status, body)


def tgi_error(status: int, message: str, error_type: str = "validation") -> ApiError:
    """TGI's ``ErrorResponse`` (``{"error", "error_type"}``)."""
    return ApiError(status, {"error": message, "error_type": error_type}, error_kind=error_type)


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


# --- parsing ---------------------------------------------------------------------------------------


def _bad(engine: Engine, message: str) -> ApiError:
    return vllm_error(400, message) if engine is Engine.VLLM else tgi_error(422, message)


def _int_field(engine: Engine, body: Mapping[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(engine, f"{name} must be an integer, got {value!r}")
        return value
    return None


def _prompt_tokens(engine: Engine, prompt: object) -> int:
    if isinstance(prompt, str):
        return text_tokens(prompt)
    if isinstance(prompt, list):
        if prompt and all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
            return len(prompt)  # token ids
        if len(prompt) == 1 and isinstance(prompt[0], str):
            return text_tokens(prompt[0])
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
        prompt = text_tokens(inputs)
        max_new = _int_field(engine, params, "max_new_tokens")
        details = bool(params.get("details", False))
        max_tokens = max_new if max_new is not None else max_model_len - prompt
        return GenerationRequest(endpoint, prompt, max_tokens, stream, False, details, model_name)

    if endpoint is Endpoint.CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
            raise _bad(engine, "messages must be a list of message objects")
        prompt = chat_prompt_tokens(messages)
        max_tokens_opt = _int_field(engine, body, "max_completion_tokens", "max_tokens")
        max_tokens = max_tokens_opt if max_tokens_opt is not None else max_model_len - prompt
        return GenerationRequest(endpoint, prompt, max_tokens, stream, include_usage, False, model_name)

    prompt = _prompt_tokens(engine, body.get("prompt"))
    max_tokens_opt = _int_field(engine, body, "max_tokens")
    if max_tokens_opt is None:
        # vLLM's CompletionRequest defaults max_tokens to 16; TGI's /v1/completions to 100.
        max_tokens_opt = 16 if engine is Engine.VLLM else 100
    return GenerationRequest(endpoint, prompt, max_tokens_opt, stream, include_usage, False, model_name)


# --- responses -------------------------------------------------------------------------------------


def sse(engine: Engine, payload: Mapping[str, Any] | str) -> bytes:
    """One server-sent event: ``data: {...}`` (vLLM, via Starlette) or ``data:{...}`` (TGI, via axum)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    sep = "data: " if engine is Engine.VLLM else "data:"
    return f"{sep}{data}\n\n".encode()


def usage(prompt_tokens: int, completion_tokens: int, engine: Engine) -> dict[str, Any]:
    """The OpenAI ``usage`` object."""
    body: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if engine is Engine.VLLM:
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


def completion_chunk(ctx: ResponseContext, index: int, finish_reason: str | None) -> dict[str, Any]:
    """A streamed ``/v1/completions`` chunk carrying output token ``index`` (0 for a bare finish)."""
    text = output_token_text(index) if index > 0 else ""
    if ctx.engine is Engine.VLLM:
        return {
            "id": f"cmpl-{ctx.request_id}",
            "object": "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [
                {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
            ],
        }
    return {
        "id": "",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": ctx.fingerprint,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
    }


def chat_chunk(ctx: ResponseContext, index: int, finish_reason: str | None, *, first: bool = False) -> dict[str, Any]:
    """A streamed chat chunk: the role opener (``first``), or output token ``index`` (0 for a bare finish)."""
    delta: dict[str, Any]
    if first:
        delta = {"role": "assistant", "content": ""}
    else:
        delta = {"content": output_token_text(index) if index > 0 else ""}
        if ctx.engine is Engine.TGI:
            delta = {"role": "assistant", **delta}
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    if ctx.engine is Engine.VLLM:
        return {
            "id": f"chatcmpl-{ctx.request_id}",
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [choice],
        }
    return {
        "object": "chat.completion.chunk",
        "id": "",
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": ctx.fingerprint,
        "choices": [choice],
        "usage": None,
    }


def usage_chunk(ctx: ResponseContext, endpoint: Endpoint, prompt: int, completion: int) -> dict[str, Any]:
    """The final chunk of a stream sent with ``stream_options.include_usage``."""
    obj = "chat.completion.chunk" if endpoint is Endpoint.CHAT else "text_completion"
    prefix = "chatcmpl" if endpoint is Endpoint.CHAT else "cmpl"
    body: dict[str, Any] = {
        "id": f"{prefix}-{ctx.request_id}" if ctx.engine is Engine.VLLM else "",
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
    ctx: ResponseContext, endpoint: Endpoint, prompt: int, completion: int, finish_reason: str
) -> dict[str, Any]:
    """The non-streamed body of ``/v1/completions`` or ``/v1/chat/completions``."""
    text = generated_text(completion)
    vllm = ctx.engine is Engine.VLLM
    if endpoint is Endpoint.CHAT:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if vllm:
            message["tool_calls"] = []
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        if vllm:
            choice["stop_reason"] = None
        body: dict[str, Any] = {
            "id": f"chatcmpl-{ctx.request_id}" if vllm else "",
            "object": "chat.completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [choice],
            "usage": usage(prompt, completion, ctx.engine),
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        if vllm:
            choice["stop_reason"] = None
            choice["prompt_logprobs"] = None
        body = {
            "id": f"cmpl-{ctx.request_id}" if vllm else "",
            "object": "text_completion",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [choice],
            "usage": usage(prompt, completion, ctx.engine),
        }
    if not vllm:
        body["system_fingerprint"] = ctx.fingerprint
    return body


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
