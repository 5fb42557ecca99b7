"""simengine driven by the clients people use against vLLM and TGI: the ``openai`` package and
``huggingface_hub``'s ``InferenceClient``, over HTTP on loopback.

Each test asserts what a user of that client would see: the text, the finish reason, the number of
choices, the exception raised. The engine's text is deterministic (``loadgen.engine.tokens``: " the quick brown
fox jumps over a lazy dog ..."), which is what makes stop sequences testable.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from huggingface_hub import InferenceClient
from inferscale.api import Engine
from prometheus_client.parser import text_string_to_metric_families

from loadgen.engine.profiles import TEST_PROFILE
from loadgen.engine.server import ServerConfig, running_server
from loadgen.engine.tokens import filler_text

pytestmark = pytest.mark.anyio
MODEL = "sim/llama-3-8b"
PROMPT = filler_text(12)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def config(engine: Engine, **kw: Any) -> ServerConfig:
    return ServerConfig(engine=engine, profile=TEST_PROFILE, model_name=MODEL, **kw)


@pytest.fixture
async def vllm_url() -> AsyncIterator[str]:
    async with running_server(config(Engine.VLLM)) as (_, url):
        yield url


@pytest.fixture
async def tgi_url() -> AsyncIterator[str]:
    async with running_server(config(Engine.TGI)) as (_, url):
        yield url


@pytest.fixture
async def oai(vllm_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{vllm_url}/v1", api_key="none", max_retries=0, timeout=10) as client:
        yield client


def hf(url: str) -> InferenceClient:
    return InferenceClient(base_url=url, timeout=10)


# --- vLLM mode, openai ------------------------------------------------------------------------------


async def test_openai_completions_plain_and_streamed(oai: openai.AsyncOpenAI) -> None:
    full = await oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5)
    assert full.choices[0].text == " the quick brown fox jumps"
    assert full.choices[0].finish_reason == "length"
    assert full.usage is not None and (full.usage.prompt_tokens, full.usage.completion_tokens) == (12, 5)

    stream = await oai.completions.create(
        model=MODEL, prompt=PROMPT, max_tokens=5, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == " the quick brown fox jumps"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5


async def test_openai_chat_plain_and_streamed(oai: openai.AsyncOpenAI) -> None:
    messages: Any = [{"role": "user", "content": PROMPT}]
    full = await oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=3)
    assert full.choices[0].message.content == " the quick brown"
    assert full.choices[0].finish_reason == "length"

    stream = await oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, stream=True)
    chunks = [chunk async for chunk in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == " the quick brown"
    assert chunks[-1].choices[0].finish_reason == "length"


async def test_openai_stop_sequence_ends_generation_with_finish_reason_stop(
    oai: openai.AsyncOpenAI, vllm_url: str
) -> None:
    # The stop string is not part of the output (vLLM's include_stop_str_in_output defaults to false), and
    # generation ends at the token that completes it: 4 tokens for " the quick brown fox".
    full = await oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=50, stop=["fox", "lazy"])
    choice = full.choices[0]
    assert (choice.text, choice.finish_reason) == (" the quick brown ", "stop")
    assert full.usage is not None and full.usage.completion_tokens == 4
    assert getattr(choice, "stop_reason", None) == "fox"

    stream = await oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=50, stop="over a", stream=True)
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks) == " the quick brown fox jumps "
    assert chunks[-1].choices[0].finish_reason == "stop"

    messages: Any = [{"role": "user", "content": PROMPT}]
    chat = await oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=50, stop=["brown"])
    assert (chat.choices[0].message.content, chat.choices[0].finish_reason) == (" the quick ", "stop")

    # A stop string the text never reaches changes nothing.
    full = await oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, stop=["zebra"])
    assert (full.choices[0].text, full.choices[0].finish_reason) == (" the quick brown", "length")

    # ... and a dashboard counts them as vLLM does, by finished_reason.
    async with httpx.AsyncClient(base_url=vllm_url, timeout=10) as raw:
        families = text_string_to_metric_families((await raw.get("/metrics")).text)
    success = next(f for f in families if f.name == "vllm:request_success")
    by_reason = {s.labels["finished_reason"]: s.value for s in success.samples if s.name.endswith("_total")}
    assert (by_reason["stop"], by_reason["length"]) == (3, 1)


async def test_openai_n_returns_n_choices(oai: openai.AsyncOpenAI) -> None:
    full = await oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, n=2)
    assert sorted(c.index for c in full.choices) == [0, 1]
    assert all(c.text == " the quick brown fox" and c.finish_reason == "length" for c in full.choices)
    assert full.usage is not None and (full.usage.prompt_tokens, full.usage.completion_tokens) == (12, 8)

    messages: Any = [{"role": "user", "content": PROMPT}]
    stream = await oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, n=3, stream=True)
    text: dict[int, str] = {}
    finish: dict[int, str | None] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            text[choice.index] = text.get(choice.index, "") + (choice.delta.content or "")
            finish[choice.index] = choice.finish_reason or finish.get(choice.index)
    assert text == {0: " the quick brown", 1: " the quick brown", 2: " the quick brown"}
    assert finish == {0: "length", 1: "length", 2: "length"}


async def test_openai_sees_vllm_validation_errors(oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=-1)
    assert caught.value.status_code == 400
    assert caught.value.response.json() == {
        "error": {
            "message": "temperature must be non-negative, got -1.0.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    with pytest.raises(openai.BadRequestError, match="top_p must be in"):
        await oai.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4, top_p=0
        )
    with pytest.raises(openai.BadRequestError, match="n must be at least 1, got 0"):
        await oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, n=0)


async def test_unknown_paths_answer_as_fastapi_and_axum_do(oai: openai.AsyncOpenAI, tgi_url: str) -> None:
    # vLLM serves /v1/models but no /v1/models/{id}: FastAPI's default 404.
    with pytest.raises(openai.NotFoundError) as caught:
        await oai.models.retrieve(MODEL)
    assert caught.value.response.headers["content-type"] == "application/json"
    assert caught.value.response.json() == {"detail": "Not Found"}
    async with httpx.AsyncClient(base_url=str(oai.base_url).removesuffix("/v1/"), timeout=10) as raw:
        wrong_method = await raw.get("/v1/completions")
        assert (wrong_method.status_code, wrong_method.json()) == (405, {"detail": "Method Not Allowed"})
    # axum's router answers an unknown route with an empty 404.
    async with httpx.AsyncClient(base_url=tgi_url, timeout=10) as raw:
        missing = await raw.get("/v1/nothing-here")
        assert (missing.status_code, missing.content) == (404, b"")


# --- TGI mode, huggingface_hub and openai -----------------------------------------------------------


async def test_inference_client_chat_completion_plain_and_streamed(tgi_url: str) -> None:
    client = hf(tgi_url)
    messages = [{"role": "user", "content": PROMPT}]
    full = await asyncio.to_thread(client.chat_completion, messages, max_tokens=4)
    assert full.choices[0].message.content == " the quick brown fox"
    assert full.choices[0].finish_reason == "length"

    def stream() -> list[Any]:
        return list(client.chat_completion(messages, max_tokens=4, stream=True))

    chunks = await asyncio.to_thread(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == " the quick brown fox"
    assert chunks[-1].choices[0].finish_reason == "length"


async def test_inference_client_text_generation_plain_and_streamed(tgi_url: str) -> None:
    client = hf(tgi_url)
    text = await asyncio.to_thread(client.text_generation, PROMPT, max_new_tokens=3)
    assert text == " the quick brown"

    def stream() -> list[Any]:
        return list(client.text_generation(PROMPT, max_new_tokens=3, stream=True, details=True))

    events = await asyncio.to_thread(stream)
    assert [e.token.text for e in events] == [" the", " quick", " brown"]
    assert events[-1].generated_text == " the quick brown"
    assert events[-1].details is not None and events[-1].details.finish_reason == "length"

    tokens = await asyncio.to_thread(lambda: list(client.text_generation(PROMPT, max_new_tokens=2, stream=True)))
    assert tokens == [" the", " quick"]


async def test_openai_completions_stream_against_tgi_carries_tgi_chunk_fields(tgi_url: str) -> None:
    # TGI's router (router/src/server.rs, completions): every chunk is tagged "object": "text_completion",
    # tokens before the last have finish_reason "" and the last one carries the reason and the usage.
    async with openai.AsyncOpenAI(base_url=f"{tgi_url}/v1", api_key="none", max_retries=0) as client:
        stream = await client.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=3, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
    assert [c.object for c in chunks] == ["text_completion"] * 3
    assert [c.choices[0].finish_reason for c in chunks] == ["", "", "length"]
    assert "".join(c.choices[0].text for c in chunks) == " the quick brown"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3


# --- cold start ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", [Engine.VLLM, Engine.TGI])
async def test_cold_start_refuses_connections_until_the_model_is_loaded(engine: Engine) -> None:
    async with (
        running_server(config(engine, cold_start_s=1.5)) as (server, url),
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=5) as client,
    ):
        host, port = url.removeprefix("http://").split(":")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=1).close()
        with pytest.raises(openai.APIConnectionError):
            await client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1)
        await asyncio.sleep(1.5 - server.now() + 0.1)
        done = await client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1)
        assert done.choices[0].text == " the"
