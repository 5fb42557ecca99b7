"""The simulated engine's /metrics: vLLM's and TGI's names, types, labels and buckets, fed by the runtime."""

from __future__ import annotations

import itertools
import math

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from loadgen.engine.metrics import TgiMetrics, VllmMetrics, tgi_duration_buckets, vllm_1_2_5_buckets
from loadgen.engine.profiles import TEST_PROFILE
from loadgen.engine.runtime import EngineRuntime


def families(text: str) -> dict[str, tuple[str, list[Sample]]]:
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(text)}


def bucket_bounds(samples: list[Sample]) -> list[float]:
    return [float(s.labels["le"]) for s in samples if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"]


def vllm_runtime(version: str = "0.11") -> EngineRuntime:
    metrics = VllmMetrics(
        model_name="m", max_model_len=TEST_PROFILE.max_model_len, block_size=16, num_gpu_blocks=1024, version=version
    )
    return EngineRuntime(TEST_PROFILE, metrics)


def drive(runtime: EngineRuntime, *, prompt: int = 100, max_tokens: int = 10, n: int = 1) -> None:
    for _ in range(n):
        runtime.submit(prompt, max_tokens, now=0.0)
    while (t := runtime.next_event_time()) is not None:
        runtime.advance(t)


VLLM_CORE = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:num_preemptions": "counter",
}


@pytest.mark.parametrize(
    ("version", "present", "absent"),
    [
        (
            "0.10",
            {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"},
            {"vllm:inter_token_latency_seconds"},
        ),
        (
            "0.11",
            {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"},
            {"vllm:gpu_cache_usage_perc"},
        ),
        ("0.12", {"vllm:inter_token_latency_seconds"}, {"vllm:time_per_output_token_seconds"}),
    ],
)
def test_vllm_metric_names_follow_the_chosen_release(version: str, present: set[str], absent: set[str]) -> None:
    runtime = vllm_runtime(version)
    drive(runtime)
    body, content_type = runtime.render_metrics(runtime.model.now)
    assert content_type.startswith("text/plain")
    found = families(body.decode())
    for name, kind in VLLM_CORE.items():
        assert found[name][0] == kind, name
    assert present <= found.keys()
    assert not absent & found.keys()


def test_vllm_series_carry_model_name_and_engine_labels_and_vllm_buckets() -> None:
    runtime = vllm_runtime()
    drive(runtime, prompt=100, max_tokens=10, n=3)
    text = runtime.render_metrics(runtime.model.now)[0].decode()
    found = families(text)
    _, ttft = found["vllm:time_to_first_token_seconds"]
    assert all(s.labels["model_name"] == "m" and s.labels["engine"] == "0" for s in ttft)
    assert bucket_bounds(ttft) == [
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
        40.0, 80.0, 160.0, 640.0, 2560.0,
    ]  # fmt: skip
    assert bucket_bounds(found["vllm:e2e_request_latency_seconds"][1])[-3:] == [960.0, 1920.0, 7680.0]
    assert bucket_bounds(found["vllm:request_prompt_tokens"][1]) == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000]
    [count] = [s.value for s in ttft if s.name.endswith("_count")]
    assert count == 3
    success = {
        s.labels["finished_reason"]: s.value for s in found["vllm:request_success"][1] if s.name.endswith("_total")
    }
    assert success == {"stop": 0, "length": 3, "abort": 0}
    assert "vllm:num_preemptions_total{" in text  # counters gain _total, as prometheus_client renders them
    [generated] = [s.value for s in found["vllm:generation_tokens"][1] if s.name.endswith("_total")]
    assert generated == 30
    [itl_count] = [s.value for s in found["vllm:inter_token_latency_seconds"][1] if s.name.endswith("_count")]
    assert itl_count == 3 * 9  # one gap per token after the first


def test_vllm_ttft_histogram_records_the_model_timing() -> None:
    runtime = vllm_runtime()
    drive(runtime, prompt=1000, max_tokens=5)
    found = families(runtime.render_metrics(runtime.model.now)[0].decode())
    [ttft_sum] = [s.value for s in found["vllm:time_to_first_token_seconds"][1] if s.name.endswith("_sum")]
    assert ttft_sum == pytest.approx(TEST_PROFILE.prefill_time(1000))


def test_vllm_gauges_show_running_waiting_and_kv_usage() -> None:
    runtime = vllm_runtime()
    for _ in range(TEST_PROFILE.max_num_seqs + 3):
        runtime.submit(500, 100, now=0.0)
    runtime.advance(0.001)
    found = families(runtime.render_metrics(0.001)[0].decode())

    def gauge(name: str) -> float:
        [value] = [s.value for s in found[name][1]]
        return value

    assert gauge("vllm:num_requests_running") == TEST_PROFILE.max_num_seqs
    assert gauge("vllm:num_requests_waiting") == 3
    blocks = TEST_PROFILE.max_num_seqs * math.ceil(500 / 16)
    assert gauge("vllm:kv_cache_usage_perc") == pytest.approx(blocks / TEST_PROFILE.kv_blocks)


def test_vllm_1_2_5_buckets_match_vllm() -> None:
    assert vllm_1_2_5_buckets(100) == [1, 2, 5, 10, 20, 50, 100]
    assert vllm_1_2_5_buckets(8192)[-1] == 5000


def tgi_runtime() -> EngineRuntime:
    metrics = TgiMetrics(max_input_tokens=2047, max_total_tokens=2048, max_batch_total_tokens=16384)
    return EngineRuntime(TEST_PROFILE, metrics)


def test_tgi_metrics_use_tgi_names_types_and_no_total_suffix() -> None:
    runtime = tgi_runtime()
    runtime.metrics.request_received()
    drive(runtime, prompt=100, max_tokens=10)
    text = runtime.render_metrics(runtime.model.now)[0].decode()
    found = families(text)
    expected = {
        "tgi_queue_size": "gauge",
        "tgi_batch_current_size": "gauge",
        "tgi_batch_current_max_tokens": "gauge",
        "tgi_request_count": "counter",
        "tgi_request_success": "counter",
        "tgi_request_duration": "histogram",
        "tgi_request_queue_duration": "histogram",
        "tgi_request_inference_duration": "histogram",
        "tgi_request_mean_time_per_token_duration": "histogram",
        "tgi_batch_inference_duration": "histogram",
        "tgi_request_input_length": "histogram",
        "tgi_request_generated_tokens": "histogram",
    }
    for name, kind in expected.items():
        assert found[name][0] == kind, name
    lines = text.splitlines()
    assert "tgi_request_success 1" in lines and "tgi_request_count 1" in lines  # metrics-rs: no _total
    assert not any(line.split(" ")[0].split("{")[0].endswith("_total") for line in lines)
    methods = {s.labels.get("method") for s in found["tgi_batch_inference_duration"][1]}
    assert methods == {"prefill", "decode"}
    assert 'tgi_request_duration_bucket{le="0.00015000000000000001"} 0' in lines
    generated = [s for s in found["tgi_request_generated_tokens"][1] if s.name.endswith("_sum")]
    assert generated[0].value == 10


def test_tgi_bucket_layouts_match_the_router() -> None:
    duration = tgi_duration_buckets()
    assert len(duration) == 35
    assert duration[0] == pytest.approx(0.00015)
    assert all(b / a == pytest.approx(1.5) for a, b in itertools.pairwise(duration))
    runtime = tgi_runtime()
    found = families(runtime.render_metrics(0.0)[0].decode())
    assert len(bucket_bounds(found["tgi_request_queue_duration"][1])) == 35
    inputs = bucket_bounds(found["tgi_request_input_length"][1])
    assert len(inputs) == 100 and inputs[0] == pytest.approx(20.47) and inputs[-1] == pytest.approx(2047)
    totals = bucket_bounds(found["tgi_request_generated_tokens"][1])
    assert totals[-1] == pytest.approx(2048)
    assert bucket_bounds(found["tgi_batch_next_size"][1])[:3] == [1, 2, 3]


def test_tgi_queue_duration_reflects_time_waiting_for_a_slot() -> None:
    runtime = tgi_runtime()
    drive(runtime, prompt=10, max_tokens=200, n=TEST_PROFILE.max_num_seqs + 1)
    found = families(runtime.render_metrics(runtime.model.now)[0].decode())
    [queue_sum] = [s.value for s in found["tgi_request_queue_duration"][1] if s.name.endswith("_sum")]
    assert queue_sum > 200 * TEST_PROFILE.decode_step_s  # the last one waited for a whole request
