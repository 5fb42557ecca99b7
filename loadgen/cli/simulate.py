"""``loadgen simulate``: replay a trace through the fleet simulator for every scaling policy and compare.

    loadgen simulate --trace trace.csv.gz --slo-ttft 1.0 --profile a10g-llama3-8b-awq --json out.json --png out.png
    loadgen simulate --trace trace.csv.gz --isvc my-service.yaml --json out.json   # check a spec before applying it

Every policy (``inferscale``, ``static-peak``, ``hpa-gpu-util``, ``keda-queue``, ``raise-batch``, and the
bounds ``oracle`` and ``reactive``, see ``loadgen.fleet.policies``; ``wva-saturation``, ``dynamo-planner``,
``knative-kpa``, see ``loadgen.fleet.baselines``) runs on the same arrivals in simulated time. The JSON
report is an object keyed by policy name, each with ``slo_attainment``, ``gpu_seconds``, ``ttft_p95``, ``ttft_p99`` and
``scale_events`` (plus requests, rejected, failed, the scale-event log and the per-tick time series); a
table goes to stdout and progress to stderr.

Without ``--isvc`` the ``inferscale`` policy runs the InferenceService a user would write for the profile:
``maxConcurrency`` at the profile's knee, its ``maxModelLen`` and cold start, ``--slo-ttft`` as the SLO and
``1..--max-replicas`` replicas. With ``--isvc`` it runs that manifest's spec, and the engine of every policy
takes the spec's ``maxConcurrency`` and ``maxModelLen`` (as the rendered Deployment would); the SLO the
policies are judged by is the manifest's unless ``--slo-ttft`` is given.

Wiring: ``add_parser(subparsers)`` adds the subcommand with ``run`` as its ``func``. Exit status
(``loadgen.cli.common``): 0 done; 2 bad input (an unreadable or malformed trace or manifest, an impossible setting).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from inferscale.api import KIND, InferenceServiceSpec, InvalidSpec, parse_spec
from inferscale.settings import SCALING

from loadgen.cli.argtypes import non_negative, png_path, positive
from loadgen.cli.common import EXIT_OK, EXIT_USAGE, UsageError, fail
from loadgen.engine.profiles import PROFILES, get_profile
from loadgen.fleet.compare import (
    DEFAULT_MAX_REPLICAS,
    NothingToSimulate,
    Settings,
    compare,
    default_spec,
    engine_for,
    format_table,
    write_png,
)
from loadgen.fleet.policies import POLICY_NAMES
from loadgen.traffic.trace import TraceError, read_trace

__all__ = ["DEFAULT_PROFILE", "add_parser", "load_spec", "run"]

DEFAULT_PROFILE = "a10g-llama3-8b-awq"
DEFAULT_SLO_S = 1.0


def _whole(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return int(text)


def add_parser(subparsers: Any) -> None:
    """Add ``simulate`` to a ``loadgen`` subparsers object; its ``func`` is ``run`` (``loadgen.cli.main`` lists it
    in ``SUBCOMMANDS``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "simulate",
        help="replay a trace through simulated fleets and compare scaling policies",
        description="Discrete-event fleet simulation in simulated time: every policy "
        f"({', '.join(POLICY_NAMES)}) on the same arrivals; SLO attainment, p95/p99 TTFT, GPU-seconds "
        "and scale events per policy.",
    )
    p.add_argument(
        "--trace",
        required=True,
        metavar="FILE",
        help="TIMESTAMP,ContextTokens,GeneratedTokens (.gz ok) or Mooncake JSONL",
    )
    p.add_argument("--slo-ttft", type=positive, metavar="S", help="p95 TTFT SLO (default: the manifest's, else 1)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, choices=sorted(PROFILES), help=f"default {DEFAULT_PROFILE}")
    p.add_argument("--isvc", metavar="MANIFEST", help="InferenceService YAML whose spec the inferscale policy uses")
    trace = p.add_argument_group("trace")
    trace.add_argument("--speedup", type=positive, default=1.0, help="replay this many times faster")
    trace.add_argument("--trace-start", type=non_negative, default=0.0, metavar="S", help="skip S s of trace")
    trace.add_argument("--trace-window", "--window", type=positive, metavar="S", help="S seconds of trace time")
    trace.add_argument("--max-requests", type=_whole, metavar="N")
    fleet = p.add_argument_group("fleet")
    fleet.add_argument("--max-model-len", type=_whole, metavar="TOKENS", help="engine limit (default: spec/profile)")
    fleet.add_argument("--max-replicas", type=_whole, default=DEFAULT_MAX_REPLICAS, help="without --isvc (64)")
    fleet.add_argument("--cold-start", type=non_negative, metavar="S", help="added replicas' start time (profile)")
    tick, window = SCALING.tick_seconds, float(SCALING.ttft_window_seconds)  # the operator's defaults
    fleet.add_argument("--tick", type=positive, default=tick, metavar="S", help=f"inferscale/HPA/KEDA tick ({tick:g})")
    fleet.add_argument("--ttft-window", type=positive, default=window, metavar="S", help=f"p95 TTFT range ({window:g})")
    fleet.add_argument("--interval", type=positive, default=60.0, metavar="S", help="peak and oracle window (60)")
    fleet.add_argument("--batch-factor", type=_whole, default=4, help="raise-batch: max_num_seqs multiplier (4)")
    fleet.add_argument("--keda-target", type=positive, default=5.0, metavar="N", help="waiting per replica (5)")
    fleet.add_argument("--oracle-simulations", type=_whole, default=4, metavar="N", help="oracle search runs (4)")
    fleet.add_argument(
        "--capacity-requests", type=_whole, default=3000, metavar="N", help="requests per capacity trial (3000)"
    )
    fleet.add_argument("--policies", default=",".join(POLICY_NAMES), help="comma-separated subset (default: all)")
    fleet.add_argument("--workers", type=_whole, default=min(2, os.cpu_count() or 1), help="processes (<= 2)")
    fleet.add_argument("--seed", type=int, default=0)
    out = p.add_argument_group("report")
    out.add_argument("--json", required=True, metavar="OUT", help="write the per-policy JSON report here")
    out.add_argument(
        "--png", type=png_path, metavar="OUT", help="plot replicas over time and GPU-hours vs SLO attainment here"
    )
    out.add_argument("--no-timeseries", action="store_true", help="leave the per-tick series out of the JSON")
    out.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def load_spec(path: str | Path) -> InferenceServiceSpec:
    """The spec of the (first) InferenceService in a YAML manifest; raises ValueError naming the problem."""
    path = Path(path)
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except OSError as err:
        raise ValueError(f"{path}: cannot read the manifest: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML: {err}") from None
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == KIND:
            spec = document.get("spec")
            if not isinstance(spec, dict):
                raise ValueError(f"{path}: the {KIND} has no spec mapping")
            try:
                return parse_spec(spec)
            except InvalidSpec as err:
                raise ValueError(f"{path}: {err}") from None
    kinds = ", ".join(str(d.get("kind")) for d in documents if isinstance(d, dict)) or "none"
    raise ValueError(f"{path}: no document of kind {KIND} (found kinds: {kinds})")


def _settings(args: argparse.Namespace) -> Settings:
    profile = get_profile(args.profile)
    if args.cold_start is not None:
        profile = profile.with_overrides(cold_start_s=args.cold_start)
    if args.isvc:
        try:
            spec = load_spec(args.isvc)
        except ValueError as err:
            raise UsageError(str(err)) from None
        slo = args.slo_ttft or spec.scaling.ttft_p95_seconds
    else:
        slo = args.slo_ttft or DEFAULT_SLO_S
        try:
            base = profile if args.max_model_len is None else profile.with_overrides(max_model_len=args.max_model_len)
            spec = default_spec(base, slo, max_replicas=args.max_replicas)
        except InvalidSpec as err:
            raise UsageError(f"the InferenceService built from the flags is invalid: {err}") from None
        except ValueError as err:  # the profile refuses the override (e.g. longer than its KV cache)
            raise UsageError(f"--max-model-len {args.max_model_len}: {err}") from None
    if args.max_model_len is not None and spec.max_model_len != args.max_model_len:
        fields = spec.model_dump(mode="json", by_alias=True)
        try:
            spec = parse_spec({**fields, "maxModelLen": args.max_model_len})
        except InvalidSpec as err:
            raise UsageError(f"--max-model-len {args.max_model_len}: {err}") from None
    try:
        engine = engine_for(profile, spec)
    except ValueError as err:
        raise UsageError(f"the engine cannot run this spec: {err}") from None
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    try:
        return Settings(
            profile=engine,
            spec=spec,
            slo_ttft_s=slo,
            tick_s=args.tick,
            ttft_window_s=args.ttft_window,
            interval_s=args.interval,
            cold_start_s=args.cold_start,
            batch_factor=args.batch_factor,
            keda_waiting_per_replica=args.keda_target,
            oracle_max_simulations=args.oracle_simulations,
            capacity_requests=args.capacity_requests,
            seed=args.seed,
            policies=policies,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    """Run ``loadgen simulate`` with parsed arguments; returns the exit status."""

    def say(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    try:
        settings = _settings(args)
        trace = read_trace(
            args.trace,
            speedup=args.speedup,
            start=args.trace_start,
            window=args.trace_window,
            max_requests=args.max_requests,
        )
        if not trace.arrivals:
            raise UsageError(f"{args.trace}: no requests in the chosen window; widen --trace-window or --trace-start")
        say(trace.describe())
        for note in trace.notes:
            say(note)
        comparison = compare(trace.arrivals, settings, workers=args.workers, progress=say)
    except (UsageError, TraceError, NothingToSimulate) as err:
        fail(str(err))
        return EXIT_USAGE
    report = _finite(comparison.to_json(timeseries=not args.no_timeseries))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, allow_nan=False) + "\n")
    print(format_table(comparison))
    for name, text in comparison.descriptions.items():
        print(f"  {name}: {text}")
    say(f"wrote {out}")
    if args.png:
        say(f"wrote {write_png(comparison, args.png)}")
    return EXIT_OK
