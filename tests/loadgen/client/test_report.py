"""Report figures from fixed records: warm-up exclusion, throughput, cost, time series, percentiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.client.report import CostModel, build_report, format_summary, static_replicas, write_json, write_png
from loadgen.client.runner import Measurement, RequestRecord, RunResult
from loadgen.client.stats import LogHistogram, percentile


def record(
    i: int, sent: float, ttft: float, e2e: float, *, warmup: bool = False, error: str | None = None
) -> RequestRecord:
    rec = RequestRecord(i, sent, prompt_tokens=100, max_tokens=10, warmup=warmup, sent=sent + 0.001)
    rec.finished = rec.sent + e2e  # type: ignore[operator]
    if error is None:
        rec.first_token = rec.sent + ttft  # type: ignore[operator]
        rec.output_tokens = rec.chunks = 10
    else:
        rec.error, rec.detail = error, "boom"
    return rec


def result(records: list[RequestRecord], warmup: float, elapsed: float) -> RunResult:
    return RunResult(Measurement(warmup=warmup, records=records), 0.0, elapsed, "completed", len(records), 9.0)


def test_warmup_requests_are_left_out_of_every_figure_and_the_report_says_so() -> None:
    records = [record(i, i * 0.5, ttft=5.0, e2e=6.0, warmup=True) for i in range(4)]  # slow, in warm-up
    records += [record(4 + i, 2 + i * 0.5, ttft=0.1, e2e=1.0) for i in range(16)]
    records.append(record(20, 9.5, ttft=0, e2e=0.2, error="http_503"))
    report = build_report(result(records, 2.0, 12.0), target="t", model="m", workload={"description": "w"})
    assert report["requests"]["warmup_excluded"] == 4
    assert report["requests"]["measured"] == 17
    assert report["requests"]["succeeded"] == 16 and report["requests"]["failed"] == 1
    assert report["ttft_s"]["max"] == pytest.approx(0.1)
    assert report["e2e_s"]["p99"] == pytest.approx(1.0)
    assert report["errors"]["by_kind"] == {"http_503": 1} and report["errors"]["examples"] == {"http_503": "boom"}
    assert report["schedule_lag_s"]["p99"] == pytest.approx(0.001)
    assert report["window"] == {"start_s": 2.0, "end_s": 12.0, "seconds": 10.0}
    assert report["throughput"]["requests_per_s"] == pytest.approx(1.6)
    assert report["throughput"]["output_tokens_per_s"] == pytest.approx(16.0)
    assert "first 2s (4 requests)" in report["notes"][0]
    assert sum(1 for r in report["records"] if r.get("warmup")) == 4
    assert "Warm-up" in format_summary(report)


def test_cost_integrates_replicas_over_the_measured_window() -> None:
    records = [record(i, 1 + i, ttft=0.1, e2e=0.5) for i in range(10)]
    cost = CostModel(replicas=static_replicas(2), gpus_per_replica=1, price_per_gpu_hour=3.6)
    report = build_report(result(records, 1.0, 11.0), target="t", model=None, workload={}, cost=cost)
    assert report["cost"]["gpu_seconds"] == pytest.approx(20.0)
    assert report["cost"]["cost"] == pytest.approx(0.02)
    assert report["cost"]["cost_per_million_output_tokens"] == pytest.approx(0.02 / 100 * 1e6)
    stepped = CostModel(replicas=lambda t: 1 if t < 6 else 3, price_per_gpu_hour=None)
    report = build_report(result(records, 1.0, 11.0), target="t", model=None, workload={}, cost=stepped)
    assert report["cost"]["gpu_seconds"] == pytest.approx(5 * 1 + 5 * 3)
    assert [row["replicas"] for row in report["timeseries"]][:8] == [1, 1, 1, 1, 1, 1, 3, 3]


def test_timeseries_counts_load_in_flight_and_p95_ttft_per_second() -> None:
    records = [record(i, 0.1 * i, ttft=0.05, e2e=1.5) for i in range(20)]  # 10/s for 2 s, each 1.5 s long
    report = build_report(result(records, 0.0, 3.6), target="t", model=None, workload={})
    rows = report["timeseries"]
    assert [r["sent"] for r in rows] == [10, 10, 0, 0]
    assert rows[0]["in_flight"] == 10  # none has finished by t=1
    assert rows[1]["in_flight"] == 15  # the first five (sent before 0.5 s) finished by t=2
    assert rows[3]["in_flight"] == 0
    assert rows[0]["ttft_p95_s"] == pytest.approx(0.05) and rows[2]["ttft_p95_s"] is None


def test_json_and_png_are_written(tmp_path: Path) -> None:
    records = [record(i, 0.2 * i, ttft=0.05 + 0.01 * i, e2e=0.5, warmup=i < 5) for i in range(30)]
    report = build_report(result(records, 1.0, 6.6), target="t", model=None, workload={}, slo_ttft=0.205)
    json_path = write_json(report, tmp_path / "out" / "r.json")
    assert json.loads(json_path.read_text())["requests"]["measured"] == 25
    png = write_png(report, tmp_path / "out" / "r.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["slo_attainment"] == pytest.approx(11 / 25)


def test_percentiles_and_histogram_quantiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([], 50) is None
    hist = LogHistogram()
    for v in values:
        hist.add(v / 1000)
    hist.add(0.0)
    for q in (0.5, 0.95, 0.99):
        assert hist.quantile(q) == pytest.approx(percentile([0.0, *values], q * 100) / 1000, rel=0.025)
    assert hist.count == 101 and hist.max == pytest.approx(0.1)


def test_asking_for_a_png_without_the_plotting_extra_is_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from loadgen import cli
    from loadgen.cli import argtypes

    monkeypatch.setattr(argtypes.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["simulate", "--trace", "t.csv", "--json", "out.json", "--png", "out.png"])
    assert exit_.value.code == 2
    assert "pip install 'inferscale-loadgen[plots]'" in capsys.readouterr().err


def test_the_operator_image_carries_no_plotting_libraries() -> None:
    lock = (Path(__file__).resolve().parents[3] / "requirements.lock").read_text().lower()
    assert "matplotlib" not in lock and "numpy" not in lock


def test_png_draws_a_replicas_panel_only_when_it_carries_information(tmp_path: Path) -> None:
    from loadgen.client.report import replicas_informative

    records = [record(i, 0.2 * i, ttft=0.05 + 0.01 * i, e2e=0.5) for i in range(30)]
    one = build_report(result(records, 0.0, 6.6), target="t", model=None, workload={})
    stepped = build_report(
        result(records, 0.0, 6.6), target="t", model=None, workload={}, cost=CostModel(replicas=lambda t: 1 + (t > 3))
    )
    assert not replicas_informative(one["timeseries"]) and replicas_informative(stepped["timeseries"])
    assert replicas_informative(build_report(
        result(records, 0.0, 6.6), target="t", model=None, workload={}, cost=CostModel(replicas=static_replicas(3))
    )["timeseries"])  # fmt: skip
    import matplotlib.image

    small = matplotlib.image.imread(write_png(one, tmp_path / "one.png"))
    tall = matplotlib.image.imread(write_png(stepped, tmp_path / "two.png"))
    assert tall.shape[0] > small.shape[0]  # one panel more
    # the time series carries what the throughput and ITL panels draw, and the report a TTFT CDF
    assert sum(r["output_tokens_per_s"] for r in one["timeseries"]) == pytest.approx(300, rel=0.01)
    assert one["timeseries"][3]["tpot_p50_s"] is not None
    cdf = one["ttft_cdf_s"]
    assert len(cdf) == 101 and cdf[0] == pytest.approx(0.05) and cdf[-1] == pytest.approx(0.34)
