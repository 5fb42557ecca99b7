"""Closed-loop validation on a cluster: a step in load against one InferenceService.

The open-loop client sends a step (base rate, then a peak, then the base rate again)
through the service's endpoint while a watcher reads the Deployment and the
InferenceService status every second. The run passes when

- the replicas rise after the step,
- the client's p95 TTFT (over a sliding window) returns under the service's SLO within
  ``--recover-within`` seconds of the step and stays there until the peak ends,
- the replicas fall after the load drops, and
- no request fails (scale-down included: the base load keeps flowing while it happens).

Usage (the local cluster's demo does this):
    python -m harness.validate --namespace default --name chat --url http://127.0.0.1:PORT --json r.json --png r.png
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.cli.argtypes import png_path
from loadgen.client.report import CostModel, build_report, write_json, write_png
from loadgen.client.runner import (
    ClientConfig,
    Measurement,
    RequestRecord,
    RunResult,
    StreamingClient,
    TargetUnreachable,
    run_open_loop,
)
from loadgen.traffic.shapes import Fixed, Step, build_schedule

WINDOW_SECONDS = 10.0  # the client-side p95 TTFT is over requests sent in the last 10 s


@dataclass
class Sample:
    t: float
    replicas: int
    ready: int
    ttft_status: float | None
    queue: float | None


@dataclass
class Watcher:
    """Reads the Deployment and the InferenceService once a second with kubectl."""

    kubectl: list[str]
    namespace: str
    name: str
    samples: list[Sample] = field(default_factory=list)

    def get(self, kind: str) -> dict[str, Any]:
        out = subprocess.run(
            [*self.kubectl, "-n", self.namespace, "get", kind, self.name, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return dict(json.loads(out.stdout))

    def sample(self, t: float) -> Sample:
        deployment = self.get("deployment")
        status = self.get("inferenceservice").get("status") or {}
        signals = status.get("signals") or {}
        sample = Sample(
            t=t,
            replicas=int(deployment["spec"].get("replicas") or 0),
            ready=int((deployment.get("status") or {}).get("readyReplicas") or 0),
            ttft_status=signals.get("ttftP95Seconds"),
            queue=signals.get("queueDepth"),
        )
        self.samples.append(sample)
        return sample

    def replicas_at(self, t: float) -> float | None:
        before = [s.replicas for s in self.samples if s.t <= t]
        return float(before[-1]) if before else None


def windowed_p95(records: Sequence[RequestRecord], end: float, window: float = WINDOW_SECONDS) -> float | None:
    """p95 TTFT of the requests sent in (end - window, end]; a request still waiting counts with
    its wait so far, so a stalled queue shows at once."""
    ttfts = []
    for rec in records:
        if rec.sent is None or not end - window < rec.sent <= end:
            continue
        if rec.ttft is not None:
            ttfts.append(rec.ttft)
        elif rec.error is None:
            ttfts.append(end - rec.sent)
    if not ttfts:
        return None
    ttfts.sort()
    return ttfts[min(len(ttfts) - 1, math.ceil(0.95 * len(ttfts)) - 1)]


@dataclass
class Verdict:
    passed: bool
    checks: dict[str, bool]
    figures: dict[str, Any]

    def lines(self) -> list[str]:
        out = [f"{'PASS' if ok else 'FAIL'}  {name}" for name, ok in self.checks.items()]
        out += [f"      {key} = {value}" for key, value in self.figures.items()]
        return out


def judge(
    records: Sequence[RequestRecord],
    samples: Sequence[Sample],
    *,
    slo: float,
    step_at: float,
    step_until: float,
    recover_within: float,
) -> Verdict:
    """The pass/fail rules of the module docstring, from what the client and the watcher saw."""
    before = [s.replicas for s in samples if s.t <= step_at] or [0]
    during = [s.replicas for s in samples if step_at < s.t <= step_until + 5] or [0]
    after = [s for s in samples if s.t > step_until]
    start_replicas, peak_replicas = before[-1], max(during)
    final_replicas = after[-1].replicas if after else peak_replicas

    recovered_at: float | None = None
    t = step_at + 1
    while t <= step_until:
        p95 = windowed_p95(records, t)
        if p95 is not None and p95 <= slo:
            if recovered_at is None:
                recovered_at = t
        else:
            recovered_at = None  # must stay under the SLO once it got there
        t += 1
    failed = [r for r in records if r.error is not None]
    checks = {
        "replicas rose after the step": peak_replicas > start_replicas,
        f"p95 TTFT back under the SLO ({slo:g}s) within {recover_within:g}s of the step": recovered_at is not None
        and recovered_at - step_at <= recover_within,
        "replicas fell after the load dropped": final_replicas < peak_replicas,
        "no request failed": not failed,
    }
    figures = {
        "replicas_before_step": start_replicas,
        "replicas_peak": peak_replicas,
        "replicas_final": final_replicas,
        "ttft_recovered_after_s": None if recovered_at is None else round(recovered_at - step_at, 1),
        "requests": len(records),
        "failed": len(failed),
        "failures": sorted({f"{r.error}: {r.detail}" for r in failed})[:5],
    }
    return Verdict(all(checks.values()), checks, figures)


def _row(t: float, rate: float, records: Sequence[RequestRecord], sample: Sample | None) -> str:
    in_flight = sum(1 for r in records if r.sent is not None and r.finished is None)
    p95 = windowed_p95(records, t)
    replicas = f"{sample.replicas}/{sample.ready}" if sample else "?"
    status_ttft = f"{sample.ttft_status:.2f}" if sample and sample.ttft_status is not None else "-"
    queue = f"{sample.queue:g}" if sample and sample.queue is not None else "-"
    client_ttft = f"{p95:.2f}" if p95 is not None else "-"
    return f"{t:5.0f}s {rate:7.1f} {in_flight:9d} {replicas:>10} {client_ttft:>13} {status_ttft:>13} {queue:>7}"


HEADER = f"{'time':>6} {'req/s':>7} {'in flight':>9} {'replicas':>10} {'p95 TTFT':>13} {'status TTFT':>13} {'queue':>7}"


class _Live:
    """A progress hook that keeps the running measurement, so the live table can read it."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []

    def update(self, elapsed: float, measurement: Measurement) -> None:
        self.records = measurement.records

    def close(self) -> None:
        pass


async def run_validation(args: argparse.Namespace, watcher: Watcher) -> tuple[RunResult, list[Sample]]:
    shape = Step(rate=args.base_rate, peak_rate=args.peak_rate, at=args.step_at, until=args.step_until)
    schedule = build_schedule(
        shape, args.duration, prompt=Fixed(args.prompt_tokens), output=Fixed(args.output_tokens), seed=args.seed
    )
    stop_watching = asyncio.Event()
    live = _Live()

    async def watch(t0: float) -> None:
        print(HEADER, flush=True)
        while not stop_watching.is_set():
            t = time.perf_counter() - t0
            try:
                sample: Sample | None = await asyncio.to_thread(watcher.sample, t)
            except (subprocess.SubprocessError, json.JSONDecodeError, KeyError):
                sample = None
            rate = args.peak_rate if args.step_at <= t < args.step_until else args.base_rate
            print(_row(t, rate, live.records, sample), flush=True)
            await asyncio.sleep(max(0.0, args.print_every - (time.perf_counter() - t0 - t)))

    async with StreamingClient(ClientConfig(base_url=args.url, timeout=args.request_timeout)) as client:
        await client.preflight()
        t0 = time.perf_counter()
        watcher_task = asyncio.create_task(watch(t0))
        result = await run_open_loop(client, schedule, drain_timeout=args.request_timeout, progress=live)
        # Keep watching (the base load has ended) until the replicas fall, or the wait runs out.
        deadline = time.perf_counter() + args.scale_down_wait
        peak = max((s.replicas for s in watcher.samples), default=0)
        while time.perf_counter() < deadline:
            if watcher.samples and watcher.samples[-1].replicas < peak:
                break
            await asyncio.sleep(1)
        stop_watching.set()
        await watcher_task
    return result, watcher.samples


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.validate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--name", required=True, help="the InferenceService")
    parser.add_argument("--url", required=True, help="the service's endpoint (base URL of its OpenAI API)")
    parser.add_argument("--kubectl", default="kubectl", help="kubectl command (with --kubeconfig if needed)")
    parser.add_argument("--base-rate", type=float, default=2.0)
    parser.add_argument("--peak-rate", type=float, default=16.0)
    parser.add_argument("--step-at", type=float, default=20.0)
    parser.add_argument("--step-until", type=float, default=90.0)
    parser.add_argument("--duration", type=float, default=130.0)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recover-within", type=float, default=45.0, help="seconds after the step")
    parser.add_argument("--scale-down-wait", type=float, default=60.0, help="seconds to wait for replicas to fall")
    parser.add_argument("--slo-ttft", type=float, help="default: the InferenceService's spec.scaling.ttftP95Seconds")
    parser.add_argument("--request-timeout", type=float, default=120.0)
    parser.add_argument("--print-every", type=float, default=2.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--png", type=png_path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    watcher = Watcher(args.kubectl.split(), args.namespace, args.name)
    try:
        isvc = watcher.get("inferenceservice")
    except subprocess.CalledProcessError as error:
        print(
            f"validate: cannot read InferenceService {args.namespace}/{args.name}: {error.stderr.strip()}",
            file=sys.stderr,
        )
        return 2
    slo = args.slo_ttft or float(isvc["spec"]["scaling"]["ttftP95Seconds"])
    try:
        result, samples = asyncio.run(run_validation(args, watcher))
    except TargetUnreachable as error:
        print(f"validate: {error}", file=sys.stderr)
        return 1
    verdict = judge(
        result.measurement.records,
        samples,
        slo=slo,
        step_at=args.step_at,
        step_until=args.step_until,
        recover_within=args.recover_within,
    )
    print()
    print("\n".join(verdict.lines()))
    report = build_report(
        result,
        target=args.url,
        model=None,
        workload={
            "description": f"step {args.base_rate:g} -> {args.peak_rate:g} req/s at {args.step_at:g}s "
            f"until {args.step_until:g}s, {args.prompt_tokens} prompt / {args.output_tokens} output tokens"
        },
        cost=CostModel(replicas=watcher.replicas_at),
        slo_ttft=slo,
        include_records=False,
    )
    report["validation"] = {"passed": verdict.passed, "checks": verdict.checks, **verdict.figures}
    report["replica_samples"] = [s.__dict__ for s in samples]
    if args.json:
        print(f"report: {write_json(report, args.json)}")
    if args.png:
        print(f"plot:   {write_png(report, args.png, title=f'{args.namespace}/{args.name}: step in load')}")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
