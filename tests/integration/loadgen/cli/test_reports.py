"""What `loadgen run` shows a platform engineer, end to end against a simengine: goodput over several SLOs,
CSV next to JSON, chat conversations resending their history, the live line's tok/s and schedule lag."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from loadgen.cli import EXIT_OK, main
from loadgen.client.runner import ClientConfig, LiveProgress, Measurement, StreamingClient
from loadgen.traffic.prompts import ChatLayout, PromptMaker, PromptMix
from tests.integration.loadgen.cli.test_measure import prefix_counters
from tests.integration.loadgen.conftest import StartEngine


def test_run_reports_goodput_over_several_slos_and_writes_csv(
    simengine: StartEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One slot on the A10G profile: 20 requests/s of 16 tokens queue behind each other (the engine serves
    # about 4/s), so TTFT grows through the run and only the first requests meet a 150 ms TTFT SLO.
    _, url = simengine("--profile", "a10g-llama3-8b-awq", "--max-num-seqs", "1")
    out = tmp_path / "r.json"
    code = main(
        ["run", url, "--shape", "constant", "--rate", "20", "--duration", "1", "--warmup", "0", "--prompt-tokens",
         "32", "--output-tokens", "16", "--slo", "ttft=150ms,itl=0.1,e2e=60", "--json", str(out), "--csv",
         str(tmp_path / "r.csv"), "--no-progress", "--drain-timeout", "30"]
    )  # fmt: skip
    assert code == EXIT_OK
    report = json.loads(out.read_text())
    good = report["goodput"]
    assert good["slos_s"] == {"ttft": 0.15, "itl": 0.1, "e2e": 60.0}
    assert good["attainment_by_slo"]["e2e"] == 1.0 and good["attainment_by_slo"]["itl"] == 1.0
    assert 0 < good["attainment_by_slo"]["ttft"] < 0.5
    assert good["attainment"] == good["attainment_by_slo"]["ttft"]
    assert good["requests_per_s"] < report["throughput"]["requests_per_s"]
    stdout = capsys.readouterr().out
    assert "Goodput (requests meeting every SLO)" in stdout and "all of them" in stdout
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(rows) == 20 and {r["status"] for r in rows} == {"ok"}
    assert sum(int(r["meets_slos"]) for r in rows) == good["good_requests"]
    assert all(float(r["ttft_s"]) <= 0.15 for r in rows if r["meets_slos"] == "1")
    summary = dict(csv.reader((tmp_path / "r-summary.csv").open()))
    assert float(summary["goodput.requests_per_s"]) == good["requests_per_s"]


def test_chat_conversations_resend_their_history_as_messages() -> None:
    mix = PromptMix(system_tokens=20, turns=3, conversations=1)
    client = StreamingClient(ClientConfig("http://127.0.0.1:9", model="m", chat=ChatLayout.of(mix, seed=5)))
    maker = PromptMaker(mix, seed=5)
    bodies = []
    for _ in range(3):
        tokens, content = maker.make(30, 8, conversation=0)
        head, _, body = client.body(tokens, 8, content).partition(b"\r\n\r\n")
        assert head.startswith(b"POST /v1/chat/completions HTTP/1.1")
        bodies.append(json.loads(body))
    roles = [[m["role"] for m in b["messages"]] for b in bodies]
    assert roles == [
        ["system", "user"],
        ["system", "user", "assistant", "user"],
        ["system", "user", "assistant", "user", "assistant", "user"],
    ]
    first, third = bodies[0]["messages"], bodies[2]["messages"]
    assert third[:2] == first and len(first[0]["content"].split()) == 20  # history resent word for word
    assert len(third[2]["content"].split()) == 8  # the resent reply is as long as the turn's max_tokens
    assert bodies[0]["max_tokens"] == 8 and bodies[0]["stream"] is True
    # a request of its own is one user message, distinct from every other
    lone = StreamingClient(ClientConfig("http://127.0.0.1:9", model="m", chat=ChatLayout()))
    a, b = (json.loads(lone.body(16, 4).partition(b"\r\n\r\n")[2])["messages"] for _ in range(2))
    assert [m["role"] for m in a] == ["user"] and a != b


def test_chat_run_against_the_engine_finds_the_resent_history_in_its_cache(
    simengine: StartEngine, tmp_path: Path
) -> None:
    _, url = simengine("--profile", "test")
    out = tmp_path / "chat.json"
    code = main(
        ["run", url, "--api", "chat", "--turns", "4", "--conversations", "2", "--shape", "constant", "--rate",
         "10", "--duration", "1", "--warmup", "0", "--prompt-tokens", "48", "--output-tokens", "16",
         "--no-progress", "--json", str(out)]
    )  # fmt: skip
    assert code == EXIT_OK
    report = json.loads(out.read_text())
    assert report["workload"]["api"] == "/v1/chat/completions"
    assert report["requests"]["succeeded"] == 10
    assert report["throughput"]["output_tokens"] == 10 * 16
    queries, hits = prefix_counters(url)
    # 2 conversations of 4 turns then 2 more: 6 of the 10 requests continue one and find its history cached
    assert hits > 0.3 * queries


def test_the_live_line_shows_tokens_per_second_and_schedule_lag() -> None:
    out = io.StringIO()
    progress = LiveProgress(out)
    m = Measurement()
    m.tokens, m.sent, m.done = 500, 10, 8
    for lag in [0.001] * 90 + [0.030] * 10:
        m.live_lag.add(lag)
    progress.update(2.0, m)
    m.tokens = 1500
    progress.update(3.0, m)
    first, second = out.getvalue().splitlines()
    assert "250 tok/s" in first and "lag p99 30" in first
    assert "1,000 tok/s" in second and "lag p99 -" in second  # nothing sent in the last second


def test_sweep_steps_the_rate_up_until_the_engine_saturates_and_reports_the_knee(
    simengine: StartEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two slots on the A10G profile, 24 output tokens of 12.5 ms: one request takes ~0.35 s, so the engine
    # serves about 2 / 0.35 = 5.7 requests/s; 2 and 4 req/s keep up, 8 cannot.
    _, url = simengine("--profile", "a10g-llama3-8b-awq", "--max-num-seqs", "2")
    out = tmp_path / "sweep.json"
    code = main(
        ["sweep", url, "--rates", "2,4,8,16", "--duration", "4", "--warmup", "1", "--prompt-tokens", "32",
         "--output-tokens", "24", "--no-refine", "--no-progress", "--json", str(out), "--csv", str(tmp_path / "s.csv"),
         "--png", str(tmp_path / "s.png")]
    )  # fmt: skip
    assert code == EXIT_OK
    report = json.loads(out.read_text())
    offered = [s["offered_rps"] for s in report["steps"]]
    assert offered == [2, 4, 8]  # stopped at the first saturated step: 16 never ran
    assert report["knee_rps"] == 4 and report["saturation_found"]
    low, knee, high = report["steps"]
    assert low["saturated"] is None and knee["saturated"] is None and high["saturated"]
    assert high["achieved_rps"] < 0.9 * 8 or "queue grew" in high["saturated"]
    # the concurrency at the knee is Little's law: rate x latency, within the engine's two slots
    assert 0.5 < report["knee_concurrency_mean"] <= 2.5
    assert report["knee_concurrency_mean"] == pytest.approx(4 * knee["e2e_p95_s"], rel=0.6)
    stdout = capsys.readouterr().out
    assert "Knee: 4 req/s at" in stdout and "saturated at 8 req/s" in stdout
    # The CSV has a row per step with the JSON's figures and why the last one saturated; the PNG is drawn.
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert [float(r["offered_rps"]) for r in rows] == offered
    assert [float(r["achieved_rps"]) for r in rows] == [s["achieved_rps"] for s in report["steps"]]
    assert rows[0]["saturated"] == "" and rows[-1]["saturated"] == high["saturated"]
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
