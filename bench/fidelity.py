"""How close is the simulated engine to published vLLM figures, measured in the published conditions?

Each condition below is a published benchmark run (``../shared/notes/engine-profiles.md``, rows F2, F3,
F6), replayed through ``loadgen.engine.model.EngineModel`` in simulated time with the profile and the engine
flags the run used. The figures are computed the way the benchmark computed them (vLLM's
``benchmarks/benchmark_serving.py`` for F2/F3: TTFT over every request, TPOT over requests with more than
one output token, throughput over the run from the first send to the last reply).

* F2, F3 (LambdaLabsML/vllm-benchmark, H100 SXM, Llama-3-8B-Instruct bf16, vLLM v0.6.0, ``--max-model-len
  2048``, ``--max-num-seqs 1024``): 10 and 640 ShareGPT prompts sent at once, and the same repository's runs
  of 80 and 320 (rows F3/80, F3/320). The requests are the run's own
  (``input_lens``/``output_lens`` of its result JSON, in ``bench/data``); an output of 0 tokens (an empty
  reply) is simulated as one token and, as the benchmark did, counted with a TTFT of 0.
* F6 (yobitelcomm/bench concurrency-sweep, H100 80GB HBM3, Llama-3.1-8B-Instruct fp16, vLLM 0.21.0): a
  closed loop of 1, 4, 16 and 64 clients on ``llm.inference.chatbot-short``. The suite's lengths are not
  published: outputs of 128 tokens (D: the same suite's 72B envelope in that repository has total p50 =
  TTFT p50 + 127 x TPOT p50) and prompts of 128 tokens (an assumption: "short"; TTFT at concurrency 1 is
  14 ms, which bounds it to a few hundred tokens at most).

Not modelled, and so part of the error: the front end's jitter (it is a fixed ``frontend_s``), the
client's own gap between requests in a closed loop, multi-step scheduling's bursts (F2's ITL), and vLLM
v0.6's prompt-only steps (the model schedules as V1).

Prints one line per figure (published, simulated, error) and last
``figures=N within_10pct=K median_error_pct=E``.

    .venv/bin/python bench/fidelity.py [--profile h100-llama3-8b-bf16] [--only F3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loadgen.engine.model import EngineModel, Finished, FirstToken
from loadgen.engine.profiles import EngineProfile, get_profile

DATA = Path(__file__).resolve().parent / "data" / "lambdalabs_h100_llama3_8b_len2048.json"
WITHIN = 0.10
UNMODELLED = """\
(*) more than 10% off. Known causes outside the engine model:
  F3 TPOT p99: vLLM v0.6's scheduler ran prompt-only steps that paused every decode; the model schedules
     as V1 does (decodes first, prompts in the budget left), so no request's TPOT holds those pauses.
  F6 c=1 output tok/s: the run's own TTFT and TPOT give 153 tok/s for back-to-back 128-token replies; the
     published 122 holds a gap between requests on the client side.
  F6 c=4 TTFT: the front end (HTTP, tokenising, the hand-off to the engine) is a fixed 7.5 ms here; the
     run's spread (p99 32 ms against p50 23 ms) is jitter in the front end and the client, which it has not.
  F3 TTFT p99 and F2 TPOT median: not explained here (v0.6's prompt-first steps would admit the last
     prompts sooner than V1's budget does; F2's TPOT is an older, slower vLLM than F6's 6.5 ms).
  F6 c=16, c=64: that setup is capped at ~1,350 output tok/s from concurrency 16 on (F3 gets 7,790 on the
     same GPU and model), so its TPOT and TTFT there measure the cap, not the engine."""


@dataclass(frozen=True)
class Result:
    """Per-request outcome of one simulated run (times from the start of the run)."""

    prompt: list[int]
    output: list[int]  # tokens the benchmark counted (0 for an empty reply)
    sent: list[float]
    first: list[float]
    done: list[float]

    @property
    def duration(self) -> float:
        return max(self.done) - min(self.sent)

    def ttfts(self) -> list[float]:
        # benchmark_serving records 0.0 for a reply with no text; so do we
        return [f - s if o > 0 else 0.0 for s, f, o in zip(self.sent, self.first, self.output, strict=True)]

    def tpots(self) -> list[float]:
        return [(d - f) / (o - 1) for f, d, o in zip(self.first, self.done, self.output, strict=True) if o > 1]


def percentile(values: Sequence[float], q: float) -> float:
    """numpy's default (linear) percentile, which benchmark_serving uses."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def burst(profile: EngineProfile, prompts: Sequence[int], outputs: Sequence[int]) -> Result:
    """Every request sent at t=0, in order (benchmark_serving at request rate inf)."""
    model = EngineModel(profile, token_events=False)
    for i, (p, o) in enumerate(zip(prompts, outputs, strict=True)):
        model.submit(i, p, max(1, o), at=0.0)
    first: dict[int, float] = {}
    done: dict[int, float] = {}
    while (t := model.next_event_time()) is not None:
        for event in model.advance(t):
            if isinstance(event, FirstToken):
                first[int(event.request_id)] = event.t
            elif isinstance(event, Finished):
                done[int(event.request_id)] = event.t
    n = len(prompts)
    return Result(list(prompts), list(outputs), [0.0] * n, [first[i] for i in range(n)], [done[i] for i in range(n)])


def closed_loop(profile: EngineProfile, clients: int, requests: int, prompt: int, output: int) -> Result:
    """``clients`` users, each sending its next request the moment its last reply ends."""
    model = EngineModel(profile, token_events=False)
    sent: dict[int, float] = {}
    first: dict[int, float] = {}
    done: dict[int, float] = {}
    # Clients spread over one request's length, as a closed loop settles into (identical requests started
    # together would stay in lockstep, every prompt queued behind all the others).
    spread = profile.prefill_time(prompt) + output * profile.decode_step_time(clients)
    starts = sorted((k * spread / clients, k) for k in range(min(clients, requests)))
    next_id = 0
    while True:
        t = model.next_event_time()
        while starts and (t is None or starts[0][0] <= t):
            at, _ = starts.pop(0)
            model.submit(next_id, prompt, output, at=at)
            sent[next_id] = at
            next_id += 1
            t = model.next_event_time()
        if t is None:
            break
        for event in model.advance(t):
            if isinstance(event, FirstToken):
                first[int(event.request_id)] = event.t
            elif isinstance(event, Finished):
                done[int(event.request_id)] = event.t
                if next_id < requests:
                    model.submit(next_id, prompt, output, at=event.t)
                    sent[next_id] = event.t
                    next_id += 1
    ids = range(requests)
    return Result(
        [prompt] * requests,
        [output] * requests,
        [sent[i] for i in ids],
        [first[i] for i in ids],
        [done[i] for i in ids],
    )


@dataclass(frozen=True)
class Condition:
    row: str
    describe: str
    run: Callable[[EngineProfile], Result]
    flags: dict[str, int]
    figures: tuple[tuple[str, float, str, Callable[[Result], float]], ...]


def _out_tps(r: Result) -> float:
    return sum(r.output) / r.duration


def conditions() -> list[Condition]:
    data = json.loads(DATA.read_text())
    p10 = data["prompt_10"]
    # The LambdaLabs runs (vLLM v0.6.0): --max-model-len 2048 and benchmark.py's --max-num-seqs 1024 (its
    # default at 29dd18a; the F3 result itself needs more than 256: every TTFT is under 5.6 s while the median
    # latency is 8.7 s). Chunked prefill was off (v0.6 enabled it only past 32k context), so a prefill step
    # took up to max(max_model_len, 2048) = 2048 prompt tokens.
    lambda_flags = {"max_num_seqs": 1024, "max_model_len": 2048, "max_num_batched_tokens": 2048}
    ms = 1e3
    found = [
        Condition(
            "F2",
            "10 ShareGPT prompts at once (1,369 in / 1,867 out tokens)",
            lambda prof: burst(prof, p10["input_lens"], p10["output_lens"]),
            lambda_flags,
            (
                ("TTFT mean", 62.4, "ms", lambda r: ms * statistics.fmean(r.ttfts())),
                ("TTFT p99", 63.4, "ms", lambda r: ms * percentile(r.ttfts(), 99)),
                ("TPOT median", 7.56, "ms", lambda r: ms * statistics.median(r.tpots())),
                ("output tok/s", 347.9, "tok/s", _out_tps),
            ),
        )
    ]
    # The same runs at 80, 320 and 640 prompts (F3 is the 640; the other two are its repository's files
    # for the same model, GPU and day): req/s, output and input tok/s, TTFT mean and p99, TPOT median and p99.
    bursts = {
        "F3/80": ("prompt_80", (11.88, 2098, 2895, 536.0, 733.5, 9.94, 109.3)),
        "F3/320": ("prompt_320", (29.52, 6027, 6049, 1628.5, 2550.9, 20.03, 389.4)),
        "F3": ("prompt_640", (39.64, 7790, 8027, 3017.1, 5108.1, 33.34, 676.0)),
    }
    for row, (key, (rps, out_tps, in_tps, ttft, ttft99, tpot, tpot99)) in bursts.items():
        run = data[key]
        n = len(run["input_lens"])
        found.append(
            Condition(
                row,
                f"{n} ShareGPT prompts at once ({sum(run['input_lens']):,} in / {sum(run['output_lens']):,} out)",
                lambda prof, run=run: burst(prof, run["input_lens"], run["output_lens"]),  # type: ignore[misc]
                lambda_flags,
                (
                    ("requests/s", rps, "req/s", lambda r: len(r.output) / r.duration),
                    ("output tok/s", out_tps, "tok/s", _out_tps),
                    ("input tok/s", in_tps, "tok/s", lambda r: sum(r.prompt) / r.duration),
                    ("TTFT mean", ttft, "ms", lambda r: ms * statistics.fmean(r.ttfts())),
                    ("TTFT p99", ttft99, "ms", lambda r: ms * percentile(r.ttfts(), 99)),
                    ("TPOT median", tpot, "ms", lambda r: ms * statistics.median(r.tpots())),
                    ("TPOT p99", tpot99, "ms", lambda r: ms * percentile(r.tpots(), 99)),
                ),
            )
        )
    # vLLM V1's defaults for the OpenAI server on an H100 (vllm/engine/arg_utils.py): 1024 sequences, 8192
    # batched tokens per step, chunked prefill on.
    v1_flags = {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    # F6: yobitel concurrency sweep (conc: tok/s, TTFT p50, TTFT p99, TPOT p50).
    sweep = {1: (122.2, 13.98, 14.95, 6.48), 4: (580.3, 22.75, 32.18, 6.59), 16: (1384.2, 41.69, 64.71, 10.94)}
    sweep[64] = (1312.3, 86.92, 464.7, 46.91)
    for conc, (tps, t50, t99, tpot) in sweep.items():
        found.append(
            Condition(
                "F6",
                f"concurrency {conc}, 128 in / 128 out",
                lambda prof, c=conc: closed_loop(prof, c, max(40, 10 * c), 128, 128),  # type: ignore[misc]
                v1_flags,
                (
                    (f"c={conc} output tok/s", tps, "tok/s", _out_tps),
                    (f"c={conc} TTFT p50", t50, "ms", lambda r: ms * percentile(r.ttfts(), 50)),
                    (f"c={conc} TTFT p99", t99, "ms", lambda r: ms * percentile(r.ttfts(), 99)),
                    (f"c={conc} TPOT p50", tpot, "ms", lambda r: ms * percentile(r.tpots(), 50)),
                ),
            )
        )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="h100-llama3-8b-bf16", help="engine profile (default %(default)s)")
    parser.add_argument("--only", help="comma-separated rows, e.g. F3")
    args = parser.parse_args()
    base = get_profile(args.profile)
    only = set(args.only.split(",")) if args.only else None
    started = time.perf_counter()
    errors: list[float] = []
    print(f"{'row':6} {'figure':20} {'published':>10} {'simulated':>10} {'unit':5} {'error':>6}  condition")
    for cond in conditions():
        if only and cond.row not in only:
            continue
        profile = base.with_overrides(**cond.flags) if cond.flags else base  # type: ignore[arg-type]
        result = cond.run(profile)
        for name, published, unit, measure in cond.figures:
            simulated = measure(result)
            error = (simulated - published) / published
            errors.append(abs(error))
            flag = "" if abs(error) <= WITHIN else " *"
            print(
                f"{cond.row:6} {name:20} {published:>10,.1f} {simulated:>10,.1f} {unit:5} "
                f"{error * 100:>+5.0f}%{flag:2} {cond.describe}"
            )
    print(UNMODELLED)
    within = sum(1 for e in errors if e <= WITHIN)
    median = statistics.median(errors) * 100 if errors else 0.0
    print(f"profile {base.describe()}; {time.perf_counter() - started:.1f}s")
    print(f"figures={len(errors)} within_10pct={within} median_error_pct={median:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
