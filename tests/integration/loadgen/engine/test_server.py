"""simengine over HTTP on loopback: what a vLLM or TGI client and a Prometheus scrape would see."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.processes import free_port
from inferscale.api import Engine
from prometheus_client.parser import text_string_to_metric_families

from loadgen.engine.model import BatchingMode
from loadgen.engine.profiles import TEST_PROFILE
from loadgen.engine.server import ServerConfig, running_server
from loadgen.engine.tokens import CHAT_TOKENS_FIXED, CHAT_TOKENS_PER_MESSAGE, filler_text

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[4]
MODEL = "sim/llama-3-8b"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def config(engine: Engine, **kw: Any) -> ServerConfig:
    return ServerConfig(engine=engine, profile=TEST_PROFILE, model_name=MODEL, **kw)


async def sse_events(response: httpx.Response) -> list[str]:
    """The ``data`` payloads of a server-sent event stream, in order."""
    payloads = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            payloads.append(line[len("data:") :].lstrip(" "))
    return payloads


@pytest.fixture
async def vllm() -> AsyncIterator[httpx.AsyncClient]:
    async with running_server(config(Engine.VLLM)) as (_, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        yield c


@pytest.fixture
async def tgi() -> AsyncIterator[httpx.AsyncClient]:
    async with running_server(config(Engine.TGI)) as (_, url), httpx.AsyncClient(base_url=url, timeout=10) as c:
        yield c


async def test_vllm_streams_completions_as_sse_chunks_with_usage(vllm: httpx.AsyncClient) -> None:
    body = {
        "model": MODEL,
        "prompt": filler_text(40),
        "max_tokens": 50,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.monotonic()
    async with vllm.stream("POST", "/v1/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        payloads = await sse_events(response)
    elapsed = time.monotonic() - started
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    *tokens, usage = chunks
    assert len(tokens) == 50
    assert {c["object"] for c in tokens} == {"text_completion"}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("cmpl-")
    assert all(c["model"] == MODEL for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 49 + ["length"]
    text = "".join(c["choices"][0]["text"] for c in tokens)
    assert len(text.split()) == 50  # one word per token
    assert usage["choices"] == []
    assert usage["usage"] == {
        "prompt_tokens": 40,
        "completion_tokens": 50,
        "total_tokens": 90,
        "prompt_tokens_details": None,
    }
    # tokens are paced by the engine model against the real clock
    assert elapsed >= 0.9 * TEST_PROFILE.prefill_time(40) + 49 * TEST_PROFILE.decode_step_s * 0.9


async def test_vllm_chat_completions_stream_and_return_full_responses(vllm: httpx.AsyncClient) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": filler_text(30)}]
    async with vllm.stream(
        "POST", "/v1/chat/completions", json={"messages": messages, "max_tokens": 5, "stream": True}
    ) as response:
        payloads = await sse_events(response)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and c["id"].startswith("chatcmpl-") for c in chunks)
    assert len(chunks) == 6 and chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in c for c in chunks)

    response = await vllm.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 7})
    assert response.status_code == 200
    full = response.json()
    assert full["object"] == "chat.completion"
    assert full["choices"][0]["message"]["role"] == "assistant"
    assert len(full["choices"][0]["message"]["content"].split()) == 7
    prompt = CHAT_TOKENS_FIXED + 2 * CHAT_TOKENS_PER_MESSAGE + 2 + 30
    assert full["usage"]["prompt_tokens"] == prompt and full["usage"]["completion_tokens"] == 7

    response = await vllm.post("/v1/completions", json={"prompt": "one two three"})
    assert response.json()["usage"]["completion_tokens"] == 16  # vLLM's default max_tokens


async def test_vllm_refuses_requests_as_vllm_does(vllm: httpx.AsyncClient) -> None:
    too_long = filler_text(TEST_PROFILE.max_model_len + 10)
    response = await vllm.post("/v1/completions", json={"prompt": too_long, "max_tokens": 5})
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "This model's maximum context length is 2048 tokens. However, your request has 2058 input "
            "tokens. Please reduce the length of the input messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    response = await vllm.post("/v1/completions", json={"prompt": filler_text(2000), "max_tokens": 100})
    assert response.status_code == 400
    assert "'max_tokens' or 'max_completion_tokens' is too large: 100" in response.json()["error"]["message"]
    response = await vllm.post("/v1/completions", json={"model": "other", "prompt": "hi", "max_tokens": 1})
    assert response.status_code == 404


async def test_vllm_health_models_and_metrics_scrape(vllm: httpx.AsyncClient) -> None:
    assert (await vllm.get("/health")).status_code == 200
    models = (await vllm.get("/v1/models")).json()
    assert models["data"][0]["id"] == MODEL and models["data"][0]["max_model_len"] == TEST_PROFILE.max_model_len
    await asyncio.gather(*(vllm.post("/v1/completions", json={"prompt": "a b c", "max_tokens": 8}) for _ in range(3)))
    response = await vllm.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    found = {f.name: f for f in text_string_to_metric_families(response.text)}
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:request_success",
        "vllm:num_preemptions",
    ):
        assert name in found, name
    [ttft_count] = [s.value for s in found["vllm:time_to_first_token_seconds"].samples if s.name.endswith("_count")]
    assert ttft_count == 3
    assert all(s.labels["model_name"] == MODEL for s in found["vllm:num_requests_running"].samples)


async def test_tgi_generate_stream_emits_tgi_token_events(tgi: httpx.AsyncClient) -> None:
    body = {"inputs": filler_text(12), "parameters": {"max_new_tokens": 6, "details": True}}
    async with tgi.stream("POST", "/generate_stream", json=body) as response:
        assert response.status_code == 200
        raw = [line async for line in response.aiter_lines() if line]
    assert all(line.startswith("data: {") for line in raw)  # axum's sse::Event writes "data: "
    events = [json.loads(line[len("data: ") :]) for line in raw]
    assert [e["index"] for e in events] == [1, 2, 3, 4, 5, 6]
    assert all(set(e["token"]) == {"id", "text", "logprob", "special"} for e in events)
    assert [e["generated_text"] for e in events[:-1]] == [None] * 5
    last = events[-1]
    assert last["generated_text"] == "".join(e["token"]["text"] for e in events)
    assert last["details"] == {"finish_reason": "length", "generated_tokens": 6, "seed": None, "input_length": 12}


async def test_tgi_generate_info_openai_routes_and_validation(tgi: httpx.AsyncClient) -> None:
    response = await tgi.post("/generate", json={"inputs": "a b c", "parameters": {"max_new_tokens": 4}})
    assert response.status_code == 200
    assert len(response.json()["generated_text"].split()) == 4
    assert response.headers["x-generated-tokens"] == "4"
    info = (await tgi.get("/info")).json()
    assert info["model_id"] == MODEL and info["max_total_tokens"] == TEST_PROFILE.max_model_len

    response = await tgi.post("/generate", json={"inputs": filler_text(3000), "parameters": {"max_new_tokens": 4}})
    assert response.status_code == 422
    assert response.json() == {
        "error": "Input validation error: `inputs` must have less than 2047 tokens. Given: 3000",
        "error_type": "validation",
    }

    chat = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3, "stream": True}
    async with tgi.stream("POST", "/v1/chat/completions", json=chat) as response:
        payloads = await sse_events(response)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert len(chunks) == 3 and chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == "chat.completion.chunk" and "system_fingerprint" in c for c in chunks)

    response = await tgi.post("/v1/completions", json={"prompt": "a b", "max_tokens": 2})
    assert response.json()["usage"]["completion_tokens"] == 2

    metrics = (await tgi.get("/metrics")).text
    found = {f.name: f.type for f in text_string_to_metric_families(metrics)}
    assert found["tgi_request_duration"] == "histogram" and found["tgi_queue_size"] == "gauge"
    assert "tgi_request_count 4" in metrics.splitlines()
    assert 'tgi_request_failure{err="validation"} 1' in metrics.splitlines()


async def test_tgi_answers_429_beyond_max_concurrent_requests() -> None:
    async with (
        running_server(config(Engine.TGI, max_concurrent_requests=2)) as (_, url),
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        body = {"inputs": "a b c", "parameters": {"max_new_tokens": 100}}
        responses = await asyncio.gather(*(client.post("/generate", json=body) for _ in range(4)))
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 200, 429, 429]
        overloaded = next(r for r in responses if r.status_code == 429)
        assert overloaded.json() == {"error": "Model is overloaded", "error_type": "overloaded"}


async def test_not_ready_until_the_cold_start_has_elapsed() -> None:
    async with (
        running_server(config(Engine.VLLM, cold_start_s=1.0)) as (server, url),
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        with pytest.raises(httpx.ConnectError):  # the port refuses connections while the model loads
            await client.get("/health")
        with pytest.raises(httpx.ConnectError):
            await client.get("/metrics")
        await asyncio.sleep(1.0 - server.now() + 0.05)
        assert (await client.get("/health")).status_code == 200


async def test_draining_refuses_new_work_and_finishes_requests_in_flight() -> None:
    async with (
        running_server(config(Engine.VLLM)) as (server, url),
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        body = {"prompt": "a b c", "max_tokens": 120, "stream": True}
        async with client.stream("POST", "/v1/completions", json=body) as response:
            lines = response.aiter_lines()
            await anext(lines)
            server.begin_drain()
            assert (await client.get("/health")).status_code == 503
            assert (await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 1})).status_code == 503
            rest = [line async for line in lines if line.startswith("data:")]
        assert rest[-1] == "data: [DONE]" and len(rest) == 120  # 119 more tokens and [DONE]
        assert await server.wait_drained(1.0)


async def test_naive_mode_serves_the_same_api() -> None:
    async with (
        running_server(config(Engine.VLLM, mode=BatchingMode.NAIVE)) as (_, url),
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        responses = await asyncio.gather(
            *(client.post("/v1/completions", json={"prompt": "a b", "max_tokens": 4 + i}) for i in range(3))
        )
        assert [r.json()["usage"]["completion_tokens"] for r in responses] == [4, 5, 6]


def test_command_line_server_drains_on_sigterm_and_exits_cleanly() -> None:
    port = free_port()
    argv = ["--engine", "vllm", "--profile", "test", "--port", str(port), "--model-name", MODEL, "--dtype=half"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.engine.server", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as client:
            deadline = time.monotonic() + 15
            while True:
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "simengine did not become healthy"
                time.sleep(0.05)
            body = {"prompt": "a b c", "max_tokens": 200, "stream": True}
            with client.stream("POST", "/v1/completions", json=body) as response:
                lines = response.iter_lines()
                assert next(lines).startswith("data: ")
                proc.send_signal(signal.SIGTERM)
                rest = [line for line in lines if line.startswith("data:")]
            assert rest[-1] == "data: [DONE]" and len(rest) == 200
        output, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0, output
        assert "Ignored engine flags the simulator does not model: --dtype=half" in output
        assert "draining 1 request(s) in flight" in output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
