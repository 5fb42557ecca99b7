"""How fast does the fleet simulator compare every scaling policy on an hour of traffic?

One simulated hour of Poisson arrivals at 20 req/s (about 72,000 requests; seed 1), prompts lognormal
around 512 tokens (sigma 0.6, at most 4,096) and outputs lognormal around 128 tokens (sigma 0.5, at most
1,024), on the ``a10g-llama3-8b-awq`` profile (max_num_seqs 8, 90 s cold start) with a 1 s p95 TTFT SLO.
All six policies run on the same arrivals (``loadgen.fleet.compare.compare``, exactly what ``loadgen
simulate`` runs), in ``--workers`` processes (2 by default, the machine's cores): first the capacity
curve the static-peak and oracle baselines are sized from, then every policy, the oracle's search
included. Target: at most 60 s of wall time in total.

Prints the comparison table, each policy's GPU-seconds and SLO attainment as ``key=value`` lines, the wall
and CPU time of each part, and last ``wall_seconds=W`` (from building the arrivals to the last result).

    .venv/bin/python bench/fleet_sim.py [--workers 2] [--json out.json] [--png out.png]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from loadgen.cli.argtypes import png_path
from loadgen.engine.profiles import get_profile
from loadgen.fleet.compare import Settings, compare, default_spec, engine_for, format_table, write_png
from loadgen.traffic.shapes import Constant, Lognormal, build_schedule

RATE_RPS = 20.0
DURATION_S = 3600.0
PROMPT = Lognormal(median=512, sigma=0.6, max=4096)
OUTPUT = Lognormal(median=128, sigma=0.5, max=1024)
PROFILE = "a10g-llama3-8b-awq"
SLO_S = 1.0
TARGET_S = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="processes (default 2)")
    parser.add_argument("--json", metavar="OUT", help="also write the comparison JSON here")
    parser.add_argument("--png", type=png_path, metavar="OUT", help="also draw the comparison here (not timed)")
    args = parser.parse_args()

    started, cpu = time.perf_counter(), time.process_time()
    arrivals = build_schedule(Constant(RATE_RPS, poisson=True), DURATION_S, prompt=PROMPT, output=OUTPUT, seed=1)
    profile = get_profile(PROFILE)
    spec = default_spec(profile, SLO_S)
    settings = Settings(profile=engine_for(profile, spec), spec=spec, slo_ttft_s=SLO_S)
    print(
        f"{len(arrivals)} requests over {DURATION_S:.0f}s (Poisson {RATE_RPS:g} req/s, prompts {PROMPT.describe()}, "
        f"outputs {OUTPUT.describe()}), {PROFILE}, SLO p95 TTFT <= {SLO_S:g}s, {args.workers} workers",
        flush=True,
    )
    comparison = compare(
        arrivals, settings, workers=args.workers, progress=lambda message: print(f"  {message}", flush=True)
    )
    wall = time.perf_counter() - started
    print(format_table(comparison))
    for name, summary in comparison.summaries().items():
        print(f"{name} gpu_seconds={summary['gpu_seconds']:.0f} slo_attainment={summary['slo_attainment']:.4f}")
    parts = " ".join(f"{name}={seconds:.1f}s" for name, seconds in comparison.wall_seconds.items())
    print(f"wall per part (in its worker): {parts}; main-process CPU {time.process_time() - cpu:.1f}s")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(comparison.to_json(timeseries=False), out, indent=1)
    if args.png:
        write_png(comparison, args.png)
    if wall > TARGET_S:
        print(f"(over the {TARGET_S:.0f}s target)", file=sys.stderr)
    print(f"wall_seconds={wall:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
