"""SLOs and goodput from fixed records: the spellings accepted, what a request must meet, what is counted."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from loadgen.client.report import build_report, format_summary, summary_path, write_requests_csv, write_summary_csv
from loadgen.client.runner import Measurement, RequestRecord, RunResult
from loadgen.client.slo import Slos, parse_slos


def test_slos_take_inference_perf_and_vllm_spellings() -> None:
    assert parse_slos("ttft=0.5,itl=0.05,e2e=10") == Slos((("ttft", 0.5), ("itl", 0.05), ("e2e", 10.0)))
    # vLLM's benchmark_serving keys and separator (it reads bare numbers as ms: here the unit is written out)
    assert parse_slos("ttft:500ms tpot:50ms e2el:10s") == Slos((("ttft", 0.5), ("tpot", 0.05), ("e2e", 10.0)))
    assert parse_slos("request_latency=2").get("e2e") == 2.0
    with pytest.raises(ValueError, match="reads as 500 seconds; write 500ms"):
        parse_slos("ttft=500")
    with pytest.raises(ValueError, match="'p99' is unknown; use one of ttft, tpot, itl, e2e"):
        parse_slos("p99=1")
    with pytest.raises(ValueError, match="is not METRIC=SECONDS"):
        parse_slos("ttft")


def rec(i: int, ttft: float, gaps: list[float], *, error: str | None = None) -> RequestRecord:
    r = RequestRecord(i, float(i), prompt_tokens=100, max_tokens=len(gaps) + 1, sent=float(i))
    if error is not None:
        r.error, r.finished = error, i + 0.1
        return r
    r.first_token = i + ttft
    r.finished = r.first_token + sum(gaps)
    r.chunks = r.output_tokens = len(gaps) + 1
    r.max_itl = max(gaps, default=0.0)
    return r


def test_goodput_counts_requests_meeting_every_slo_and_attainment_of_each() -> None:
    records = [
        rec(0, 0.1, [0.02] * 9),  # good
        rec(1, 0.1, [0.02] * 8 + [0.3]),  # one stall: ITL missed, TPOT (0.051 mean) met
        rec(2, 0.9, [0.02] * 9),  # TTFT missed
        rec(3, 0.1, [0.02] * 9),  # good
        rec(4, 0.0, [], error="http_503"),  # failed: meets nothing
    ]
    result = RunResult(Measurement(records=records), 0.0, 10.0, "completed", 5, 4.0)
    slos = parse_slos("ttft=0.5,itl=0.1,tpot=0.06")
    report = build_report(result, target="t", model=None, workload={}, slos=slos)
    good = report["goodput"]
    assert good["good_requests"] == 2 and good["measured_requests"] == 5
    assert good["requests_per_s"] == pytest.approx(2 / 10.0)
    assert good["output_tokens_per_s"] == pytest.approx(20 / 10.0)
    assert good["attainment"] == pytest.approx(0.4)
    assert good["attainment_by_slo"] == {"ttft": 0.6, "tpot": 0.8, "itl": 0.6}
    text = format_summary(report)
    assert "Goodput (requests meeting every SLO): 0.20 req/s" in text
    assert "itl" in text and "60.0%" in text and "all of them" in text
    # the TTFT-only figures stay where earlier reports had them
    assert report["slo_ttft_s"] == 0.5 and report["slo_attainment"] == pytest.approx(0.6)


def test_csv_has_a_row_per_request_and_a_summary_next_to_it(tmp_path: Path) -> None:
    records = [rec(0, 0.1, [0.02] * 9), rec(1, 0.9, [0.02] * 9), rec(2, 0.0, [], error="timeout")]
    result = RunResult(Measurement(records=records), 0.0, 10.0, "completed", 3, 2.0)
    slos = parse_slos("ttft=0.5")
    report = build_report(result, target="t", model="m", workload={"description": "w"}, slos=slos)
    path = write_requests_csv(records, tmp_path / "r.csv", slos)
    rows = list(csv.DictReader(path.open()))
    assert [r["status"] for r in rows] == ["ok", "ok", "timeout"]
    assert [r["meets_slos"] for r in rows] == ["1", "0", "0"]
    assert float(rows[0]["ttft_s"]) == pytest.approx(0.1) and float(rows[0]["itl_max_s"]) == pytest.approx(0.02)
    assert float(rows[1]["e2e_s"]) == pytest.approx(0.9 + 0.18) and rows[2]["ttft_s"] == ""
    assert summary_path(path) == tmp_path / "r-summary.csv"
    summary = dict(csv.reader(write_summary_csv(report, summary_path(path)).open()))
    assert summary["metric"] == "value"
    assert float(summary["ttft_s.p50"]) == pytest.approx(0.5)
    assert summary["goodput.attainment_by_slo.ttft"] == "0.3333"
    assert summary["requests.failed"] == "1" and summary["model"] == "m"
    assert not any(k.startswith(("timeseries", "records", "notes")) for k in summary)
