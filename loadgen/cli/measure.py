"""``loadgen run``, ``loadgen knee`` and ``loadgen sweep``: measure a live target, one function per subcommand.

    loadgen run URL --shape poisson --rate 20 --duration 120 --warmup 10 --json out.json --png out.png
    loadgen run URL --trace trace.csv.gz --speedup 4 --trace-window 600 --price-per-gpu-hour 2.5
    loadgen knee URL --levels 1,2,4,8,16,32 --duration 15
    loadgen sweep URL --start-rate 1 --factor 1.5 --duration 20 --slo ttft=0.5,itl=0.05
    loadgen knee URL --prompt-tokens 1024 --system-prompt-tokens 768     # 3/4 of each prompt shared

Each ``add_NAME_parser(subparsers)`` adds a subcommand whose ``func`` is ``cmd_NAME(args) -> int``; the
``loadgen`` parser (``loadgen.cli.main``) lists them. Exit status: ``loadgen.cli.common``'s table. On 1 and
130, and on a malformed trace, the JSON and PNG reports of ``run`` are still written with whatever was gathered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from loadgen.cli.argtypes import non_negative, png_path, positive, slos
from loadgen.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, fail
from loadgen.client import prom_report, rate_sweep
from loadgen.client.knee import DEFAULT_LEVELS, LevelResult, find_knee, format_table, parse_levels, sweep
from loadgen.client.report import (
    CostModel,
    build_report,
    format_summary,
    static_replicas,
    summary_path,
    write_json,
    write_png,
    write_requests_csv,
    write_summary_csv,
)
from loadgen.client.runner import (
    ClientConfig,
    LiveProgress,
    Measurement,
    RunResult,
    StreamingClient,
    TargetUnreachable,
    run_open_loop,
)
from loadgen.client.slo import Slos
from loadgen.traffic.prompts import ChatLayout, PromptMix, apply_mix, reuse_of
from loadgen.traffic.shapes import (
    SHAPES,
    Arrival,
    Burst,
    Constant,
    Diurnal,
    Ramp,
    RateShape,
    Step,
    build_schedule,
    parse_length,
)
from loadgen.traffic.trace import TraceError, read_trace

__all__ = ["add_knee_parser", "add_run_parser", "add_sweep_parser"]

DEFAULT_MAX_REQUESTS = 1_000_000


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text}")
    return int(text)


def _add_target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="base URL of the engine or its Service, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", help="model name to send (default: the first of the target's /v1/models)")
    p.add_argument("--timeout", type=positive, default=300.0, metavar="S", help="per request (default 300)")
    p.add_argument(
        "--api", choices=("completions", "chat"), default="completions", help="/v1/completions with a prompt "
        "(default) or /v1/chat/completions with messages (a conversation resends its history as messages)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no live progress line on stderr")


def _add_prompt_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "prompt content (default: every prompt distinct, so a prefix cache finds nothing to reuse)"
    )
    g.add_argument(
        "--system-prompt-tokens", type=_count, default=0, metavar="N", help="the first N tokens of a prompt are a "
        "system prompt shared by --system-prompt-share of the prompts (prompt lengths stay as drawn)",
    )  # fmt: skip
    g.add_argument("--system-prompt-share", type=non_negative, default=1.0, metavar="F", help="0 to 1 (default 1)")
    g.add_argument(
        "--turns", type=positive, default=1, metavar="T", help="conversations of T turns, each resending its "
        "history (the previous prompt, a reply of its max_tokens, a new message of --prompt-tokens)",
    )  # fmt: skip
    g.add_argument(
        "--conversations", type=positive, default=16, metavar="K", help="run: conversations open at once, each "
        "request continuing one at random (knee: one per in-flight request)",
    )  # fmt: skip


def _add_length_args(g: Any, *, prompt_default: str) -> None:
    """``--prompt-tokens``, ``--output-tokens`` and ``--seed``: what run, knee and sweep draw their requests from."""
    g.add_argument(
        "--prompt-tokens", default=prompt_default, metavar="DIST",
        help=f"N, uniform:LO,HI or lognormal:MEDIAN,SIGMA[,MAX] (default {prompt_default})",
    )  # fmt: skip
    g.add_argument("--output-tokens", default="128", metavar="DIST", help="as --prompt-tokens (default 128)")
    g.add_argument("--seed", type=int, default=0)


def _add_slo_args(g: Any) -> None:
    g.add_argument(
        "--slo", type=slos, metavar="SLOS", help="goodput: requests/s meeting ALL of these, and attainment of each, "
        "e.g. ttft=0.5,itl=0.05,e2e=10 (seconds; 50ms also works; metrics ttft, tpot, itl = longest token gap, e2e)",
    )  # fmt: skip
    g.add_argument("--slo-ttft", type=positive, metavar="S", help="the same as --slo ttft=S")


def _slos(args: argparse.Namespace) -> Slos:
    return (args.slo or Slos()).merged(ttft=args.slo_ttft)


def _prompt_mix(args: argparse.Namespace) -> PromptMix:
    """The ``PromptMix`` the flags ask for; raises ``UsageError`` naming the flag."""
    for flag, value in (("--turns", args.turns), ("--conversations", args.conversations)):
        if value != int(value):
            raise UsageError(f"{flag} must be a whole number >= 1, got {value:g}")
    if args.system_prompt_share > 1:
        raise UsageError(f"--system-prompt-share must be between 0 and 1, got {args.system_prompt_share:g}")
    return PromptMix(
        system_tokens=args.system_prompt_tokens,
        system_share=args.system_prompt_share,
        turns=int(args.turns),
        conversations=int(args.conversations),
    )


def add_run_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="open-loop load from a shape or a trace, with a report",
        description="Send requests at their scheduled times (open loop), stream the answers and report "
        "TTFT, ITL, end-to-end latency, throughput, errors, schedule lag and cost.",
    )
    _add_target_args(p)
    shape = p.add_argument_group("synthetic traffic (when no --trace)")
    shape.add_argument("--shape", choices=SHAPES, default="poisson")
    shape.add_argument("--rate", type=non_negative, default=1.0, metavar="RPS", help="base rate (default 1)")
    shape.add_argument("--peak-rate", type=non_negative, metavar="RPS", help="step/ramp/burst/diurnal peak rate")
    shape.add_argument("--at", type=non_negative, metavar="S", help="step: when it steps up; burst: first burst")
    shape.add_argument("--until", type=positive, metavar="S", help="step: when it steps back down")
    shape.add_argument("--ramp-time", type=positive, metavar="S", help="ramp: seconds to the peak (default: all)")
    shape.add_argument("--period", type=positive, metavar="S", help="burst/diurnal period (default: duration)")
    shape.add_argument("--burst-length", type=positive, metavar="S", help="burst: seconds at the peak rate")
    shape.add_argument("--even", action="store_true", help="evenly spaced arrivals instead of Poisson")
    shape.add_argument("--duration", type=positive, default=60.0, metavar="S", help="seconds of traffic")
    _add_length_args(shape, prompt_default="512")
    trace = p.add_argument_group("trace replay")
    trace.add_argument(
        "--trace", metavar="FILE", help="TIMESTAMP,ContextTokens,GeneratedTokens (.csv or .csv.gz), or a Mooncake "
        "JSON-lines trace (timestamp, input_length, output_length, hash_ids), whose prompts share what it says",
    )  # fmt: skip
    trace.add_argument("--speedup", type=positive, default=1.0, help="replay this many times faster")
    trace.add_argument("--trace-start", type=non_negative, default=0.0, metavar="S", help="skip S s of trace")
    trace.add_argument("--trace-window", type=positive, metavar="S", help="replay S seconds of trace time")
    _add_prompt_args(p)
    p.add_argument("--max-requests", type=_count, default=DEFAULT_MAX_REQUESTS, metavar="N")
    p.add_argument("--warmup", type=non_negative, default=5.0, metavar="S", help="excluded from figures (5)")
    p.add_argument("--drain-timeout", type=non_negative, default=60.0, metavar="S", help="after the last send")
    out = p.add_argument_group("report")
    out.add_argument("--json", metavar="OUT", help="write the JSON report here")
    out.add_argument("--png", type=png_path, metavar="OUT", help="plot load, replicas and p95 TTFT over time here")
    out.add_argument(
        "--csv", metavar="OUT", help="write one row per request here, and the summary next to it (r.csv: r-summary.csv)"
    )
    out.add_argument("--no-records", action="store_true", help="leave per-request records out of the JSON")
    _add_slo_args(out)
    out.add_argument(
        "--prometheus-url", metavar="URL", help="after the run, put the engine's own series from this Prometheus "
        "in the report (vLLM requests running/waiting, KV-cache use, prefix-cache hit rate; TGI queue and batch)",
    )  # fmt: skip
    out.add_argument(
        "--prometheus-selector",
        default="",
        metavar="LABELS",
        help='the engines\' series, e.g. namespace="ml",service="chat"',
    )
    out.add_argument("--price-per-gpu-hour", type=non_negative, metavar="PRICE")
    out.add_argument("--replicas", type=positive, default=1.0, metavar="N", help="replicas serving the target")
    out.add_argument("--gpus-per-replica", type=positive, default=1.0, metavar="G")
    p.set_defaults(func=cmd_run)


def add_knee_parser(sub: Any) -> None:
    p = sub.add_parser(
        "knee",
        help="sweep concurrency against one replica and recommend spec.maxConcurrency",
        description="Closed-loop sweep: hold N requests in flight per level and find the concurrency where "
        "p95 TTFT degrades (more than --ttft-factor x the lowest level's, or over --slo-ttft) or throughput "
        "stops growing (less than --min-scaling of linear): the per-replica ceiling to pin.",
    )
    _add_target_args(p)
    p.add_argument("--levels", default=",".join(map(str, DEFAULT_LEVELS)), help="concurrency levels, e.g. 1,2,4,8")
    p.add_argument("--duration", type=positive, default=10.0, metavar="S", help="measured seconds per level")
    p.add_argument("--warmup", type=non_negative, default=2.0, metavar="S", help="warm-up seconds per level")
    _add_length_args(p, prompt_default="256")
    _add_prompt_args(p)
    p.add_argument("--ttft-factor", type=positive, default=3.0, help="degraded above this x baseline p95 TTFT")
    p.add_argument(
        "--ttft-floor", type=non_negative, default=0.02, metavar="S", help="ignore p95 TTFT rises below this (0.02)"
    )
    p.add_argument("--min-scaling", type=non_negative, default=0.2, help="saturated below this share of linear")
    p.add_argument("--slo-ttft", type=positive, metavar="S", help="also degraded when p95 TTFT exceeds this")
    p.add_argument("--json", metavar="OUT", help="write the levels and the verdict here")
    p.set_defaults(func=cmd_knee)


def add_sweep_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="open-loop Poisson steps at rising request rates until the target saturates: the knee in req/s",
        description="Run open-loop Poisson steps at rising rates (each --warmup + --duration seconds) and stop "
        "at the first saturated one: achieved rate under 90%% of offered, TTFT growing through the step (a "
        "queue), over 1%% errors, or (with --slo) under 90%% of requests meeting the SLOs. Reports the knee in "
        "req/s and the concurrency seen there.",
    )
    _add_target_args(p)
    p.add_argument("--rates", metavar="R1,R2,...", help="the rates to step through (default: geometric, below)")
    p.add_argument("--start-rate", type=positive, default=1.0, metavar="RPS", help="first rate (1)")
    p.add_argument("--factor", type=positive, default=1.5, help="each step's rate over the last one's (1.5)")
    p.add_argument("--max-rate", type=positive, default=1000.0, metavar="RPS", help="highest rate to try (1000)")
    p.add_argument("--max-steps", type=positive, default=15, metavar="N", help="at most N steps (15)")
    p.add_argument("--budget", type=positive, default=600.0, metavar="S", help="stop before overrunning S s (600)")
    p.add_argument("--no-refine", action="store_true", help="no bisection step after the saturated one")
    p.add_argument("--duration", type=positive, default=20.0, metavar="S", help="measured seconds per step (20)")
    p.add_argument("--warmup", type=non_negative, default=5.0, metavar="S", help="warm-up seconds per step (5)")
    _add_length_args(p, prompt_default="512")
    _add_prompt_args(p)
    _add_slo_args(p)
    p.add_argument("--json", metavar="OUT", help="write the steps and the verdict here")
    p.add_argument("--csv", metavar="OUT", help="write one row per step here (its figures and why it saturated)")
    p.add_argument("--png", metavar="OUT", help="plot achieved rate and TTFT against the offered rate here")
    p.set_defaults(func=cmd_sweep)


# --- shared helpers --------------------------------------------------------------------------------


def _raise_fd_limit() -> None:
    """Open-loop runs may hold thousands of connections: lift the soft open-files limit to the hard one."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))


def _install_stop(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


def _shape(args: argparse.Namespace) -> RateShape:
    peak = args.peak_rate
    name = args.shape
    if name in ("constant", "poisson"):
        return Constant(args.rate, poisson=name == "poisson")
    if peak is None:
        raise UsageError(f"--shape {name} needs --peak-rate (the rate it rises to from --rate)")
    if name == "step":
        if args.at is None:
            raise UsageError("--shape step needs --at SECONDS (when the rate steps up to --peak-rate)")
        return Step(args.rate, peak, args.at, args.until)
    if name == "ramp":
        return Ramp(args.rate, peak, args.ramp_time)
    period = args.period if args.period is not None else args.duration
    if name == "burst":
        if args.burst_length is None:
            raise UsageError("--shape burst needs --burst-length SECONDS (how long each burst lasts)")
        at = args.at if args.at is not None else period / 2
        return Burst(args.rate, peak, period, args.burst_length, at)
    return Diurnal(args.rate, peak, period)


def _workload(args: argparse.Namespace) -> tuple[list[Arrival], dict[str, Any], list[str]]:
    """The schedule, its description for the report, and notes; raises ``UsageError`` or ``TraceError``."""
    mix = _prompt_mix(args)
    if args.trace:
        trace = read_trace(
            args.trace,
            speedup=args.speedup,
            start=args.trace_start,
            window=args.trace_window,
            max_requests=args.max_requests,
        )
        workload = {
            "kind": "trace",
            "description": trace.describe(),
            "path": trace.path,
            "rows": trace.rows,
            "speedup": trace.speedup,
            "start_s": trace.start,
            "window_s": trace.window,
            "requests": len(trace.arrivals),
        }
        replay, notes = trace.arrivals, list(trace.notes)
        if not mix.distinct:
            if any(a.content is not None for a in replay):
                raise UsageError(
                    f"{trace.path} says what its prompts share (hash_ids); drop --system-prompt-tokens and --turns"
                )
            replay = apply_mix(replay, mix, seed=args.seed)
        return replay, {**workload, **_prompt_report(replay, mix, notes)}, notes
    try:
        shape = _shape(args)
        prompt = parse_length(args.prompt_tokens)
        output = parse_length(args.output_tokens)
        poisson = False if args.even else None
        schedule = build_schedule(
            shape,
            args.duration,
            prompt=prompt,
            output=output,
            seed=args.seed,
            poisson=poisson,
            max_requests=args.max_requests,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    arrivals = "even" if args.even or (args.shape == "constant") else "poisson"
    workload = {
        "kind": "synthetic",
        "description": f"{shape.describe()} for {args.duration:g}s ({arrivals} arrivals), prompt "
        f"{prompt.describe()} / output {output.describe()} tokens, seed {args.seed}",
        "shape": args.shape,
        "duration_s": args.duration,
        "seed": args.seed,
        "prompt_tokens": prompt.describe(),
        "output_tokens": output.describe(),
        "requests": len(schedule),
    }
    notes = []
    if len(schedule) >= args.max_requests:
        notes.append(f"The schedule was cut at --max-requests {args.max_requests}.")
    schedule = apply_mix(schedule, mix, seed=args.seed)
    return schedule, {**workload, **_prompt_report(schedule, mix, notes)}, notes


def _prompt_report(schedule: Sequence[Arrival], mix: PromptMix, notes: list[str]) -> dict[str, Any]:
    """What the prompts share, for the report (and a note unless the trace already made one)."""
    found = reuse_of(schedule)
    from_trace = any(a.content is not None for a in schedule) and mix.distinct
    if not from_trace:
        notes.append(f"Prompts: {mix.describe()}; {found.describe()}.")
    return {
        "prompts": "the trace's hash_ids" if from_trace else mix.describe(),
        "prompt_tokens_total": found.prompt_tokens,
        "prompt_tokens_reusable": found.reusable_tokens,
    }


def _client_config(args: argparse.Namespace) -> ClientConfig:
    chat = ChatLayout.of(_prompt_mix(args), args.seed) if args.api == "chat" else None
    return ClientConfig(args.url, model=args.model, timeout=args.timeout, chat=chat)


def _empty_result(status: str, scheduled: int = 0) -> RunResult:
    return RunResult(Measurement(), time.time(), 0.0, status, scheduled, 0.0)


def _write_reports(args: argparse.Namespace, report: dict[str, Any], result: RunResult | None = None) -> None:
    if args.json:
        path = write_json(report, args.json)
        print(f"JSON report: {path}", file=sys.stderr)
    if getattr(args, "csv", None):
        records = result.measurement.records if result is not None else []
        path = write_requests_csv(records, args.csv, _slos(args))
        summary = write_summary_csv(report, summary_path(args.csv))
        print(f"CSV: {path} (one row per request), {summary} (summary)", file=sys.stderr)
    if args.png:
        path = write_png(report, args.png)
        print(f"Plot: {path}", file=sys.stderr)


# --- run -------------------------------------------------------------------------------------------


async def _run(args: argparse.Namespace, schedule: list[Arrival]) -> tuple[RunResult, str | None, str | None]:
    """``(result, model, error)``: the run, or an empty result and why it could not start."""
    stop = asyncio.Event()
    _install_stop(stop)
    async with StreamingClient(_client_config(args)) as client:
        try:
            await client.preflight()
        except TargetUnreachable as err:
            return _empty_result("failed", len(schedule)), client.model, str(err)
        progress = None if args.no_progress else LiveProgress()
        result = await run_open_loop(
            client,
            schedule,
            warmup=args.warmup,
            drain_timeout=args.drain_timeout,
            progress=progress,
            stop=stop,
        )
        return result, client.model, None


def cmd_run(args: argparse.Namespace) -> int:
    _raise_fd_limit()
    cost = CostModel(
        replicas=static_replicas(args.replicas),
        gpus_per_replica=args.gpus_per_replica,
        price_per_gpu_hour=args.price_per_gpu_hour,
    )
    try:
        schedule, workload, notes = _workload(args)
    except (UsageError, TraceError, ValueError) as err:
        fail(str(err))
        report = build_report(
            _empty_result("failed"), target=args.url, model=args.model, workload={"description": "not started"},
            cost=cost, error=str(err),
        )  # fmt: skip
        _write_reports(args, report)
        return EXIT_USAGE
    workload["api"] = _client_config(args).endpoint if args.api == "completions" else "/v1/chat/completions"
    if schedule and args.warmup >= schedule[-1].send_time and args.warmup > 0:
        fail(
            f"--warmup {args.warmup:g}s covers the whole schedule (last request at {schedule[-1].send_time:.1f}s); "
            "lower --warmup or lengthen the run"
        )
        return EXIT_USAGE
    result, model, error = asyncio.run(_run(args, schedule))
    failed = [r for r in result.measurement.records if not r.warmup]
    if error is None and failed and all(r.error is not None for r in failed):
        kinds = sorted({r.error for r in failed if r.error})
        error = f"every measured request failed ({', '.join(kinds)})"
    report = build_report(
        result,
        target=args.url,
        model=model,
        workload=workload,
        cost=cost,
        slos=_slos(args),
        notes=notes,
        error=error,
        include_records=not args.no_records,
    )
    if args.prometheus_url and result.measurement.records:
        try:
            report["engine_metrics"] = prom_report.fetch(
                args.prometheus_url, result.started_at, result.started_at + result.elapsed,
                selector=args.prometheus_selector,
            )  # fmt: skip
        except prom_report.PrometheusError as err:
            report["engine_metrics"] = {"prometheus_url": args.prometheus_url, "error": str(err)}
            report["notes"].append(f"Engine metrics missing: {err}")
    print(format_summary(report))
    _write_reports(args, report, result)
    if error is not None:
        fail(error)
        return EXIT_FAILED
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_OK


# --- knee ------------------------------------------------------------------------------------------


def cmd_knee(args: argparse.Namespace) -> int:
    _raise_fd_limit()
    try:
        levels = parse_levels(args.levels)
        prompt = parse_length(args.prompt_tokens)
        output = parse_length(args.output_tokens)
        mix = _prompt_mix(args)
    except (ValueError, UsageError) as err:
        fail(str(err))
        return EXIT_USAGE

    async def go() -> tuple[list[LevelResult], str | None, str | None, bool]:
        """``(levels, model, error, interrupted)``."""
        stop = asyncio.Event()
        _install_stop(stop)
        async with StreamingClient(_client_config(args)) as client:
            try:
                await client.preflight()
            except TargetUnreachable as err:
                return [], client.model, str(err), False
            results = await sweep(
                client,
                levels,
                duration=args.duration,
                warmup=args.warmup,
                prompt=prompt,
                output=output,
                seed=args.seed,
                prompts=mix,
                progress=not args.no_progress,
                stop=stop,
            )
            return results, client.model, None, stop.is_set()

    results, model, error, interrupted = asyncio.run(go())
    if error is not None:
        fail(error)
        return EXIT_FAILED
    verdict = find_knee(
        results,
        ttft_factor=args.ttft_factor,
        ttft_floor=args.ttft_floor,
        min_scaling=args.min_scaling,
        slo_ttft=args.slo_ttft,
    )
    print(f"Prompts: {mix.describe()}, prompt {prompt.describe()} / output {output.describe()} tokens.")
    print(format_table(results, verdict))
    if args.json:
        report = {
            "target": args.url,
            "model": model,
            "criterion": {
                "ttft_factor": args.ttft_factor,
                "ttft_floor_s": args.ttft_floor,
                "min_scaling": args.min_scaling,
                "slo_ttft_s": args.slo_ttft,
            },
            "prompt_tokens": prompt.describe(),
            "output_tokens": output.describe(),
            "prompts": mix.describe(),
            "levels": [r.as_dict() for r in results],
            "baseline_ttft_p95_s": verdict.baseline_ttft_p95,
            "recommended_max_concurrency": verdict.concurrency,
            "knee_found": verdict.found,
            "reason": verdict.reason,
            "interrupted": interrupted,
        }
        print(f"JSON report: {write_json(report, args.json)}", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if verdict.concurrency is not None else EXIT_FAILED


# --- sweep -----------------------------------------------------------------------------------------


def cmd_sweep(args: argparse.Namespace) -> int:
    _raise_fd_limit()
    try:
        prompt = parse_length(args.prompt_tokens)
        output = parse_length(args.output_tokens)
        mix = _prompt_mix(args)
        if args.rates:
            planned = sorted({positive(r.strip()) for r in args.rates.split(",") if r.strip()})
        else:
            planned = rate_sweep.rates(args.start_rate, args.factor, args.max_rate, int(args.max_steps))
    except (ValueError, UsageError, argparse.ArgumentTypeError) as err:
        fail(str(err))
        return EXIT_USAGE
    slos = _slos(args)

    async def go() -> tuple[list[rate_sweep.StepResult], list[str], str | None, str | None, bool]:
        stop = asyncio.Event()
        _install_stop(stop)
        async with StreamingClient(_client_config(args)) as client:
            try:
                await client.preflight()
            except TargetUnreachable as err:
                return [], [], client.model, str(err), False
            steps, notes = await rate_sweep.sweep(
                client, planned, duration=args.duration, warmup=args.warmup, prompt=prompt, output=output,
                slos=slos, budget=args.budget, refine=not args.no_refine, seed=args.seed,
                prompts=None if mix.distinct else mix, progress=not args.no_progress, stop=stop,
            )  # fmt: skip
            return steps, notes, client.model, None, stop.is_set()

    steps, notes, model, error, interrupted = asyncio.run(go())
    if error is not None:
        fail(error)
        return EXIT_FAILED
    verdict = rate_sweep.find_knee_rate(steps)
    print(f"Prompts: {mix.describe()}, prompt {prompt.describe()} / output {output.describe()} tokens; "
          f"Poisson arrivals, {args.warmup:g}s warm-up + {args.duration:g}s per step.")  # fmt: skip
    if slos:
        print(f"SLOs: {slos.describe()}.")
    print(rate_sweep.format_table(steps, verdict))
    for note in notes:
        print(f"Note: {note}")
    if args.json:
        report = {
            "target": args.url,
            "model": model,
            "api": _client_config(args).endpoint,
            "prompt_tokens": prompt.describe(),
            "output_tokens": output.describe(),
            "prompts": mix.describe(),
            "step_s": {"warmup": args.warmup, "duration": args.duration},
            "slos_s": dict(slos.limits),
            "steps": [{**s.as_dict(), "saturated": rate_sweep.saturation(s)} for s in steps],
            "knee_rps": verdict.knee_rps,
            "knee_concurrency_mean": verdict.knee_concurrency,
            "knee_concurrency_max": verdict.knee_concurrency_max,
            "saturation_found": verdict.found,
            "reason": verdict.reason,
            "notes": notes,
            "interrupted": interrupted,
        }
        print(f"JSON report: {write_json(report, args.json)}", file=sys.stderr)
    if args.csv and steps:
        print(f"CSV: {rate_sweep.write_steps_csv(steps, args.csv)}", file=sys.stderr)
    if args.png and steps:
        title = f"loadgen sweep: {model or args.url}"
        print(f"Plot: {rate_sweep.write_steps_png(steps, verdict, args.png, title=title)}", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if verdict.knee_rps is not None else EXIT_FAILED
