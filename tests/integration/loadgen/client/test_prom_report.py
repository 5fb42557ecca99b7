"""`loadgen run --prometheus-url`: the engine's own series, scraped by a real Prometheus, land in the report."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loadgen.cli import EXIT_OK, main
from tests.integration.loadgen.conftest import StartEngine


def test_run_reports_the_engines_queue_and_kv_cache_from_prometheus(
    simengine: StartEngine,
    start_prometheus: Any,
    tmp_path: Path,
) -> None:
    # One slot: 8 requests/s of 64 tokens (~0.14 s each on the test profile) queue in the engine.
    _, url = simengine("--profile", "test", "--max-num-seqs", "1")
    prometheus = start_prometheus([{"job_name": "engine", "static_configs": [{"targets": [urlsplit(url).netloc]}]}])
    deadline = time.monotonic() + 20
    while not prometheus.query("vllm:num_requests_running") and time.monotonic() < deadline:
        time.sleep(0.5)
    out = tmp_path / "r.json"
    code = main(
        ["run", url, "--shape", "constant", "--rate", "12", "--duration", "4", "--warmup", "0", "--prompt-tokens",
         "64", "--output-tokens", "64", "--system-prompt-tokens", "48", "--no-progress", "--json", str(out),
         "--png", str(tmp_path / "r.png"), "--prometheus-url", prometheus.url]
    )  # fmt: skip
    assert code == EXIT_OK
    engine = json.loads(out.read_text())["engine_metrics"]
    summary = engine["summary"]
    assert summary["vllm:num_requests_running"]["max"] == 1
    assert summary["vllm:num_requests_waiting"]["max"] >= 3  # the queue the one slot built
    assert 0 < summary["vllm:kv_cache_usage_perc"]["max"] <= 1
    assert summary["vllm:prefix_cache_hit_rate"]["max"] > 0.3  # the shared system prompt, from the counters
    assert "tgi_queue_size" not in summary  # a series no engine exports is left out
    assert len(engine["series"]["vllm:num_requests_waiting"]) >= 2


def test_run_reports_sglang_and_llamacpp_queues_under_their_own_names(
    simengine: StartEngine,
    start_prometheus: Any,
    tmp_path: Path,
) -> None:
    engines = {
        "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
        "llamacpp": ("llamacpp:requests_processing", "llamacpp:requests_deferred"),
    }
    targets = {}
    for engine in engines:
        _, url = simengine("--profile", "test", "--max-num-seqs", "1", f"--engine={engine}")
        targets[engine] = url
    prometheus = start_prometheus(
        [{"job_name": e, "static_configs": [{"targets": [urlsplit(u).netloc]}]} for e, u in targets.items()]
    )
    for running, _ in engines.values():
        deadline = time.monotonic() + 20
        while not prometheus.query(running) and time.monotonic() < deadline:
            time.sleep(0.5)
    for engine, (running, waiting) in engines.items():
        out = tmp_path / f"{engine}.json"
        code = main(
            ["run", targets[engine], "--shape", "constant", "--rate", "12", "--duration", "4", "--warmup", "0",
             "--prompt-tokens", "64", "--output-tokens", "64", "--no-progress", "--json", str(out),
             "--prometheus-url", prometheus.url, "--prometheus-selector", f'job="{engine}"']
        )  # fmt: skip
        assert code == EXIT_OK
        summary = json.loads(out.read_text())["engine_metrics"]["summary"]
        assert summary[running]["max"] == 1, summary
        assert summary[waiting]["max"] >= 3, summary  # the queue the one slot built
        assert not any(name.startswith("vllm:") for name in summary)
