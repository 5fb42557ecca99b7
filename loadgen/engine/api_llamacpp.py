"""Response bodies of llama.cpp's ``llama-server``, as pure functions.

Shapes from ``tools/server/server-task.cpp`` (``to_json_non_oaicompat``, ``to_json_oaicompat*``) and
``server-common.cpp`` at a late-2025 master (build ``LLAMACPP_BUILD``): its own ``/completion`` answers with
``content``, ``stop``, ``stop_type`` and ``timings``, streams one ``data: {...}`` event per token and ends
with a final event carrying ``"stop": true`` (no ``[DONE]``); the OpenAI-compatible routes follow OpenAI's
shapes, with a ``system_fingerprint`` naming the build, ``chatcmpl-`` ids on both, and ``data: [DONE]`` at the
end of a stream. While the model loads every route but ``/health`` answers 503 ``Loading model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadgen.engine.api import LLAMACPP_BUILD, Choice, Endpoint, ResponseContext, llamacpp_error

__all__ = ["Timings", "chunk", "final", "health_ok", "loading", "models"]

FINGERPRINT = f"{LLAMACPP_BUILD}-simengine"


@dataclass(frozen=True, slots=True)
class Timings:
    """A slot's ``timings`` object: prompt evaluation and generation, in tokens and milliseconds."""

    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float

    def body(self) -> dict[str, float]:
        def per_token(ms: float, n: int) -> float:
            return ms / n if n else 0.0

        def per_second(ms: float, n: int) -> float:
            return 1e3 / ms * n if ms else 0.0

        return {
            "prompt_n": self.prompt_n,
            "prompt_ms": self.prompt_ms,
            "prompt_per_token_ms": per_token(self.prompt_ms, self.prompt_n),
            "prompt_per_second": per_second(self.prompt_ms, self.prompt_n),
            "predicted_n": self.predicted_n,
            "predicted_ms": self.predicted_ms,
            "predicted_per_token_ms": per_token(self.predicted_ms, self.predicted_n),
            "predicted_per_second": per_second(self.predicted_ms, self.predicted_n),
        }


def health_ok() -> dict[str, str]:
    """``/health`` once the model is loaded."""
    return {"status": "ok"}


def loading() -> tuple[int, dict[str, Any]]:
    """What every route but ``/health``'s success answers while the model loads (``/health`` too, with 503)."""
    err = llamacpp_error(503, "Loading model", "unavailable_error")
    return err.status, dict(err.body)


def models(model: str, created: int, n_ctx: int) -> dict[str, Any]:
    """``/v1/models``: the OpenAI list, with the legacy ``models`` array beside it."""
    return {
        "models": [{"name": model, "model": model, "modified_at": "", "size": "", "digest": "", "type": "model"}],
        "object": "list",
        "data": [
            {"id": model, "object": "model", "created": created, "owned_by": "llamacpp", "meta": {"n_ctx": n_ctx}}
        ],
    }


def _stop_type(result: Choice) -> str:
    return "word" if result.finish_reason == "stop" else "limit"


def _usage(prompt: int, generated: int) -> dict[str, int]:
    return {"completion_tokens": generated, "prompt_tokens": prompt, "total_tokens": prompt + generated}


def final(
    ctx: ResponseContext, endpoint: Endpoint, prompt: int, result: Choice, timings: Timings, *, slot: int = 0
) -> dict[str, Any]:
    """The non-streamed body of ``/completion``, ``/v1/completions`` or ``/v1/chat/completions``."""
    if endpoint is Endpoint.COMPLETION:
        return {
            "index": 0,
            "content": result.text,
            "tokens": [],
            "id_slot": slot,
            "stop": True,
            "model": ctx.model,
            "tokens_predicted": result.tokens,
            "tokens_evaluated": prompt,
            "generation_settings": {"n_predict": result.tokens, "stream": False},
            "prompt": "",
            "has_new_line": False,
            "truncated": False,
            "stop_type": _stop_type(result),
            "stopping_word": result.stop_reason or "",
            "tokens_cached": prompt + result.tokens,
            "timings": timings.body(),
        }
    chat = endpoint is Endpoint.CHAT
    choice: dict[str, Any] = {"finish_reason": result.finish_reason, "index": 0}
    if chat:
        choice["message"] = {"role": "assistant", "content": result.text}
    else:
        choice.update(text=result.text, logprobs=None)
    return {
        "choices": [choice],
        "created": ctx.created,
        "model": ctx.model,
        "system_fingerprint": FINGERPRINT,
        "object": "chat.completion" if chat else "text_completion",
        "usage": _usage(prompt, result.tokens),
        "id": f"chatcmpl-{ctx.request_id}",
        "timings": timings.body(),
    }


def chunk(
    ctx: ResponseContext,
    endpoint: Endpoint,
    text: str | None,
    *,
    prompt: int,
    predicted: int,
    finish: Choice | None = None,
    timings: Timings | None = None,
    opener: bool = False,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One streamed event: a token's ``text``, the chat stream's role ``opener``, or the ``finish``."""
    if endpoint is Endpoint.COMPLETION:
        if finish is not None and timings is not None:
            return {**final(ctx, endpoint, prompt, finish, timings), "content": "", "id_slot": 0}
        return {
            "index": 0,
            "content": text or "",
            "tokens": [],
            "stop": False,
            "id_slot": -1,
            "tokens_predicted": predicted,
            "tokens_evaluated": prompt,
        }
    chat = endpoint is Endpoint.CHAT
    reason = None if finish is None else finish.finish_reason
    choice: dict[str, Any] = {"finish_reason": reason, "index": 0}
    if chat:
        if opener:
            choice["delta"] = {"role": "assistant", "content": None}
        else:
            choice["delta"] = {} if finish is not None else {"content": text}
    else:
        choice.update(text=text or "", logprobs=None)
    body: dict[str, Any] = {
        "choices": [choice],
        "created": ctx.created,
        "id": f"chatcmpl-{ctx.request_id}",
        "model": ctx.model,
        "system_fingerprint": FINGERPRINT,
        "object": "chat.completion.chunk" if chat else "text_completion",
    }
    if finish is not None:
        if include_usage:
            body["usage"] = _usage(prompt, finish.tokens)
        if timings is not None:
            body["timings"] = timings.body()
    return body
