"""The ``loadgen`` command line end to end on loopback: reports, exit codes and messages, the knee finder."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness.processes import free_port
from inferscale.promql import VLLM_REQUEST_SUCCESS

from loadgen.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, main
from tests.integration.loadgen.conftest import ROOT, StartEngine


def test_run_replays_a_trace_and_writes_json_and_png(
    simengine: StartEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = simengine("--profile", "test")
    trace = tmp_path / "trace.csv"
    rows = "".join(f"2023-11-16 18:17:{i // 10:02d}.{i % 10}000000,{20 + i},{4 + i % 5}\n" for i in range(40))
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        ["run", url, "--trace", str(trace), "--speedup", "2", "--warmup", "0.5", "--json", str(out_json),
         "--png", str(out_png), "--price-per-gpu-hour", "2.0", "--replicas", "2", "--no-progress"]
    )  # fmt: skip
    assert code == EXIT_OK
    report = json.loads(out_json.read_text())
    assert report["status"] == "completed" and report["workload"]["kind"] == "trace"
    assert report["requests"] == {
        "scheduled": 40, "sent": 40, "warmup_excluded": 10, "measured": 30, "succeeded": 30, "failed": 0
    }  # fmt: skip
    assert len(report["records"]) == 40
    assert report["throughput"]["output_tokens"] == sum(4 + i % 5 for i in range(10, 40))
    assert report["cost"]["gpu_seconds"] == pytest.approx(2 * report["window"]["seconds"], rel=0.01)
    assert report["cost"]["cost_per_million_output_tokens"] > 0
    assert {"t", "sent", "in_flight", "ttft_p95_s", "replicas"} <= set(report["timeseries"][0])
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    stdout = capsys.readouterr().out
    assert "TTFT" in stdout and "first 0.5s (10 requests)" in stdout


def test_unreachable_target_exits_non_zero_and_still_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(["run", url, "--duration", "2", "--warmup", "0", "--json", str(out_json), "--png", str(out_png)])
    assert code == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"loadgen: error: cannot reach the target {url}: connection refused" in err
    report = json.loads(out_json.read_text())
    assert report["status"] == "failed" and "connection refused" in report["error"]
    assert report["requests"]["scheduled"] > 0 and report["requests"]["sent"] == 0
    assert out_png.exists()


def test_malformed_trace_row_exits_2_naming_the_line_and_keeps_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0.0,10,5\n0.5,ten,5\n")
    out_json = tmp_path / "r.json"
    code = main(["run", "http://127.0.0.1:1", "--trace", str(trace), "--json", str(out_json)])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{trace}: line 3, column ContextTokens: 'ten' is not a whole number" in err
    assert json.loads(out_json.read_text())["status"] == "failed"


def test_server_dying_mid_run_is_counted_and_the_run_finishes(simengine: StartEngine, tmp_path: Path) -> None:
    proc, url = simengine("--profile", "test")
    out_json = tmp_path / "r.json"
    cli = subprocess.Popen(
        [sys.executable, "-m", "loadgen.cli", "run", url, "--shape", "constant", "--rate", "20", "--duration", "3",
         "--warmup", "0", "--prompt-tokens", "8", "--output-tokens", "4", "--json", str(out_json), "--no-progress"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # Killed once the engine has served 20 (about 1 s of the schedule), however long the CLI took to start.
    deadline = time.monotonic() + 20
    while _served(url) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    stdout, _ = cli.communicate(timeout=30)
    assert cli.returncode == EXIT_OK, stdout
    report = json.loads(out_json.read_text())
    assert report["requests"]["sent"] == 60
    assert report["requests"]["succeeded"] >= 15
    assert report["errors"]["by_kind"].get("connection_refused", 0) >= 20


def test_knee_finds_the_ceiling_of_an_engine_with_four_slots(
    simengine: StartEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The A10G profile's 12.5 ms steps keep scheduling jitter small next to the figures being compared.
    _, url = simengine("--profile", "a10g-llama3-8b-awq", "--max-num-seqs", "4")
    out_json = tmp_path / "knee.json"
    code = main(
        ["knee", url, "--levels", "1,2,4,6", "--duration", "2.5", "--warmup", "0.5", "--prompt-tokens", "64",
         "--output-tokens", "32", "--no-progress", "--json", str(out_json)]
    )  # fmt: skip
    assert code == EXIT_OK
    stdout = capsys.readouterr().out
    assert "spec.maxConcurrency: 4" in stdout, stdout
    report = json.loads(out_json.read_text())
    assert report["recommended_max_concurrency"] == 4 and report["knee_found"]
    levels = {lv["concurrency"]: lv for lv in report["levels"]}
    assert sorted(levels) == [1, 2, 4, 6]
    # past the ceiling throughput is flat and requests queue
    assert levels[6]["output_tokens_per_s"] == pytest.approx(levels[4]["output_tokens_per_s"], rel=0.15)
    assert levels[6]["ttft_p95_s"] > 3 * levels[4]["ttft_p95_s"]


def test_console_script_reports_usage_errors() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", "run", "http://127.0.0.1:1", "--shape", "step", "--peak-rate", "5"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == EXIT_USAGE
    assert "--shape step needs --at SECONDS" in done.stderr


def test_interrupting_a_run_keeps_what_was_measured(simengine: StartEngine, tmp_path: Path) -> None:
    _, url = simengine("--profile", "test")
    out_json = tmp_path / "r.json"
    cli = subprocess.Popen(
        [sys.executable, "-m", "loadgen.cli", "run", url, "--shape", "constant", "--rate", "20", "--duration", "60",
         "--warmup", "0", "--prompt-tokens", "8", "--output-tokens", "4", "--json", str(out_json), "--no-progress"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(2.0)
    cli.send_signal(signal.SIGINT)
    cli.communicate(timeout=30)
    assert cli.returncode == EXIT_INTERRUPTED
    report = json.loads(out_json.read_text())
    assert report["status"] == "interrupted"
    assert 10 <= report["requests"]["succeeded"] < 1200
    assert report["requests"]["scheduled"] == 1200


def _samples(url: str, metric: str) -> list[float]:
    """The values of ``metric``'s labelled samples on the engine's ``/metrics``."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(f"{metric}{{")]


def _served(url: str) -> float:
    """The engine's own count of finished requests (``vllm:request_success_total``, summed over reasons)."""
    import urllib.error

    try:
        return sum(_samples(url, VLLM_REQUEST_SUCCESS))
    except (urllib.error.URLError, OSError):
        return 0.0


def prefix_counters(url: str) -> tuple[float, float]:
    [queries] = _samples(url, "vllm:prefix_cache_queries_total")
    [hits] = _samples(url, "vllm:prefix_cache_hits_total")
    return queries, hits


def test_the_engine_finds_a_shared_system_prompt_in_its_cache_and_nothing_of_distinct_prompts(
    simengine: StartEngine, tmp_path: Path
) -> None:
    _, url = simengine("--profile", "test")
    common = ["run", url, "--shape", "constant", "--rate", "20", "--duration", "1", "--warmup", "0",
              "--prompt-tokens", "256", "--output-tokens", "2", "--no-progress", "--json"]  # fmt: skip
    assert main([*common, str(tmp_path / "distinct.json")]) == EXIT_OK
    distinct = json.loads((tmp_path / "distinct.json").read_text())["workload"]
    assert prefix_counters(url) == (20 * 256, 0)
    assert distinct["prompt_tokens_reusable"] == 0
    assert main([*common, str(tmp_path / "shared.json"), "--system-prompt-tokens", "192"]) == EXIT_OK
    shared = json.loads((tmp_path / "shared.json").read_text())["workload"]
    # The first request computes the 192-token system prompt (12 blocks); the other 19 find it cached.
    assert shared["prompt_tokens_reusable"] == 19 * 192
    assert prefix_counters(url) == (40 * 256, 19 * 192)
