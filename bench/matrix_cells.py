"""What a cell of ``bench/policy_matrix.py`` runs: the traces, the cells, and how a cell's comparison is made.

This is apart from the matrix's report because ``--reuse DIR`` keeps each cell's comparison (the oracle and
the baselines) under a digest of the sources those runs execute (``baseline_digest``), and this file is one
of them: a change here runs every cell again. The verdicts and the printing in ``policy_matrix.py`` are not,
so a change to the report keeps every cell kept. ``bench/timeline.py`` gets its cell from here too.
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loadgen.client.knee import KneeVerdict, find_knee, sweep_simulated
from loadgen.engine.profiles import EngineProfile, get_profile
from loadgen.fleet.compare import Comparison, Settings, compare, default_spec, engine_for, rerun
from loadgen.fleet.policies import BOUNDS, POLICY_NAMES, refused_requests
from loadgen.traffic.shapes import Arrival, Lognormal
from loadgen.traffic.synthetic import completion_hour, random_hour, synthetic_arrivals, wandering_hour
from loadgen.traffic.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACE = ROOT.parent / "shared" / "traces" / "mooncake_conversation_2025.csv.gz"
# Run only by the operator's own policy: a change to them leaves the other runs of a cell as they were.
POLICY_ONLY_SOURCES = ("operator/inferscale/policy.py", "operator/inferscale/autoscaler.py")
# Hours drawn from a seed: ramps, steps and spikes, a rate that wanders, or code completions (long prompts,
# short answers) that step and spike.
RANDOM_FAMILIES = {"random": random_hour, "wander": wandering_hour, "code": completion_hour}


@dataclass(frozen=True)
class Cell:
    name: str
    profile: str
    slo_s: float


# The engine profile (``loadgen.engine.profiles``) a cell's GPU names.
GPU_PROFILES = {"a10g": "a10g-llama3-8b-awq", "h100": "h100-llama3-8b-bf16"}


def parse_cell(name: str) -> Cell:
    """The cell ``name`` names, ``<gpu>-<SLO>s``: ``a10g-3s`` is the a10g profile at a p95 TTFT SLO of 3 s. The
    matrix runs ``CELLS``; any other SLO on either GPU (``h100-0.5s``, ``a10g-2s``) checks the policy at an SLO
    it was not tuned on."""
    gpu, _, slo = name.partition("-")
    try:
        slo_s = float(slo.removesuffix("s")) if slo.endswith("s") else math.nan
    except ValueError:
        slo_s = math.nan
    if gpu not in GPU_PROFILES or not 0 < slo_s < math.inf:
        raise ValueError(f"unknown cell {name!r}: name one as <gpu>-<SLO>s, the gpu one of {', '.join(GPU_PROFILES)}")
    return Cell(name, GPU_PROFILES[gpu], slo_s)


CELLS = tuple(parse_cell(name) for name in ("a10g-1s", "a10g-3s", "h100-1s"))


def burst_day() -> list[Arrival]:
    """An hour like a compressed working day, in bursts: 2 -> 7 req/s and back, chat-length requests."""
    knots = ((0.0, 2.0), (600.0, 3.0), (1500.0, 7.0), (2100.0, 7.0), (2700.0, 3.0), (3600.0, 2.0))
    return synthetic_arrivals(
        duration=3600.0,
        knots=knots,
        seed=11,
        prompt=Lognormal(median=1100, sigma=0.9, max=8192),
        output=Lognormal(median=220, sigma=0.8, max=2048),
        cv=2.5,
    )


def spikes() -> list[Arrival]:
    """An hour at 3 req/s with three spikes (to 9, 12 and 7 req/s for 2, 1 and 3 minutes), very bursty."""
    knots = (
        (0.0, 3.0), (900.0, 3.0), (900.01, 9.0), (1020.0, 9.0), (1020.01, 3.0), (2000.0, 3.0), (2000.01, 12.0),
        (2060.0, 12.0), (2060.01, 3.0), (2800.0, 3.0), (2800.01, 7.0), (2980.0, 7.0), (2980.01, 3.0),
    )  # fmt: skip
    return synthetic_arrivals(
        duration=3600.0,
        knots=knots,
        seed=12,
        prompt=Lognormal(median=1400, sigma=1.0, max=16384),
        output=Lognormal(median=150, sigma=1.0, max=1024),
        cv=3.0,
    )


def expand(names: Sequence[str]) -> list[str]:
    """The trace names, with ``random-A..B`` standing for random-A to random-B (``wander-A..B`` and
    ``code-A..B`` alike)."""
    out: list[str] = []
    for name in names:
        family, _, seeds = name.partition("-")
        first, dots, last = seeds.partition("..")
        if family in RANDOM_FAMILIES and dots and first.isdigit() and last.isdigit():
            out += [f"{family}-{seed}" for seed in range(int(first), int(last) + 1)]
        else:
            out.append(name)
    return out


def _drawn(name: str) -> tuple[str, list[Arrival]] | None:
    """``(description, arrivals)`` of a name like ``random-4``, ``wander-2`` or ``code-3``, None for any other."""
    family, _, seed = name.partition("-")
    return RANDOM_FAMILIES[family](int(seed)) if family in RANDOM_FAMILIES and seed.isdigit() else None


def traces(names: Sequence[str]) -> dict[str, list[Arrival]]:
    out: dict[str, list[Arrival]] = {}
    for name in expand(names):
        if name == "mooncake-conversation":
            if not SHARED_TRACE.exists():
                print(f"# {name}: {SHARED_TRACE} is not beside the repository; skipped", flush=True)
                continue
            out[name] = list(read_trace(SHARED_TRACE).arrivals)
        elif name == "burst-day":
            out[name] = burst_day()
        elif name == "spikes":
            out[name] = spikes()
        elif (drawn := _drawn(name)) is not None:
            description, out[name] = drawn
            print(f"# {name}: {description}", flush=True)
        else:
            raise SystemExit(
                f"unknown trace {name!r}; known: mooncake-conversation, burst-day, spikes, "
                "random-SEED, wander-SEED or code-SEED (e.g. random-1), random-A..B and the like (a range)"
            )
    return out


def knee_for(profile: EngineProfile, arrivals: Sequence[Arrival], slo_s: float) -> KneeVerdict:
    """The concurrency ``loadgen knee`` would recommend for this engine on these requests."""
    refused = refused_requests(arrivals, profile)
    requests = [(a.prompt_tokens, a.max_tokens) for i, a in enumerate(arrivals) if i not in refused]
    levels = sweep_simulated(profile.with_overrides(max_num_seqs=256), requests)
    baseline = levels[0].ttft_p95
    return find_knee(levels, slo_ttft=slo_s if baseline is not None and baseline < slo_s else None)


def baseline_digest() -> str:
    """A digest of every source the baselines, the oracle and the simulated fleet run (``--reuse``)."""
    digest = hashlib.sha256()
    sources = [*ROOT.glob("loadgen/**/*.py"), *ROOT.glob("operator/inferscale/**/*.py"), Path(__file__).resolve()]
    for path in sorted(sources):
        name = path.relative_to(ROOT).as_posix()
        if name not in POLICY_ONLY_SOURCES:
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def chosen_policies(asked: Sequence[str]) -> tuple[str, ...]:
    """The policies a cell runs: inferscale and the bounds always, then those asked for (``--policies``)."""
    return tuple(dict.fromkeys(["inferscale", *BOUNDS, *asked]))


def reuse_key(policies: Sequence[str]) -> str:
    """What the kept comparisons of a run are kept under: the sources they ran (``baseline_digest``) and
    the policies they hold (``--reuse``)."""
    return hashlib.sha256(f"{baseline_digest()} {sorted(policies)}".encode()).hexdigest()[:16]


def requests_key(arrivals: Sequence[Arrival]) -> str:
    """A digest of the trace's requests: a trace file edited in place is a new cell (``--reuse``)."""
    return hashlib.sha256(pickle.dumps(arrivals)).hexdigest()[:12]


def kept_name(trace_name: str, cell: Cell, ceiling: str, key: str, requests: str) -> str:
    """The file a cell's comparison is kept in under ``--reuse DIR`` (``key`` from ``reuse_key``, ``requests``
    from ``requests_key``); ``bench/timeline.py`` finds it by the same name."""
    return f"{trace_name}__{cell.name}__{ceiling}__{key}-{requests}.pickle"


def run_cell(
    arrivals: Sequence[Arrival], cell: Cell, *, ceiling: str, policies: Sequence[str], workers: int, kept: Path | None
) -> tuple[Comparison, bool]:
    """One cell's comparison, and whether its other runs came from ``kept`` (then only inferscale ran)."""
    if kept is not None and kept.exists():
        comparison = pickle.loads(kept.read_bytes())  # written by this bench into the user's own directory
        return rerun(comparison, arrivals), True
    profile = get_profile(cell.profile)
    if ceiling == "knee":
        profile = profile.with_overrides(max_num_seqs=knee_for(profile, arrivals, cell.slo_s).concurrency or 1)
    spec = default_spec(profile, cell.slo_s)
    settings = Settings(
        profile=engine_for(profile, spec),
        spec=spec,
        slo_ttft_s=cell.slo_s,
        policies=tuple(p for p in POLICY_NAMES if p in policies),
    )
    comparison = compare(arrivals, settings, workers=workers)
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(pickle.dumps(comparison))
    return comparison, False
