"""How does the operator's policy do against the oracle and today's autoscalers, trace by trace?

Every cell is one ``loadgen.fleet.compare.compare`` (what ``loadgen simulate`` runs) of one trace on one
engine profile at one p95 TTFT SLO. The traces: the shared Mooncake conversation trace (long prompts;
skipped with a note when ``shared/traces`` is not beside the repository) and two synthetic hours made with
``loadgen.traffic.synthetic`` that have the shape the policy is judged on elsewhere: short prompts (about
1-1.5k tokens median) and bursty arrivals (Gamma gaps, CV 2.5-3). ``random-SEED`` (e.g. ``--traces
random-1,random-2``; ``random-4..22`` for a range) adds an hour of a shape drawn from the seed
(``loadgen.traffic.synthetic.random_hour``), ``wander-SEED`` an hour whose rate drifts instead
(``wandering_hour``), and ``code-SEED`` an hour of code completions, long prompts for short answers, that
steps and spikes (``completion_hour``), for checking a change on traffic it was not tuned on. The
cells: each trace on a10g at 1 s and 3 s, and on h100 at 1 s; ``--cells`` takes any other SLO on either
GPU as ``<gpu>-<SLO>s`` (``a10g-2s``, ``h100-0.5s``), for checking one at an SLO it was not tuned on. As a
user would, each cell pins ``maxConcurrency`` at the knee ``loadgen knee`` finds for the profile on the
trace's own requests (``loadgen.client.knee.sweep_simulated``: the same sweep and criterion in simulated
time; the SLO joins the criterion only where one request alone meets it).

One line per cell, then a last line ``cells=N within_1.15x_oracle=K within_1.15x_reactive=Q attainment_met=A
shortfall=S dominated=D runaway=R needs_foresight=F reachable_missed=M``:

* ``within_1.15x_oracle``: the policy's GPU-seconds at most 1.15x what the oracle's schedule (planned
  with the future) costs at the attainment the policy reached (``gpu_vs_oracle``);
* ``within_1.15x_reactive``: the same against the reactive bound (``loadgen.fleet.policies.plan_reactive``:
  exact knowledge of the past and of the capacity, no foresight; ``gpu_vs_reactive``). A cell far above the
  oracle and within this is one where the oracle's lead is foresight;
* ``attainment_met``: feasible SLO attainment (``slo_attainment_feasible``: the requests an idle engine
  serves within the SLO) at least the oracle's less 1 point, and at least 95% wherever the oracle got there;
* ``shortfall``: the points of attainment below that floor, summed over the cells that miss it (0.0 when all
  meet it): how far, where ``attainment_met`` says only how many;
* ``dominated``: cells where a baseline (not the oracle) is no dearer and attains at least as much, and is
  better in one of the two;
* ``runaway``: cells where the SLO is unattainable (more than 5% of the requests miss it even on an idle
  engine) and the policy spent more GPU-seconds than static-peak;
* ``needs_foresight``: cells where no run of the reactive bound reaches the attainment floor within 1.15x
  what the oracle spends at the same attainment (each cell's ``reactive_at_floor``: the least such ratio, or
  ``none`` when no run reaches the floor). There, the two targets together ask for knowing the future;
* ``reachable_missed``: the other cells where the policy misses the 1.15x or the attainment target: what
  reacting well would win.

    .venv/bin/python bench/policy_matrix.py [--ceiling knee|profile] [--cells a10g-1s,h100-1s] [--traces burst-day]
                                            [--reuse DIR]

``--reuse DIR`` keeps each cell's comparison in DIR and, on the next run, runs only the operator's policy
again against the kept baselines and oracle: seconds a cell instead of minutes, for trying a change to the
policy. A cell is kept under a digest of the sources the other runs execute (``loadgen/``, the operator
package but its policy and autoscaler, and ``bench/matrix_cells.py``, where the traces and cells are; not
this report) and of the trace's requests, so a change to any of them runs the whole cell again.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from matrix_cells import (
    CELLS,
    chosen_policies,
    kept_name,
    parse_cell,
    requests_key,
    reuse_key,
    run_cell,
    traces,
)

from loadgen.fleet.compare import Comparison
from loadgen.fleet.policies import BOUNDS, POLICY_NAMES

GPU_TARGET = 1.15
ATTAINMENT_SLACK = 0.01
UNATTAINABLE_SHARE = 0.05


def judge(comparison: Comparison) -> dict[str, Any]:
    """The cell's verdicts for the ``inferscale`` policy (see the module docstring)."""
    summaries = comparison.summaries()
    ours, oracle = summaries["inferscale"], summaries.get("oracle")
    attained = ours["slo_attainment_feasible"] or 0.0
    oracle_attained = (oracle or {}).get("slo_attainment_feasible") or 0.0
    ratio, reactive = ours.get("gpu_vs_oracle"), ours.get("gpu_vs_reactive")
    # The feasible requests are the accepted ones an idle engine serves within the SLO.
    accepted = ours["requests"] - ours["rejected"]
    unattainable = accepted - len(comparison.feasible) > UNATTAINABLE_SHARE * max(1, accepted)
    floor = oracle_attained - ATTAINMENT_SLACK
    if oracle_attained >= 0.95:
        floor = max(floor, 0.95)
    better = [
        name
        for name, s in summaries.items()
        if name != "inferscale"
        and name not in BOUNDS
        and s["gpu_seconds"] <= ours["gpu_seconds"]
        and (s["slo_attainment_feasible"] or 0.0) >= attained
        and (s["gpu_seconds"] < 0.99 * ours["gpu_seconds"] or (s["slo_attainment_feasible"] or 0.0) > attained + 1e-3)
    ]
    at_floor = reaction_at_floor(comparison, floor)
    # Without both bounds' runs there is nothing to say either way; with them, None is no run reaching the floor.
    bounds_ran = comparison.reactive is not None and comparison.oracle is not None
    static = summaries.get("static-peak")
    runaway = unattainable and static is not None and ours["gpu_seconds"] > static["gpu_seconds"]
    unattainable_said = any(row.reason == "SLOUnattainable" for row in comparison.results["inferscale"].timeseries)
    return {
        "ratio": ratio,
        "within": ratio is not None and ratio <= GPU_TARGET,
        "reactive_ratio": reactive,
        "within_reactive": reactive is not None and reactive <= GPU_TARGET,
        "attainment_met": attained >= floor,
        "shortfall": max(0.0, floor - attained),
        "attainment": attained,
        "oracle_attainment": oracle_attained,
        "dominated_by": better,
        "unattainable": unattainable,
        "unattainable_said": unattainable_said,
        "runaway": runaway,
        "reactive_at_floor": at_floor,
        "needs_foresight": bounds_ran and (at_floor is None or at_floor > GPU_TARGET),
    }


def reaction_at_floor(comparison: Comparison, floor: float) -> float | None:
    """The least GPU-seconds, over what the oracle spends at the same attainment, among the reactive bound's
    runs that reach ``floor``: what exact reaction, without foresight, costs there. None when none reaches it."""
    reactive, oracle = comparison.reactive, comparison.oracle
    if reactive is None or oracle is None:
        return None
    ratios = []
    for gpu_seconds, attained in reactive.frontier:
        if attained < floor:
            continue
        cost, _ = oracle.gpu_seconds_at(attained)
        if cost > 0:
            ratios.append(gpu_seconds / cost)
    return min(ratios, default=None)


def excess_over_oracle(comparison: Comparison) -> tuple[float, dict[str, float]]:
    """The policy's replica-seconds, and those above the oracle's count at the same moment by what held them.

    Each tick's count lasts until the next tick and is put down to that tick's reason; a hold by the
    scale-down window (the highest recommendation within it) is told apart from the other Stabilizing holds.
    The oracle knows the future, so not all of the excess can be saved: this says where it is, not what to cut.
    """
    rows, oracle = comparison.results["inferscale"].timeseries, comparison.results["oracle"].timeseries
    oracle_times = [row.t for row in oracle]
    total, excess = 0.0, defaultdict[str, float](float)
    for row, following in itertools.pairwise(rows):
        span = following.t - row.t
        total += row.replicas * span
        planned = oracle[max(0, bisect.bisect_right(oracle_times, row.t) - 1)].replicas if oracle else 0
        if row.replicas > planned:
            held_by = row.reason
            if row.reason == "Stabilizing":
                held_by += " (scale-down window)" if "scale-down window" in row.message else " (other)"
            excess[held_by] += (row.replicas - planned) * span
    return total, excess


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", default="mooncake-conversation,burst-day,spikes")
    parser.add_argument("--cells", default=",".join(c.name for c in CELLS))
    parser.add_argument("--policies", default=",".join(POLICY_NAMES), help="inferscale, oracle and reactive always run")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--ceiling",
        choices=("knee", "profile"),
        default="knee",
        help="maxConcurrency: the knee found on the trace (default) or the profile's own, as `loadgen simulate` runs",
    )
    parser.add_argument("--json", metavar="OUT", help="also write every cell's summaries here")
    parser.add_argument(
        "--reuse",
        metavar="DIR",
        type=Path,
        help="keep each cell's baselines here and, while their sources are unchanged, run only inferscale again",
    )
    args = parser.parse_args()
    try:
        cells = [parse_cell(name) for name in args.cells.split(",")]
    except ValueError as error:
        parser.error(str(error))
    policies = chosen_policies(args.policies.split(","))
    started = time.perf_counter()
    report: dict[str, Any] = {}
    counts = Counter[str]()
    replica_seconds, excess, shortfall = 0.0, defaultdict[str, float](float), 0.0
    # The kept comparisons are those of these sources and these policies.
    key = reuse_key(policies) if args.reuse else ""
    for trace_name, arrivals in traces(args.traces.split(",")).items():
        # ... and of these requests: a trace file edited in place is a new cell.
        requests = requests_key(arrivals) if args.reuse else ""
        for cell in cells:
            t0 = time.perf_counter()
            name = kept_name(trace_name, cell, args.ceiling, key, requests)
            kept = args.reuse / name if args.reuse else None
            comparison, reused = run_cell(
                arrivals, cell, ceiling=args.ceiling, policies=policies, workers=args.workers, kept=kept
            )
            verdict = judge(comparison)
            summaries = comparison.summaries()
            ours, oracle = summaries["inferscale"], summaries["oracle"]
            counts["cells"] += 1
            counts["within"] += verdict["within"]
            counts["within_reactive"] += verdict["within_reactive"]
            counts["attainment_met"] += verdict["attainment_met"]
            shortfall += verdict["shortfall"]
            counts["dominated"] += bool(verdict["dominated_by"])
            counts["runaway"] += verdict["runaway"]
            counts["needs_foresight"] += verdict["needs_foresight"]
            missed = not (verdict["within"] and verdict["attainment_met"])
            counts["reachable_missed"] += missed and not verdict["needs_foresight"]
            cell_total, cell_excess = excess_over_oracle(comparison)
            replica_seconds += cell_total
            for held_by, seconds in cell_excess.items():
                excess[held_by] += seconds
            others = " ".join(
                f"{name}={s['gpu_seconds']:.0f}/{(s['slo_attainment_feasible'] or 0) * 100:.1f}%"
                for name, s in summaries.items()
                if name != "inferscale" and name not in BOUNDS
            )
            ratio = "-" if verdict["ratio"] is None else f"{verdict['ratio']:.2f}"
            vs_reactive = "-" if verdict["reactive_ratio"] is None else f"{verdict['reactive_ratio']:.2f}"
            at_floor = "none" if verdict["reactive_at_floor"] is None else f"{verdict['reactive_at_floor']:.2f}"
            bound = summaries.get("reactive")
            reacting = (
                ""
                if bound is None
                else f" | reactive gpu_s={bound['gpu_seconds']:.0f} "
                f"feasible={(bound['slo_attainment_feasible'] or 0) * 100:.1f}%"
            )
            print(
                f"{trace_name} {cell.name} ceiling={comparison.settings.spec.max_concurrency}: "
                f"inferscale gpu_s={ours['gpu_seconds']:.0f} "
                f"feasible={verdict['attainment'] * 100:.1f}% vs_oracle={ratio} vs_reactive={vs_reactive} "
                f"max_rep={ours['max_replicas']} | oracle gpu_s={oracle['gpu_seconds']:.0f} "
                f"feasible={verdict['oracle_attainment'] * 100:.1f}%{reacting} | {others} | "
                f"within={verdict['within']} attainment_met={verdict['attainment_met']} "
                f"dominated_by={','.join(verdict['dominated_by']) or '-'} "
                f"unattainable={verdict['unattainable']} said={verdict['unattainable_said']} "
                f"runaway={verdict['runaway']} reactive_at_floor={at_floor} "
                f"({time.perf_counter() - t0:.0f}s{', baselines kept' if reused else ''})",
                flush=True,
            )
            report[f"{trace_name}/{cell.name}"] = {"verdict": verdict, "summaries": summaries}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"wall_seconds={time.perf_counter() - started:.0f}")
    if replica_seconds > 0:
        # Where the replica-seconds above the oracle's schedule went, over every cell.
        share = sum(excess.values()) / replica_seconds
        most_first = sorted(excess.items(), key=lambda item: -item[1])
        held = ", ".join(f"{reason} {seconds / replica_seconds:.1%}" for reason, seconds in most_first)
        print(f"above_oracle={share:.1%} of inferscale's replica-seconds, held by: {held}")
    print(
        f"cells={counts['cells']} within_{GPU_TARGET}x_oracle={counts['within']} "
        f"within_{GPU_TARGET}x_reactive={counts['within_reactive']} "
        f"attainment_met={counts['attainment_met']} shortfall={shortfall * 100:.1f} "
        f"dominated={counts['dominated']} runaway={counts['runaway']} "
        f"needs_foresight={counts['needs_foresight']} reachable_missed={counts['reachable_missed']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
