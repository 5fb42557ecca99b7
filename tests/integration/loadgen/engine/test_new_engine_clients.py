"""simengine in SGLang and llama.cpp modes, driven by the clients people point at those servers: the
``openai`` package (both), and plain HTTP on llama.cpp's own ``/completion`` (its usual client: its web UI,
``curl`` and most wrappers post there). Each test asserts what that client's user sees; ``/metrics`` is read
with Prometheus' own parser and must carry the engines' real names, types and labels.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from inferscale.api import Engine
from prometheus_client.parser import text_string_to_metric_families

from loadgen.engine.metrics import SGLANG_TTFT_BUCKETS
from loadgen.engine.profiles import TEST_PROFILE
from loadgen.engine.server import build_parser, config_from_args, running_server
from loadgen.engine.tokens import filler_text
from tests.integration.loadgen.engine.test_clients import MODEL, PROMPT, anyio_backend, config  # noqa: F401

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[Engine.SGLANG, Engine.LLAMACPP])
async def engine_url(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Engine, str]]:
    async with running_server(config(request.param)) as (_, url):
        yield request.param, url


def oai(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=10)


async def test_openai_completions_and_chat_plain_and_streamed(engine_url: tuple[Engine, str]) -> None:
    _, url = engine_url
    async with oai(url) as client:
        full = await client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5)
        assert full.choices[0].text == " the quick brown fox jumps"
        assert full.choices[0].finish_reason == "length"
        assert full.usage is not None and (full.usage.prompt_tokens, full.usage.completion_tokens) == (12, 5)

        stream = await client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, stream=True)
        chunks = [chunk async for chunk in stream]
        assert "".join(c.choices[0].text for c in chunks if c.choices) == " the quick brown fox jumps"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"

        messages: Any = [{"role": "user", "content": PROMPT}]
        chat = await client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3)
        assert chat.choices[0].message.content == " the quick brown"
        streamed = await client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=3, stream=True, stream_options={"include_usage": True}
        )
        parts = [chunk async for chunk in streamed]
        assert parts[0].choices[0].delta.role == "assistant"
        assert "".join(c.choices[0].delta.content or "" for c in parts if c.choices) == " the quick brown"
        assert [c.choices[0].finish_reason for c in parts if c.choices][-1] == "length"
        assert any(c.usage is not None and c.usage.completion_tokens == 3 for c in parts)


async def test_openai_stop_sequence_ends_with_finish_reason_stop(engine_url: tuple[Engine, str]) -> None:
    _, url = engine_url
    async with oai(url) as client:
        full = await client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=50, stop=["fox"])
    assert (full.choices[0].text, full.choices[0].finish_reason) == (" the quick brown ", "stop")


async def test_openai_sees_each_engines_context_error(engine_url: tuple[Engine, str]) -> None:
    engine, url = engine_url
    too_long = filler_text(TEST_PROFILE.max_model_len + 10)
    async with oai(url) as client:
        with pytest.raises(openai.BadRequestError) as error:
            await client.completions.create(model=MODEL, prompt=too_long, max_tokens=5)
    body = error.value.response.json()
    if engine is Engine.SGLANG:
        assert body["object"] == "error" and "longer than the model's context length" in body["message"]
    else:
        assert body["error"]["type"] == "exceed_context_size_error"
        assert body["error"]["n_ctx"] == TEST_PROFILE.max_model_len


async def test_sglang_model_info_and_models() -> None:
    async with running_server(config(Engine.SGLANG)) as (_, url), httpx.AsyncClient(base_url=url) as http:
        info = (await http.get("/get_model_info")).json()
        assert (info["model_path"], info["is_generation"]) == (MODEL, True)
        models = (await http.get("/v1/models")).json()
        assert models["data"][0]["owned_by"] == "sglang"
        assert (await http.get("/health")).status_code == 200


async def test_llamacpp_own_completion_endpoint_plain_and_streamed() -> None:
    async with running_server(config(Engine.LLAMACPP)) as (_, url), httpx.AsyncClient(base_url=url) as http:
        full = (await http.post("/completion", json={"prompt": PROMPT, "n_predict": 4})).json()
        assert (full["content"], full["stop"], full["stop_type"]) == (" the quick brown fox", True, "limit")
        assert (full["tokens_predicted"], full["tokens_evaluated"]) == (4, 12)
        assert full["timings"]["predicted_n"] == 4

        async with http.stream("POST", "/completion", json={"prompt": PROMPT, "n_predict": 3, "stream": True}) as r:
            events = [json.loads(line[6:]) async for line in r.aiter_lines() if line.startswith("data: ")]
        assert "".join(e["content"] for e in events) == " the quick brown"
        assert [e["stop"] for e in events] == [False, False, False, True]  # no [DONE] on /completion
        assert events[-1]["timings"]["predicted_n"] == 3

        stopped = (await http.post("/completion", json={"prompt": PROMPT, "n_predict": 50, "stop": ["fox"]})).json()
        assert (stopped["content"], stopped["stop_type"], stopped["stopping_word"]) == (
            " the quick brown ",
            "word",
            "fox",
        )
        assert (await http.get("/health")).json() == {"status": "ok"}


async def test_llamacpp_answers_503_loading_model_until_loaded() -> None:
    async with (
        running_server(config(Engine.LLAMACPP, cold_start_s=1.0)) as (server, url),
        httpx.AsyncClient(base_url=url) as http,
    ):
        loading = await http.get("/health")
        assert loading.status_code == 503
        assert loading.json() == {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
        refused = await http.post("/completion", json={"prompt": PROMPT, "n_predict": 1})
        assert refused.status_code == 503
        await asyncio.sleep(1.0 - server.now() + 0.1)
        assert (await http.get("/health")).status_code == 200


def _families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


async def test_sglang_metrics_carry_the_real_names_labels_and_buckets() -> None:
    async with running_server(config(Engine.SGLANG)) as (_, url), httpx.AsyncClient(base_url=url) as http:
        await http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 4})
        families = _families((await http.get("/metrics")).text)
    assert families["sglang:num_queue_reqs"].type == "gauge"
    [running] = families["sglang:num_running_reqs"].samples
    assert running.labels == {
        "model_name": MODEL, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0",
    }  # fmt: skip
    ttft = families["sglang:time_to_first_token_seconds"]
    bounds = [float(s.labels["le"]) for s in ttft.samples if s.name.endswith("_bucket")]
    assert bounds == [*map(float, SGLANG_TTFT_BUCKETS), float("inf")]
    assert families["sglang:queue_time_seconds"].type == "histogram"
    assert families["sglang:num_requests"].type == "counter"  # exposed as sglang:num_requests_total
    [requests] = [s for s in families["sglang:num_requests"].samples if s.name == "sglang:num_requests_total"]
    assert (requests.labels, requests.value) == ({"model_name": MODEL}, 1.0)
    [generated] = [s for s in families["sglang:generation_tokens"].samples if s.name.endswith("_total")]
    assert generated.value == 4


async def test_llamacpp_metrics_are_unlabelled_counters_and_gauges_only() -> None:
    async with running_server(config(Engine.LLAMACPP)) as (_, url), httpx.AsyncClient(base_url=url) as http:
        await http.post("/completion", json={"prompt": PROMPT, "n_predict": 4})
        response = await http.get("/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4"
    families = _families(response.text)
    assert {name: f.type for name, f in families.items()} == {
        "llamacpp:prompt_tokens": "counter",
        "llamacpp:prompt_seconds": "counter",
        "llamacpp:tokens_predicted": "counter",
        "llamacpp:tokens_predicted_seconds": "counter",
        "llamacpp:n_decode": "counter",
        "llamacpp:n_tokens_max": "counter",
        "llamacpp:n_busy_slots_per_decode": "counter",
        "llamacpp:prompt_tokens_seconds": "gauge",
        "llamacpp:predicted_tokens_seconds": "gauge",
        "llamacpp:requests_processing": "gauge",
        "llamacpp:requests_deferred": "gauge",
    }
    values = {s.name: s.value for f in families.values() for s in f.samples}
    assert all(not s.labels for f in families.values() for s in f.samples)
    assert (values["llamacpp:prompt_tokens_total"], values["llamacpp:tokens_predicted_total"]) == (12, 4)


@pytest.mark.parametrize(
    ("engine", "profile", "ttft_ms", "itl_ms"),
    [
        # S1 (AccelMark, SGLang on an A100 40GB, one request at a time): TTFT p50 32.52 ms for a ~290-token
        # prompt, TPOT p50 12.93 ms.
        (Engine.SGLANG, "a100-40gb-llama3-8b-sglang", 32.52, 12.93),
        # L1/L2 (llama-bench on an RTX 3090): 6.39 ms a token alone (156.56 tok/s); a 290-token prompt in one
        # pass of 5.8 ms + 290 / 4,536 tok/s = 69.7 ms.
        (Engine.LLAMACPP, "rtx3090-llama3-8b-q4-llamacpp", 69.7, 6.39),
    ],
)
async def test_each_engine_runs_its_own_profile_and_a_request_sees_its_published_latency(
    engine: Engine, profile: str, ttft_ms: float, itl_ms: float
) -> None:
    # `simengine --engine X` with no --profile runs X's own profile.
    config = config_from_args(build_parser().parse_args(["--engine", engine.value, "--cold-start", "0"]))
    assert config.profile.name == profile
    async with running_server(config) as (_, url), oai(url) as client:
        sent = time.perf_counter()
        stream = await client.completions.create(model=MODEL, prompt=filler_text(290), max_tokens=30, stream=True)
        arrivals = [time.perf_counter() async for chunk in stream if chunk.choices and chunk.choices[0].text]
    assert len(arrivals) == 30
    ttft = (arrivals[0] - sent) * 1e3
    # A loaded test machine only adds (the integration suite runs beside other servers on two cores): the
    # profile's latency is the floor, and the ceiling leaves room for the scheduler.
    assert 0.9 * ttft_ms <= ttft <= ttft_ms + 50
    gaps = [(b - a) * 1e3 for a, b in itertools.pairwise(arrivals)]
    assert 0.9 * itl_ms <= statistics.median(gaps) <= itl_ms + 5
