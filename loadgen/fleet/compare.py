"""Run every scaling policy on the same arrivals and compare them: figures, a table and one PNG.

    spec = default_spec(profile, slo_ttft_s=1.0)
    comparison = compare(arrivals, Settings(profile=engine_for(profile, spec), spec=spec, slo_ttft_s=1.0))
    print(format_table(comparison))
    write_png(comparison, "fleet.png")

The engine every policy runs is the profile with the spec's pinned ceiling and max model length
(``engine_for``), so ``--isvc`` changes the fleet the way applying that InferenceService would.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from inferscale.api import InferenceServiceSpec, parse_spec
from inferscale.settings import SCALING

from loadgen.client.plots import pyplot, save
from loadgen.engine.profiles import EngineProfile
from loadgen.fleet.baselines import DynamoPlanner, KnativeKpa, WvaSaturation, profiled_engine_rps
from loadgen.fleet.policies import (
    BOUNDS,
    POLICY_NAMES,
    Capacity,
    HpaBehavior,
    HpaGpuUtilization,
    InferscalePolicy,
    KedaQueueDepth,
    OraclePlan,
    StaticPolicy,
    cheaper_static,
    counted_requests,
    feasible_attainment,
    interval_rates,
    measure_capacity,
    plan_oracle,
    plan_reactive,
    raise_batch,
    refused_requests,
    workload_of,
)
from loadgen.fleet.sim import FleetConfig, FleetResult, simulate
from loadgen.traffic.shapes import Arrival

__all__ = [
    "DEFAULT_MAX_REPLICAS",
    "Comparison",
    "NothingToSimulate",
    "Settings",
    "compare",
    "default_spec",
    "engine_for",
    "format_table",
    "inferscale_policy",
    "rerun",
    "write_png",
]

DEFAULT_MAX_REPLICAS = 64


class NothingToSimulate(ValueError):
    """The arrivals leave nothing to simulate: none at all, or every one refused by the engine."""


def default_spec(
    profile: EngineProfile, slo_ttft_s: float, *, max_replicas: int = DEFAULT_MAX_REPLICAS
) -> InferenceServiceSpec:
    """The InferenceService a user would write for this engine: its knee pinned, the SLO, 1..max replicas."""
    return parse_spec(
        {
            "model": {"id": "simulated/model"},
            "maxConcurrency": profile.max_num_seqs,
            "maxModelLen": profile.max_model_len,
            "coldStartSeconds": max(1, math.ceil(profile.cold_start_s)),
            "replicas": {"min": 1, "max": max_replicas},
            "scaling": {"ttftP95Seconds": slo_ttft_s},
        }
    )


def engine_for(profile: EngineProfile, spec: InferenceServiceSpec) -> EngineProfile:
    """The engine the spec renders: ``--max-num-seqs`` from maxConcurrency, ``--max-model-len`` from maxModelLen."""
    return profile.with_overrides(max_num_seqs=spec.max_concurrency, max_model_len=spec.max_model_len)


@dataclass(frozen=True, slots=True)
class Settings:
    """What a comparison runs: the engine, the spec for ``inferscale``, the SLO and the simulator's knobs."""

    profile: EngineProfile
    spec: InferenceServiceSpec
    slo_ttft_s: float
    tick_s: float = SCALING.tick_seconds
    ttft_window_s: float = float(SCALING.ttft_window_seconds)
    stale_after_s: float = SCALING.stale_after_seconds
    interval_s: float = 60.0
    """Window for the peak rate (static-peak), the opening load and the oracle's plan."""
    cold_start_s: float | None = None
    """Start to ready of added replicas; None means the profile's."""
    batch_factor: int = 4
    keda_waiting_per_replica: float = 5.0
    oracle_max_simulations: int = 4
    capacity_requests: int = 3000
    seed: int = 0
    policies: tuple[str, ...] = POLICY_NAMES

    def __post_init__(self) -> None:
        unknown = [p for p in self.policies if p not in POLICY_NAMES]
        if unknown:
            raise ValueError(f"unknown policies {', '.join(unknown)}; known: {', '.join(POLICY_NAMES)}")
        if not self.slo_ttft_s > 0:
            raise ValueError(f"slo_ttft_s must be > 0 seconds, got {self.slo_ttft_s}")
        if not self.interval_s > 0:
            raise ValueError(f"interval_s must be > 0 seconds, got {self.interval_s}")

    def fleet(
        self, initial_replicas: int, profile: EngineProfile | None = None, *, tick_s: float | None = None
    ) -> FleetConfig:
        """The fleet every policy runs on; ``tick_s`` for a baseline whose loop has its own interval."""
        return FleetConfig(
            profile=profile or self.profile,
            initial_replicas=initial_replicas,
            tick_s=self.tick_s if tick_s is None else tick_s,
            ttft_window_s=self.ttft_window_s,
            drain_timeout_s=float(self.spec.drain_seconds),
            cold_start_s=self.cold_start_s,
            gpus_per_replica=self.spec.gpus_per_replica,
        )


@dataclass(slots=True)
class Comparison:
    """Every policy's run on the same arrivals, and the measurements the baselines were sized from."""

    settings: Settings
    results: dict[str, FleetResult]
    descriptions: dict[str, str]
    capacity: Capacity
    peak_rate: float
    opening_rate: float
    initial_replicas: int
    oracle: OraclePlan | None
    wall_seconds: dict[str, float] = field(default_factory=dict)
    feasible: tuple[int, ...] = ()
    """The requests an idle engine serves within the SLO (accepted ones only): what any policy can get right."""
    reactive: OraclePlan | None = None
    """What knowing the past exactly, but not the future, costs at each attainment (``plan_reactive``)."""

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Per policy: slo_attainment, gpu_seconds, ttft_p95, ttft_p99, scale_events and more.

        ``slo_attainment_feasible`` counts only the requests an idle engine serves within the SLO (no replica
        count helps the others). ``oracle_gpu_seconds`` is what the oracle's schedule, planned with the
        future, costs at the feasible attainment this policy reached, and ``gpu_vs_oracle`` this policy's
        GPU-seconds over it (None without an oracle run); ``oracle_reached`` is False when no planned
        schedule attained as much (the ratio is then against the dearest one). ``reactive_gpu_seconds`` and
        ``gpu_vs_reactive`` are the same against ``plan_reactive``'s runs: what a policy without foresight
        spends at best.
        """
        out = {}
        slo = self.settings.slo_ttft_s
        for name, result in self.results.items():
            summary = result.summary(slo)
            summary["slo_attainment_feasible"] = feasible_attainment(result, self.feasible, slo)
            summary["feasible_requests"] = len(self.feasible)
            attained = summary["slo_attainment_feasible"]
            if self.oracle is not None and attained is not None:
                cost, reached = self.oracle.gpu_seconds_at(attained)
                summary["oracle_gpu_seconds"] = cost
                summary["gpu_vs_oracle"] = result.gpu_seconds / cost if cost > 0 else None
                summary["oracle_reached"] = reached
            if self.reactive is not None and attained is not None:
                cost, _ = self.reactive.gpu_seconds_at(attained)
                summary["reactive_gpu_seconds"] = cost
                summary["gpu_vs_reactive"] = result.gpu_seconds / cost if cost > 0 else None
            summary["description"] = self.descriptions[name]
            out[name] = summary
        return out

    def to_json(self, *, timeseries: bool = True) -> dict[str, Any]:
        """The JSON report: an object keyed by policy name."""
        out = self.summaries()
        for name, result in self.results.items():
            out[name]["scale_event_log"] = [
                {"t": e.t, "from": e.from_replicas, "to": e.to_replicas, "reason": e.reason, "message": e.message}
                for e in result.scale_events
            ]
            if timeseries:
                out[name]["timeseries"] = [
                    {
                        "t": row.t,
                        "arrival_rate": row.arrival_rate,
                        "replicas": row.replicas,
                        "ready": row.ready,
                        "queue": row.queue,
                        "running": row.running,
                        "ttft_p95": row.ttft_p95,
                        "gpu_utilization": row.gpu_utilization,
                        "reason": row.reason,
                    }
                    for row in result.timeseries
                ]
        return out


def inferscale_policy(settings: Settings) -> InferscalePolicy:
    """The operator's policy as every comparison runs it, on ``settings.fleet(initial_replicas)``.

    For a caller that runs it again to look inside, e.g. at ``InferscalePolicy.memory`` after each tick
    (``bench/timeline.py``): with the same arrivals and the comparison's ``initial_replicas``, ``simulate``
    gives the comparison's own ``inferscale`` run.
    """
    return InferscalePolicy(settings.spec, stale_after_s=settings.stale_after_s, ttft_window_s=settings.ttft_window_s)


@dataclass(frozen=True, slots=True)
class _Job:
    """One policy's run, everything it needs in one picklable value (workers run these)."""

    name: str
    arrivals: Sequence[Arrival]
    settings: Settings
    capacity: Capacity | None
    """None only for raise-batch, which is not sized from it."""
    initial: int
    static: int
    peak: float

    @classmethod
    def sized(
        cls, name: str, arrivals: Sequence[Arrival], settings: Settings, capacity: Capacity, initial: int, peak: float
    ) -> _Job:
        """A job sized from the measured capacity: static-peak runs the replicas the peak rate needs."""
        return cls(name, arrivals, settings, capacity, initial, capacity.replicas_for(peak), peak)


@dataclass(frozen=True, slots=True)
class _Done:
    name: str
    result: FleetResult
    description: str
    plan: OraclePlan | None
    """The oracle's or the reactive bound's runs; None for a policy."""
    wall: float


def _run(job: _Job) -> _Done:
    started = time.perf_counter()
    settings, name, arrivals, initial = job.settings, job.name, job.arrivals, job.initial
    spec, bounds = settings.spec, settings.spec.replicas
    hpa = HpaBehavior(min_replicas=bounds.min, max_replicas=bounds.max)
    plan = None
    if name == "inferscale":
        result = simulate(arrivals, inferscale_policy(settings), settings.fleet(initial))
        description = (
            f"the operator's policy: SLO {spec.scaling.ttft_p95_seconds:g}s, maxConcurrency "
            f"{spec.max_concurrency}, {bounds.min}..{bounds.max} replicas, starting at {initial}"
        )
    elif name == "static-peak":
        assert job.capacity is not None
        description = (
            f"{job.static} replicas: the fewest whose pool holds the peak {job.peak:.2f} req/s (busiest "
            f"{settings.interval_s:g}s) at the SLO, {job.capacity.per_replica_at(job.static):.2f} req/s each"
        )
        result = simulate(arrivals, StaticPolicy(name, job.static, description), settings.fleet(job.static))
    elif name == "hpa-gpu-util":
        target = spec.scaling.gpu_utilization_percent
        policy_hpa = HpaGpuUtilization(target, hpa, initial_replicas=initial)
        result = simulate(arrivals, policy_hpa, settings.fleet(initial))
        description = f"HPA on GPU utilisation, target {target}%, {bounds.min}..{bounds.max}, starting at {initial}"
    elif name == "keda-queue":
        per = settings.keda_waiting_per_replica
        policy_keda = KedaQueueDepth(per, hpa, initial_replicas=initial)
        result = simulate(arrivals, policy_keda, settings.fleet(initial))
        description = (
            f"KEDA on waiting requests, {per:g} per replica, {bounds.min}..{bounds.max}, starting at {initial}"
        )
    elif name == "wva-saturation":
        policy_wva = WvaSaturation(min_replicas=bounds.min, max_replicas=bounds.max)
        result = simulate(arrivals, policy_wva, settings.fleet(initial, tick_s=policy_wva.tick_s))
        th = policy_wva.thresholds
        description = (
            f"llm-d WVA, V1 saturation analyzer: saturated at KV >= {th.kv_cache_threshold:g} or queue >= "
            f"{th.queue_length_threshold:g}, +1 when mean spare KV < {th.kv_spare_trigger:g} or spare queue < "
            f"{th.queue_spare_trigger:g}, -1 when N-1 stay safe; peaks over {policy_wva.window_s:g}s, every "
            f"{policy_wva.loop_s:g}s; {bounds.min}..{bounds.max}, starting at {initial}"
        )
    elif name == "dynamo-planner":
        assert job.capacity is not None
        engine_rps = profiled_engine_rps(job.capacity)
        policy_dyn = DynamoPlanner(engine_rps, min_endpoint=bounds.min, max_replicas=bounds.max)
        result = simulate(arrivals, policy_dyn, settings.fleet(initial, tick_s=policy_dyn.tick_s))
        description = (
            f"NVIDIA Dynamo planner, throughput mode: ceil(predicted req/s / {engine_rps:.2f} req/s per engine at "
            f"the SLO), ARIMA load predictor, every {policy_dyn.interval_s:g}s; {bounds.min}..{bounds.max}, "
            f"starting at {initial}"
        )
    elif name == "knative-kpa":
        concurrency = 0.7 * spec.max_concurrency
        policy_kpa = KnativeKpa(concurrency, min_replicas=bounds.min, max_replicas=bounds.max)
        result = simulate(arrivals, policy_kpa, settings.fleet(initial, tick_s=policy_kpa.tick_s))
        description = (
            f"Knative KPA on concurrency: target {concurrency:g} per pod (0.7 x maxConcurrency "
            f"{spec.max_concurrency}), {policy_kpa.stable_window_s:g}s stable / {policy_kpa.panic_window_s:g}s panic "
            f"windows, every {policy_kpa.tick_s:g}s; {bounds.min}..{bounds.max}, starting at {initial}"
        )
    elif name == "raise-batch":
        policy_rb, raised = raise_batch(settings.profile, settings.batch_factor)
        result = simulate(arrivals, policy_rb, settings.fleet(1, raised))
        description = policy_rb.why
    elif name == "reactive":
        assert job.capacity is not None
        plan = plan_reactive(arrivals, job.capacity, settings.fleet(1), interval_s=settings.interval_s)
        result = plan.result
        description = (
            f"no foresight, exact hindsight: sized every tick for {plan.scale:g}x what the last "
            f"{settings.interval_s:g}s of arrivals need at the measured capacity, ready a cold start later; the "
            f"cheapest of {plan.simulations} runs that kept the SLO" + ("" if plan.met else " (none did)")
        )
    else:
        assert job.capacity is not None
        plan = plan_oracle(
            arrivals,
            job.capacity,
            settings.fleet(1),
            interval_s=settings.interval_s,
            max_simulations=settings.oracle_max_simulations,
        )
        result = plan.result
        description = ""  # written once static-peak's run is known (see compare)
    return _Done(name, result, description, plan, time.perf_counter() - started)


def compare(
    arrivals: Sequence[Arrival],
    settings: Settings,
    *,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """Run the chosen policies (all nine by default) on ``arrivals``; see ``loadgen.fleet.policies``.

    ``workers`` > 1 runs policies in that many processes at once (the figures are the same).
    """
    if not arrivals:
        raise NothingToSimulate("no requests to simulate: the trace (or its window) is empty")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    say = progress or (lambda _: None)
    profile, spec, slo = settings.profile, settings.spec, settings.slo_ttft_s
    refused = refused_requests(arrivals, profile)
    if len(refused) == len(arrivals):
        raise NothingToSimulate(
            f"all {len(arrivals)} requests are refused by the engine (longer than max_model_len "
            f"{profile.max_model_len}, or empty): raise maxModelLen (--max-model-len)"
        )
    rates = interval_rates(arrivals, settings.interval_s, skip=refused)
    peak, opening = max(rates), rates[0]
    done: dict[str, _Done] = {}
    walls: dict[str, float] = {}

    def finished(item: _Done) -> None:
        done[item.name] = item
        summary = item.result.summary(slo)
        say(
            f"{item.name}: {summary['gpu_seconds']:.0f} GPU-s, SLO attainment {_pct(summary['slo_attainment'])} "
            f"({item.wall:.1f}s)"
        )

    def measure() -> tuple[Capacity, _Job]:
        started = time.perf_counter()
        workload = workload_of(arrivals, settings.interval_s, skip=refused)
        capacity = measure_capacity(
            workload, profile, slo, up_to_rps=peak, requests=settings.capacity_requests, seed=settings.seed
        )
        walls["capacity"] = time.perf_counter() - started
        say(
            f"capacity at p95 TTFT <= {slo:g}s, req/s by pool size: {capacity.curve()} "
            f"({capacity.trials} trials, {walls['capacity']:.1f}s)"
        )
        bounds = spec.replicas
        initial = min(max(capacity.replicas_for(opening), bounds.min), bounds.max)
        return capacity, _Job.sized("", arrivals, settings, capacity, initial, peak)

    # raise-batch needs no measurement: with workers it runs while the capacity is measured. Then the oracle
    # (the longest job) goes first, so the other policies share the other workers meanwhile.
    names = sorted(settings.policies, key=lambda n: n not in BOUNDS)
    if workers == 1:
        capacity, job = measure()
        for name in names:
            finished(_run(replace(job, name=name)))
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(names)), mp_context=_context()) as pool:
            early = [n for n in names if n == "raise-batch"]
            futures = [pool.submit(_run, _Job(n, arrivals, settings, None, 1, 1, peak)) for n in early]
            capacity, job = measure()
            futures += [pool.submit(_run, replace(job, name=n)) for n in names if n not in early]
            for future in as_completed(futures):
                finished(future.result())
    if "oracle" in done:
        done["oracle"] = _describe_oracle(done["oracle"], done.get("static-peak"), arrivals, job)
    walls.update({name: item.wall for name, item in done.items()})
    ordered = [n for n in POLICY_NAMES if n in done]
    return Comparison(
        settings=settings,
        results={n: done[n].result for n in ordered},
        descriptions={n: done[n].description for n in ordered},
        capacity=capacity,
        peak_rate=peak,
        opening_rate=opening,
        initial_replicas=job.initial,
        oracle=done["oracle"].plan if "oracle" in done else None,
        wall_seconds=walls,
        feasible=tuple(counted_requests(arrivals, profile, slo)),
        reactive=done["reactive"].plan if "reactive" in done else None,
    )


def rerun(comparison: Comparison, arrivals: Sequence[Arrival], name: str = "inferscale") -> Comparison:
    """``comparison`` with one policy run again on the same ``arrivals``, fleet, capacity and settings.

    No policy's run depends on another's, so a change to one policy is judged in the time of its own run
    (``bench/policy_matrix.py --reuse``). The oracle's is the exception: static-peak's run goes into it.
    """
    if name not in comparison.results or name in BOUNDS:
        known = ", ".join(n for n in comparison.results if n not in BOUNDS)
        raise ValueError(f"cannot run {name!r} again; the comparison has: {known}")
    done = _run(
        _Job.sized(
            name, arrivals, comparison.settings, comparison.capacity, comparison.initial_replicas, comparison.peak_rate
        )
    )
    return replace(
        comparison,
        results={**comparison.results, name: done.result},
        descriptions={**comparison.descriptions, name: done.description},
        wall_seconds={**comparison.wall_seconds, name: done.wall},
    )


def _describe_oracle(item: _Done, static: _Done | None, arrivals: Sequence[Arrival], job: _Job) -> _Done:
    """Let the flat peak schedule stand in for the oracle when it is cheaper, and say how the oracle was found."""
    assert item.plan is not None
    settings = job.settings
    oracle = item.plan
    if static is not None:
        counted = counted_requests(arrivals, settings.profile, settings.slo_ttft_s)
        oracle = cheaper_static(oracle, job.static, static.result, counted, settings.slo_ttft_s)
    kept = "kept the SLO" if oracle.met else "no plan tried kept the SLO"
    if oracle.source == "static-peak":
        how = f"the flat peak schedule ({job.static} replicas) was the cheapest that kept the SLO"
    else:
        how = (
            f"planned per {settings.interval_s:g}s window for {oracle.scale:.2f}x the future load at the measured "
            f"capacity, started a cold start ahead; {kept}"
        )
    description = f"{how} ({oracle.simulations} simulations)"
    return replace(item, result=oracle.result, plan=oracle, description=description)


def _context() -> BaseContext:
    # fork starts workers at once and shares the arrivals without pickling them; spawn elsewhere.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def with_policies(settings: Settings, policies: Sequence[str]) -> Settings:
    """The same settings running only ``policies``."""
    return replace(settings, policies=tuple(policies))


# --- output ---------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}s" if value < 100 else f"{value:.0f}s"


def format_table(comparison: Comparison) -> str:
    """A fixed-width table, one row per policy, cheapest first."""
    summaries = comparison.summaries()
    header = (
        "policy", "SLO attain.", "feasible", "p95 TTFT", "p99 TTFT", "GPU-hours", "GPU-s", "vs oracle",
        "vs reactive", "scale ev.", "max rep.",
    )  # fmt: skip
    rows = [header]
    for name, s in summaries.items():
        ratio = s.get("gpu_vs_oracle")
        rows.append(
            (
                name,
                _pct(s["slo_attainment"]),
                _pct(s["slo_attainment_feasible"]),
                _secs(s["ttft_p95"]),
                _secs(s["ttft_p99"]),
                f"{s['gpu_seconds'] / 3600:.2f}",
                f"{s['gpu_seconds']:.0f}",
                "-" if ratio is None else f"{ratio:.2f}x" + ("" if s.get("oracle_reached", True) else "+"),
                "-" if s.get("gpu_vs_reactive") is None else f"{s['gpu_vs_reactive']:.2f}x",
                str(s["scale_events"]),
                str(s["max_replicas"]),
            )
        )
    widths = [max(len(row[k]) for row in rows) for k in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if k == 0 else cell.rjust(w) for k, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    first = next(iter(summaries.values()))
    settings = comparison.settings
    lines.append(
        f"{first['requests']} requests, {first['rejected']} refused by the engine (longer than max_model_len "
        f"{settings.profile.max_model_len}; left out of SLO attainment); SLO p95 TTFT <= {settings.slo_ttft_s:g}s; "
        f"engine {settings.profile.name} (max_num_seqs {settings.profile.max_num_seqs}); peak "
        f"{comparison.peak_rate:.2f} req/s; capacity at the SLO, req/s by pool size: {comparison.capacity.curve()}"
    )
    return "\n".join(lines)


def write_png(comparison: Comparison, path: str | Path) -> Path:
    """One PNG: replicas over time, one panel per policy (arrivals in grey behind), then GPU-hours and SLO
    attainment per policy side by side. Returns the path."""
    plt = pyplot()

    path = Path(path)
    settings = comparison.settings
    summaries = comparison.summaries()
    names = list(comparison.results)
    colors = [plt.get_cmap("tab10")(POLICY_NAMES.index(n)) for n in names]  # one colour per policy, always
    height = 2.0 + 1.3 * len(names) + 3.2
    fig = plt.figure(figsize=(11, height))
    # A spacer row keeps the last panel's axis label clear of the bar charts' titles.
    grid = fig.add_gridspec(len(names) + 2, 2, height_ratios=[1.0] * len(names) + [0.25, 2.4], hspace=0.35)
    # Every run lasts at least until the last arrival; a policy that falls behind runs on to drain its backlog,
    # which would squash everyone else's panel: the axis stops a little after the earliest end.
    end = 1.05 * min((r.end_time for r in comparison.results.values()), default=0.0) / 60
    first = None
    for k, name in enumerate(names):
        ax = fig.add_subplot(grid[k, :], sharex=first)
        first = first or ax
        rows = comparison.results[name].timeseries
        load = ax.twinx()
        load.fill_between([r.t / 60 for r in rows], [r.arrival_rate for r in rows], step="post", color="0.88", lw=0)
        load.set_yticks([])
        ax.set_zorder(load.get_zorder() + 1)
        ax.patch.set_visible(False)
        ax.step([r.t / 60 for r in rows], [r.replicas for r in rows], where="post", color=colors[k], lw=1.6)
        ax.step([r.t / 60 for r in rows], [r.ready for r in rows], where="post", color=colors[k], lw=0.8, ls=":")
        ax.set_ylim(bottom=0)
        ax.set_xlim(0, end)
        ax.set_ylabel("replicas", fontsize="small")
        s = summaries[name]
        finish = comparison.results[name].end_time / 60
        late = f"; its backlog ran until {finish:.0f} min" if finish > end else ""
        ax.set_title(
            f"{name}: {s['gpu_seconds'] / 3600:.2f} GPU-h, SLO attainment {_pct(s['slo_attainment'])}, "
            f"p95 TTFT {_secs(s['ttft_p95'])}{late}",
            fontsize="small",
            loc="left",
        )
        if k < len(names) - 1:
            ax.tick_params(labelbottom=False)
        else:
            ax.set_xlabel("minutes (solid: replicas asked for, dotted: ready; grey: arrival rate)", fontsize="small")
    fig.suptitle(
        f"Fleet simulation on {settings.profile.name} (max_num_seqs {settings.profile.max_num_seqs}), "
        f"SLO p95 TTFT <= {settings.slo_ttft_s:g}s"
    )
    positions = list(range(len(names)))
    hours = fig.add_subplot(grid[len(names) + 1, 0])
    hours.bar(positions, [summaries[n]["gpu_seconds"] / 3600 for n in names], color=colors)
    hours.set_xticks(positions, names, rotation=30, ha="right", fontsize="small")
    hours.set_ylabel("GPU-hours")
    hours.set_title("GPU-hours (cost)", fontsize="small")
    share = fig.add_subplot(grid[len(names) + 1, 1])
    attained = [(summaries[n]["slo_attainment"] or 0.0) * 100 for n in names]
    bars = share.bar(positions, attained, color=colors)
    share.axhline(95, color="0.3", lw=0.8, ls="--")
    share.set_ylim(0, 105)
    share.set_xticks(positions, names, rotation=30, ha="right", fontsize="small")
    share.set_ylabel("% of requests within the SLO")
    share.set_title("SLO attainment (dashed: 95%, what a p95 SLO asks)", fontsize="small")
    for bar, value in zip(bars, attained, strict=True):
        share.annotate(
            f"{value:.1f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize="x-small",
        )
    fig.subplots_adjust(left=0.07, right=0.97, top=1 - 0.6 / height, bottom=0.9 / height)
    return save(fig, path, dpi=90)
