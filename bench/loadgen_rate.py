"""How fast can loadgen's open-loop client send on this machine, keeping to its schedule?

Starts a simengine in a subprocess on 127.0.0.1 (its own process, so the server does not share the
client's event loop) with a profile fast enough not to be the bottleneck and no practical concurrency
ceiling, then steps the request rate up. Each step is an open-loop run of evenly spaced requests, each a
64-token streamed completion (``loadgen.client.runner.run_open_loop``, exactly what ``loadgen run`` uses). A rate
is sustained when the schedule lag p99 (after a warm-up) is at most 10 ms, every request completes with its
64 tokens, and the server kept up (TTFT p99 <= 250 ms; beyond that the step measures the server's queue,
not the client). A failing rate is tried once more (the development machines are shared, and a burst of
someone else's work can fail one step). After the first rate that fails twice it bisects once between
the last pass and it.

Per step it prints the lag, TTFT, the CPU share the client and the server used, and the machine's CPU
pressure (Linux PSI: the share of time some runnable task waited for a CPU), so a limit can be read off: a
client near 100% of a core is the client's limit; on a 2-core machine a server near 100% takes the other
core; high pressure with both well below 100% means other processes took the CPUs. Bounded to about
2.5 minutes. The last line is ``rate_rps=R lag_p99_ms=L``.

    .venv/bin/python bench/loadgen_rate.py [--step-seconds 8] [--budget 150]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from inferscale.api import Engine

from loadgen.client.runner import ClientConfig, StreamingClient, run_open_loop
from loadgen.client.stats import percentile
from loadgen.engine.profiles import EngineProfile
from loadgen.traffic.shapes import Constant, Fixed, build_schedule

LAG_P99_LIMIT_S = 0.010
KEEP_UP_TTFT_P99_S = 0.25
"""A step counts only if the server kept up: TTFT p99 under this, so no queue built up in the engine (its
model admits every request at the next 4 ms step); otherwise the step measures the server, not the client."""
OUTPUT_TOKENS = 64
PROMPT_TOKENS = 16
RATES = (100, 200, 300, 400, 500, 600, 700, 800, 1000, 1200, 1500)

# Not calibrated to hardware: 4 ms per decode step whatever the batch (64 tokens in ~0.26 s, so each token
# is its own SSE event on the wire, as with a real engine under load), instant prefill, room for any batch.
BENCH_PROFILE = EngineProfile(
    name="bench",
    description="loadgen rate benchmark: paced tokens, no concurrency ceiling",
    decode_step_s=0.004,
    decode_growth_s=0.0,
    prefill_rate_tps=10_000_000.0,
    prefill_overhead_s=0.0,
    kv_capacity_tokens=50_000_000,
    max_num_seqs=1_000_000,
    max_model_len=4096,
    max_num_batched_tokens=None,
    cold_start_s=0.0,
    cold_start_uncached_s=0.0,
    sources=("bench/loadgen_rate.py",),
)


def serve(decode_step_s: float) -> None:
    """Child process: run the simengine with BENCH_PROFILE on a free port and log its URL."""
    from loadgen.engine.server import ServerConfig
    from loadgen.engine.server import serve as serve_engine

    logging.basicConfig(level="INFO", format="%(message)s", stream=sys.stderr)
    profile = dataclasses.replace(BENCH_PROFILE, decode_step_s=decode_step_s)
    config = ServerConfig(engine=Engine.VLLM, profile=profile, model_name="bench", max_concurrent_requests=1_000_000)
    asyncio.run(serve_engine(config, "127.0.0.1", 0))


def start_server(decode_step_s: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--decode-step-ms", str(decode_step_s * 1e3)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise SystemExit("bench: the simengine did not start (no URL in its log)")


def cpu_pressure_us() -> float | None:
    """Microseconds some runnable task waited for a CPU, machine-wide (Linux PSI), or None if unknown."""
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return float(some.rsplit("total=", 1)[1])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def step(
    client: StreamingClient, rate: float, seconds: float, warmup: float, server_pid: int
) -> dict[str, float]:
    schedule = build_schedule(
        Constant(rate), warmup + seconds, prompt=Fixed(PROMPT_TOKENS), output=Fixed(OUTPUT_TOKENS), seed=1
    )
    me0, srv0, wall0, psi0 = time.process_time(), cpu_seconds(server_pid), time.monotonic(), cpu_pressure_us()
    result = await run_open_loop(client, schedule, warmup=warmup, drain_timeout=10.0)
    wall = time.monotonic() - wall0
    me, srv, psi1 = time.process_time() - me0, cpu_seconds(server_pid) - srv0, cpu_pressure_us()
    pressure = (psi1 - psi0) / 1e6 / wall if psi0 is not None and psi1 is not None else -1.0
    measured = [r for r in result.measurement.records if not r.warmup]
    lags = sorted(r.lag for r in measured if r.lag is not None)
    ttfts = sorted(t for r in measured if (t := r.ttft) is not None and r.ok)
    tokens_ok = all(r.output_tokens == OUTPUT_TOKENS for r in measured if r.ok)
    return {
        "rate": rate,
        "sent": len(measured),
        "errors": sum(1 for r in measured if r.error is not None),
        "lag_p50": percentile(lags, 50) or 0.0,
        "lag_p99": percentile(lags, 99) or 0.0,
        "lag_max": lags[-1] if lags else 0.0,
        "ttft_p50": percentile(ttfts, 50) or 0.0,
        "ttft_p99": percentile(ttfts, 99) or 0.0,
        "client_cpu": me / wall,
        "server_cpu": srv / wall,
        "tokens_ok": float(tokens_ok),
        "kept_up": float(bool(ttfts) and (percentile(ttfts, 99) or 0.0) <= KEEP_UP_TTFT_P99_S),
        "pressure": pressure,
    }


def passed(row: dict[str, float]) -> bool:
    return (
        row["lag_p99"] <= LAG_P99_LIMIT_S and row["errors"] == 0 and row["tokens_ok"] == 1.0 and row["kept_up"] == 1.0
    )


def verdict(row: dict[str, float]) -> str:
    if passed(row):
        return "pass"
    why = []
    if row["lag_p99"] > LAG_P99_LIMIT_S:
        why.append("client lag")
    if row["errors"] or row["tokens_ok"] != 1.0:
        why.append("errors")
    if row["kept_up"] != 1.0:
        why.append("server behind")
    return "FAIL (" + ", ".join(why) + ")"


def show(row: dict[str, float]) -> None:
    print(
        f"rate {row['rate']:6.0f}/s  sent {row['sent']:5.0f}  errors {row['errors']:3.0f}  "
        f"lag p50/p99/max {row['lag_p50'] * 1e3:5.2f}/{row['lag_p99'] * 1e3:6.2f}/{row['lag_max'] * 1e3:6.1f} ms  "
        f"TTFT p50/p99 {row['ttft_p50'] * 1e3:6.1f}/{row['ttft_p99'] * 1e3:7.1f} ms  "
        f"CPU client {row['client_cpu']:4.0%} server {row['server_cpu']:4.0%}  "
        f"CPU pressure {row['pressure']:4.0%}  "
        f"{verdict(row)}",
        flush=True,
    )


async def bench(url: str, server_pid: int, seconds: float, warmup: float, budget: float) -> tuple[float, float]:
    started = time.monotonic()
    best: dict[str, float] | None = None
    failed: dict[str, float] | None = None
    async with StreamingClient(ClientConfig(url, model="bench", timeout=30)) as client:
        await client.preflight()
        await step(client, 50, 1.0, 0.5, server_pid)  # open connections, warm caches
        for rate in RATES:
            if time.monotonic() - started + seconds + warmup + 5 > budget:
                print(f"(stopping: the {budget:.0f}s budget is used up)")
                break
            row = await step(client, rate, seconds, warmup, server_pid)
            show(row)
            if not passed(row) and time.monotonic() - started + seconds + warmup + 5 < budget:
                row = await step(client, rate, seconds, warmup, server_pid)  # once more: a shared machine
                show(row)
            if not passed(row):
                failed = row
                break
            best = row
        if best is not None and failed is not None and time.monotonic() - started + seconds + warmup + 5 < budget:
            mid = round((best["rate"] + failed["rate"]) / 2 / 25) * 25
            if best["rate"] < mid < failed["rate"]:
                row = await step(client, mid, seconds, warmup, server_pid)
                show(row)
                if passed(row):
                    best = row
    if best is None:
        return 0.0, failed["lag_p99"] if failed else 0.0
    return best["rate"], best["lag_p99"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--step-seconds", type=float, default=8.0, help="measured seconds per rate (8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per rate (2)")
    parser.add_argument("--budget", type=float, default=150.0, help="stop stepping after this many seconds (150)")
    parser.add_argument(
        "--decode-step-ms", type=float, default=BENCH_PROFILE.decode_step_s * 1e3, help="engine decode step (4)"
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.decode_step_ms / 1e3)
        return 0
    proc, url = start_server(args.decode_step_ms / 1e3)
    try:
        print(
            f"simengine (profile {BENCH_PROFILE.name}, decode step {args.decode_step_ms:g} ms) at {url}, "
            f"pid {proc.pid}; {os.cpu_count()} CPUs"
        )
        rate, lag = asyncio.run(bench(url, proc.pid, args.step_seconds, args.warmup, args.budget))
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()
    print(f"rate_rps={rate:.0f} lag_p99_ms={lag * 1e3:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
