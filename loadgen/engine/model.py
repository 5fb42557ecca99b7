"""A pure, clock-agnostic model of a continuous-batching LLM engine (vLLM V1 or TGI v3 style).

The caller owns time. It submits requests at a time, advances the model to a time, and reads back the
events that happened in between. Nothing here sleeps, reads a clock, starts a thread or touches asyncio,
so the same model runs behind the HTTP simulator (advanced against the wall clock) and inside a
discrete-event fleet simulator (advanced from event to event, hours of trace in seconds)::

    model = EngineModel(get_profile("h100-llama3-8b-bf16"), token_events=False)
    model.submit("r1", prompt_tokens=512, max_tokens=128, at=0.0)
    while (t := model.next_event_time()) is not None:
        for event in model.advance(t):
            ...  # Scheduled, FirstToken, Finished, Preempted (and Token, Step with token_events=True)

How an engine step is modelled (one iteration of the scheduler, as in vLLM V1's ``Scheduler.schedule``):

1. Running requests are served first, in admission order: a decoding request needs one token of KV; a
   prefilling one gets the rest of its prompt, cut to what is left of the step's token budget
   (``max_num_batched_tokens``: decodes take their one token each first). When the KV cache has no
   free block for a request, the most recently admitted running request is preempted (recompute: its
   blocks are freed and it goes back to the front of the waiting queue, to re-prefill prompt plus output).
2. If nothing was preempted, waiting requests are admitted first-come-first-served while fewer than
   ``max_num_seqs`` are running, the token budget lasts and their (chunk of) prompt fits in the KV cache.
3. The step is one forward pass over every token scheduled in it, as in vLLM V1 ("There's no decoding
   phase nor prefill phase in the scheduler", ``vllm/v1/core/sched/scheduler.py``): with ``d`` sequences
   decoding and ``p`` prompt tokens it takes ``step(d) + p / rate``, where ``step(d) = step(1) + growth *
   (d - 1)`` (``EngineProfile.step_split``). A new prompt adds only its own tokens' compute to the batch's
   step, never a second pass; a long prompt is cut to what the budget leaves and finishes over several
   steps, each one a decode step for the others. A pass with prompt tokens only costs ``overhead + p /
   rate``. Tokens are produced at the end of the step; a request whose prompt is complete samples its first
   token then.

A request reaches the scheduler ``frontend_s`` after it is submitted (the profile's front-end latency:
HTTP, tokenising, the hand-off to the engine core), whatever the batch.

Prefix caching (continuous batching only, on by default as in vLLM V1): a request submitted with
``block_keys`` (one key per full block of its prompt, ``loadgen.traffic.prompts.block_keys`` or the simulator's
hash of the prompt text) starts from the longest run of its leading blocks that are cached, and computes
only the rest; its blocks are cached as it computes them (``loadgen.engine.prefix_cache`` has the rules and
their sources). A request without keys shares nothing, which is what a prompt of its own would do.

Runs of identical decode-only steps are advanced in one jump, so the cost of ``advance`` grows with the
number of events, not with the number of steps. ``BatchingMode.NAIVE`` instead serves fixed batches run to
completion, as a ``model.generate`` loop behind a web endpoint does: no request joins a running batch and
the batch keeps its size (padding) until its longest member is done.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from loadgen.engine.prefix_cache import PrefixCache
from loadgen.engine.profiles import EngineProfile

__all__ = [
    "BatchingMode",
    "EngineCounters",
    "EngineEvent",
    "EngineModel",
    "EngineSnapshot",
    "FinishReason",
    "Finished",
    "FirstToken",
    "Preempted",
    "RejectReason",
    "Rejection",
    "RequestRejected",
    "Scheduled",
    "Step",
    "Token",
    "validate_request",
]

RequestId = Hashable

_EPS = 1e-9


class BatchingMode(enum.StrEnum):
    """How the engine forms batches."""

    CONTINUOUS = "continuous"
    """Iteration-level scheduling: requests join and leave the batch at every step (vLLM, TGI)."""
    NAIVE = "naive"
    """Static batches: take up to ``max_num_seqs`` waiting requests, prefill, decode until all are done."""


class FinishReason(enum.StrEnum):
    """Why a request stopped (vLLM's ``finished_reason`` label values)."""

    LENGTH = "length"
    ABORT = "abort"
    STOP = "stop"
    """A stop string ended it (the model runs it to its token count; ``EngineRuntime`` names the reason)."""


class RejectReason(enum.StrEnum):
    """Why a request was refused before it reached the engine."""

    PROMPT_TOO_LONG = "prompt_too_long"
    TOTAL_TOO_LONG = "total_too_long"
    EMPTY_PROMPT = "empty_prompt"
    BAD_MAX_TOKENS = "bad_max_tokens"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A request the engine refuses, with the numbers that decided it."""

    reason: RejectReason
    prompt_tokens: int
    max_tokens: int
    max_model_len: int

    @property
    def message(self) -> str:
        """Engine-neutral explanation; the HTTP layer rewords it as vLLM or TGI would."""
        if self.reason is RejectReason.PROMPT_TOO_LONG:
            return (
                f"prompt of {self.prompt_tokens} tokens does not fit max_model_len={self.max_model_len}; "
                "shorten the prompt"
            )
        if self.reason is RejectReason.TOTAL_TOO_LONG:
            return (
                f"prompt ({self.prompt_tokens}) + max_tokens ({self.max_tokens}) exceeds "
                f"max_model_len={self.max_model_len}; lower max_tokens or shorten the prompt"
            )
        if self.reason is RejectReason.EMPTY_PROMPT:
            return "the prompt is empty; send at least one token"
        return f"max_tokens must be >= 1, got {self.max_tokens}"


class RequestRejected(ValueError):
    """The engine refused a request (too long for ``max_model_len``, empty, or a bad ``max_tokens``)."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.message)
        self.rejection = rejection


def validate_request(prompt_tokens: int, max_tokens: int, max_model_len: int) -> Rejection | None:
    """Why the engine would refuse this request, or ``None`` when it accepts it."""
    if prompt_tokens <= 0:
        return Rejection(RejectReason.EMPTY_PROMPT, prompt_tokens, max_tokens, max_model_len)
    if prompt_tokens >= max_model_len:
        return Rejection(RejectReason.PROMPT_TOO_LONG, prompt_tokens, max_tokens, max_model_len)
    if max_tokens < 1:
        return Rejection(RejectReason.BAD_MAX_TOKENS, prompt_tokens, max_tokens, max_model_len)
    if prompt_tokens + max_tokens > max_model_len:
        return Rejection(RejectReason.TOTAL_TOO_LONG, prompt_tokens, max_tokens, max_model_len)
    return None


# --- events ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scheduled:
    """The request entered the running batch at ``t`` (``resumed`` after a preemption)."""

    t: float
    request_id: RequestId
    resumed: bool
    cached_tokens: int = 0
    """Prompt tokens found in the prefix cache, which the engine does not compute."""


@dataclass(frozen=True, slots=True)
class FirstToken:
    """The request's first output token was produced at ``t`` (always emitted)."""

    t: float
    request_id: RequestId


@dataclass(frozen=True, slots=True)
class Token:
    """Output token number ``index`` (1-based) was produced at ``t`` (only with ``token_events=True``)."""

    t: float
    request_id: RequestId
    index: int


@dataclass(frozen=True, slots=True)
class Finished:
    """The request left the engine at ``t`` after ``generated`` output tokens."""

    t: float
    request_id: RequestId
    reason: FinishReason
    generated: int
    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class Preempted:
    """The request was evicted from the KV cache at ``t`` and will recompute (front of the queue)."""

    t: float
    request_id: RequestId
    generated: int


@dataclass(frozen=True, slots=True)
class Step:
    """``count`` identical engine steps, the first starting at ``start`` (only with ``token_events=True``).

    ``decode_seqs`` sequences decoded and ``prefill_tokens`` prompt tokens were computed in each step;
    ``decode_s`` and ``prefill_s`` split each step's duration between the two.
    """

    start: float
    duration: float
    count: int
    decode_seqs: int
    prefill_tokens: int
    prefill_seqs: int
    decode_s: float
    prefill_s: float
    sampled: int


EngineEvent = Scheduled | FirstToken | Token | Finished | Preempted | Step


# --- state -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """The engine's state at ``t``: what its gauges would read."""

    t: float
    running: int
    waiting: int
    kv_used_blocks: int
    kv_total_blocks: int
    batch_max_tokens: int
    """Sum of prompt plus max_tokens over the running batch (TGI's ``tgi_batch_current_max_tokens``)."""

    @property
    def kv_usage(self) -> float:
        """Fraction of KV-cache blocks in use, 0 to 1 (vLLM's ``kv_cache_usage_perc``)."""
        return self.kv_used_blocks / self.kv_total_blocks if self.kv_total_blocks else 0.0


@dataclass(slots=True)
class EngineCounters:
    """Cumulative totals since the model was created."""

    submitted: int = 0
    finished: int = 0
    aborted: int = 0
    preemptions: int = 0
    prompt_tokens: int = 0
    """Prompt tokens of requests whose prefill completed (counted once per request)."""
    generation_tokens: int = 0
    computed_prefill_tokens: int = 0
    """Prompt tokens the engine computed, recomputation after preemption included."""
    steps: int = 0
    busy_s: float = 0.0
    prefix_queries: int = 0
    """Prompt tokens looked up in the prefix cache, once per request (vLLM's ``prefix_cache_queries``; a
    request resumed after preemption counts apart there, and not here)."""
    prefix_hits: int = 0
    """Of those, the tokens found cached (vLLM's ``prefix_cache_hits``)."""
    """Seconds the engine spent stepping (the GPU-busy time a utilisation metric would see)."""


@dataclass(slots=True, eq=False)
class _Request:
    rid: RequestId
    prompt: int
    max_tokens: int
    arrival: float
    ready: float = 0.0
    """When the scheduler can first take it: ``arrival`` plus the profile's ``frontend_s``."""
    target: int = 0
    """Tokens whose KV must be computed before the next token can be sampled: prompt + generated."""
    generated: int = 0
    computed: int = 0
    blocks: int = 0
    running: bool = False
    started: bool = False  # scheduled at least once
    aborted: bool = False
    keys: Sequence[Hashable] | None = None
    """Prefix-cache keys of the prompt's full blocks (None: shares nothing)."""
    held: list[Hashable] | None = None
    """Keys of the cached blocks it holds, in block order."""
    registered: int = 0
    """Leading full blocks already looked up in or added to the cache."""

    def __post_init__(self) -> None:
        self.target = self.prompt + self.generated


@dataclass(slots=True)
class _Run:
    """``steps`` engine steps of ``duration`` each, the next one starting at ``start``."""

    start: float
    duration: float
    steps: int
    work: list[tuple[_Request, int]]
    decode_seqs: int
    prefill_tokens: int
    prefill_seqs: int
    decode_s: float
    prefill_s: float
    uniform: bool  # every step is one decode token per request in ``work``

    @property
    def end(self) -> float:
        return self.start + self.steps * self.duration


class EngineModel:
    """A continuous-batching engine advanced by its caller (see the module docstring).

    ``token_events=False`` drops the per-token ``Token`` and per-step ``Step`` events, which is what a
    fleet simulator wants: ``FirstToken``, ``Finished``, ``Scheduled`` and ``Preempted`` are always
    emitted, and ``counters`` and ``snapshot()`` carry the rest.
    """

    def __init__(
        self,
        profile: EngineProfile,
        *,
        mode: BatchingMode = BatchingMode.CONTINUOUS,
        token_events: bool = True,
        start: float = 0.0,
        prefix_caching: bool = True,
    ) -> None:
        self.profile = profile
        self.mode = mode
        self.token_events = token_events
        self.counters = EngineCounters()
        self._bs = profile.block_size
        self._total_blocks = profile.kv_blocks
        self._free_blocks = self._total_blocks
        self._budget = profile.max_num_batched_tokens
        self._requests: dict[RequestId, _Request] = {}
        self._running: list[_Request] = []
        self._waiting: deque[_Request] = deque()
        self._run: _Run | None = None
        self._now = start  # the latest time the model has been advanced to
        self._boundary = start  # when the engine can start its next step
        self._events: list[EngineEvent] = []
        # Naive mode: the current static batch and the size it is padded to.
        self._batch: list[_Request] = []
        self._batch_size = 0
        self._cache = PrefixCache() if prefix_caching and mode is BatchingMode.CONTINUOUS else None

    # --- public API ---------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The latest time the model was advanced (or submitted) to."""
        return self._now

    def validate(self, prompt_tokens: int, max_tokens: int) -> Rejection | None:
        """Why ``submit`` would refuse this request, or ``None``."""
        return validate_request(prompt_tokens, max_tokens, self.profile.max_model_len)

    def submit(
        self,
        request_id: RequestId,
        prompt_tokens: int,
        max_tokens: int,
        *,
        at: float,
        block_keys: Sequence[Hashable] | None = None,
    ) -> None:
        """Queue a request that arrives at ``at`` (not earlier than ``now``).

        ``block_keys``: one prefix-cache key per full ``block_size`` block of the prompt (see the module
        docstring); without them the prompt shares nothing with any other.

        Raises ``RequestRejected`` if the engine refuses it and ``ValueError`` for a duplicate id or a time
        in the past. Events up to ``at`` are computed and kept for the next ``advance``.
        """
        rejection = self.validate(prompt_tokens, max_tokens)
        if rejection is not None:
            raise RequestRejected(rejection)
        if request_id in self._requests:
            raise ValueError(f"request id {request_id!r} is already in the engine; ids must be unique")
        self._advance_to(at, "submit")
        req = _Request(
            rid=request_id,
            prompt=prompt_tokens,
            max_tokens=max_tokens,
            arrival=at,
            ready=at + self.profile.frontend_s,
            keys=block_keys,
        )
        self._requests[request_id] = req
        self._waiting.append(req)
        self.counters.submitted += 1
        self._reconsider(req.ready)

    def abort(self, request_id: RequestId, *, at: float) -> bool:
        """The client went away at ``at``: drop the request. Returns False if it is no longer here.

        A waiting request leaves at once; a running one leaves at the end of the step in flight (its
        token from that step is discarded). Either way a ``Finished`` event with reason ``abort`` follows.
        """
        self._advance_to(at, "abort")
        req = self._requests.get(request_id)
        if req is None or req.aborted:
            return False
        if not req.running:
            self._waiting.remove(req)
            self._finish(req, at, FinishReason.ABORT)
            return True
        req.aborted = True
        run = self._run
        if run is None or all(r is not req for r, _ in run.work):
            self._retire(req, at, FinishReason.ABORT)  # not in a step right now: leave at once
        else:
            self._truncate_run(at)
        return True

    def advance(self, t: float) -> list[EngineEvent]:
        """Advance to ``t`` and return the events up to ``t`` (in time order), including buffered ones."""
        self._advance_to(t, "advance")
        events, self._events = self._events, []
        return events

    def next_event_time(self) -> float | None:
        """When ``advance`` will next have something to return, or ``None`` while the engine is idle.

        Without new arrivals, nothing happens before this time, so a discrete-event simulator can jump
        straight to it. With ``token_events=True`` it is the end of the next step; otherwise the end of the
        current run of identical decode steps (which ends in a first token, a finish or a re-plan).
        The ``Scheduled`` and ``Preempted`` events of a step come out with that step's results; they carry
        their own (earlier) times. Calling this may plan the next step, which is why requests submitted at
        the same instant are all in it only if they are submitted before this is called.
        """
        if self._events:
            return self._now
        run = self._run
        if run is None:
            if not (self._waiting or self._running):
                return None
            if not self._plan(self._boundary):
                wake = self._head_ready_after(self._boundary)
                if wake is None or not self._plan(wake):
                    return None
                self._boundary = wake
            run = self._run
            assert run is not None
        if self.token_events:
            return run.start + run.duration
        return run.end

    def snapshot(self) -> EngineSnapshot:
        """Gauge values now."""
        return EngineSnapshot(
            t=self._now,
            running=len(self._running),
            waiting=len(self._waiting),
            kv_used_blocks=self._total_blocks - self._free_blocks,
            kv_total_blocks=self._total_blocks,
            batch_max_tokens=sum(r.prompt + r.max_tokens for r in self._running),
        )

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def idle(self) -> bool:
        """Nothing running, nothing waiting."""
        return not self._running and not self._waiting

    def in_flight(self) -> Iterable[RequestId]:
        """Ids of the requests in the engine (running or waiting)."""
        return list(self._requests)

    # --- time ----------------------------------------------------------------------------------------

    def _advance_to(self, t: float, caller: str) -> None:
        if t < self._now - _EPS:
            raise ValueError(f"{caller}(t={t}) is earlier than the model's time {self._now}; time only moves forward")
        while True:
            run = self._run
            if run is None:
                # Plan lazily: a step starting exactly at ``t`` is planned by a later call, so requests
                # submitted at the same instant all join it.
                if self._boundary >= t:
                    break
                if not self._plan(self._boundary):
                    wake = self._head_ready_after(self._boundary)
                    if wake is None:
                        break
                    self._boundary = wake  # idle until the queue's head is through the front end
                continue
            n = self._steps_done_by(run, t)
            if n == 0:
                break
            self._commit(run, n)
            if run.steps > 0:
                break
            self._run = None
            self._boundary = run.start
        self._now = max(self._now, t)
        if self._run is None and self._boundary < self._now:
            self._boundary = self._now

    @staticmethod
    def _steps_done_by(run: _Run, t: float) -> int:
        if t + _EPS < run.start + run.duration:
            return 0
        done = int((t - run.start) / run.duration + _EPS)
        return max(1, min(done, run.steps))

    def _head_ready_after(self, start: float) -> float | None:
        """When the queue's head clears the front end, if that is after ``start`` (else ``None``)."""
        if self._waiting and self._waiting[0].ready > start + _EPS:
            return self._waiting[0].ready
        return None

    def _reconsider(self, at: float) -> None:
        """A request the scheduler can take from ``at``: plan then if idle, else re-plan at the first step
        boundary after ``at`` if it could join."""
        run = self._run
        if run is None:
            # Planned lazily (see _advance_to), once the queue's head is through the front end.
            self._boundary = max(self._boundary, self._waiting[0].ready)
            return
        if self.mode is BatchingMode.NAIVE:
            return  # nothing joins a static batch
        # A decode-only run already refused the queue's head (FIFO) or has the batch full; the newcomer
        # cannot join before the run ends (at the first finish), so the run stands.
        blocked = len(self._waiting) > 1 or len(self._running) >= self.profile.max_num_seqs
        if not (run.uniform and blocked):
            self._truncate_run(at)

    def _truncate_run(self, at: float) -> None:
        run = self._run
        if run is None or run.steps <= 1:
            return
        # Keep the step in flight at ``at`` (or the one starting at ``at``); re-plan after it.
        in_flight = max(1, math.ceil((at - run.start) / run.duration - _EPS))
        run.steps = min(run.steps, in_flight)

    # --- scheduling ----------------------------------------------------------------------------------

    def _plan(self, start: float) -> bool:
        """Plan the next run of steps starting at ``start``; False when there is nothing to do."""
        run = self._plan_naive(start) if self.mode is BatchingMode.NAIVE else self._plan_continuous(start)
        self._run = run
        return run is not None

    def _release(self, req: _Request) -> None:
        held = req.held
        if held:
            assert self._cache is not None
            self._cache.evict_to(self._free_blocks)  # what allocations since the last release took
            self._free_blocks += req.blocks - len(held) + self._cache.release(held)
            req.held = None
        else:
            self._free_blocks += req.blocks
        req.blocks = 0
        req.registered = 0

    def _plan_continuous(self, start: float) -> _Run | None:
        # The hot path of the simulator: written out by hand rather than through helpers.
        budget = self._budget if self._budget is not None else math.inf
        bs = self._bs
        running = self._running
        work: list[tuple[_Request, int]] = []
        decode_seqs = prefill_seqs = prefill_tokens = 0
        preempted = False
        i = 0
        work_append = work.append
        while i < len(running):
            req = running[i]
            remaining = req.target - req.computed
            if remaining == 1 and req.generated and budget >= 1 and req.computed < req.blocks * bs:
                # Decoding, with room left in its last block: the common case, kept cheap.
                work_append((req, 1))
                decode_seqs += 1
                budget -= 1
                i += 1
                continue
            n = remaining if remaining <= budget else int(budget)
            if n <= 0:
                i += 1
                continue
            need = -(-(req.computed + n) // bs) - req.blocks
            if need > 0:
                while need > self._free_blocks:
                    victim = running.pop()
                    self._preempt(victim, start)
                    preempted = True
                    if victim is req:
                        break
                if not req.running:  # preempted itself: nothing else fits either
                    break
                self._free_blocks -= need
                req.blocks += need
            work.append((req, n))
            if n == 1 and remaining == 1 and req.generated:
                decode_seqs += 1
            else:
                prefill_seqs += 1
                prefill_tokens += n
            budget -= n
            i += 1
        if not preempted:
            waiting = self._waiting
            limit = self.profile.max_num_seqs
            cache = self._cache
            while waiting and budget > 0 and len(running) < limit:
                req = waiting[0]
                if req.ready > start + _EPS:
                    break  # still in the front end (FIFO: so is everyone behind it)
                hit = idle = 0
                if cache is not None and req.computed == 0:
                    if req.keys:
                        cache.evict_to(self._free_blocks)
                        hit, idle = cache.lookup(req.keys, (req.target - 1) // bs)
                    if not req.started:
                        self.counters.prefix_queries += req.target
                cached = hit * bs
                remaining = req.target - req.computed - cached
                n = remaining if remaining <= budget else int(budget)
                fresh = -(-(req.computed + cached + n) // bs) - req.blocks - hit
                # Hit blocks nobody holds leave the free pool too (vLLM's allocate_slots counts them).
                if fresh + idle > self._free_blocks:
                    break
                if hit:
                    assert cache is not None and req.keys is not None
                    held = list(req.keys[:hit])
                    cache.hold(held)
                    req.held = held
                    req.registered = hit
                    req.computed = cached
                    if not req.started:
                        self.counters.prefix_hits += cached
                self._free_blocks -= fresh + idle
                req.blocks += hit + fresh
                waiting.popleft()
                running.append(req)
                req.running = True
                self._events.append(Scheduled(start, req.rid, resumed=req.started, cached_tokens=cached))
                req.started = True
                work.append((req, n))
                prefill_seqs += 1
                prefill_tokens += n
                budget -= n
        if not work:
            return None
        decode_s, prefill_s = self.profile.step_split(decode_seqs, prefill_tokens)
        uniform = prefill_seqs == 0
        steps = self._uniform_run_length(work) if uniform and not preempted else 1
        wake = self._head_ready_after(start) if steps > 1 and len(running) < self.profile.max_num_seqs else None
        if wake is not None:  # the queue's head clears the front end mid-run: re-plan at that boundary
            steps = min(steps, max(1, math.ceil((wake - start) / (decode_s + prefill_s) - _EPS)))
        return _Run(
            start=start,
            duration=decode_s + prefill_s,
            steps=steps,
            work=work,
            decode_seqs=decode_seqs,
            prefill_tokens=prefill_tokens,
            prefill_seqs=prefill_seqs,
            decode_s=decode_s,
            prefill_s=prefill_s,
            uniform=uniform,
        )

    def _uniform_run_length(self, work: list[tuple[_Request, int]]) -> int:
        """How many identical decode-only steps can follow, starting with the one just planned.

        The run stops at the step where the first request finishes, or before the step that would need
        more KV blocks than are free (the scheduler then preempts), whichever comes first. Waiting
        requests cannot join meanwhile: they were refused at this boundary, and in a decode-only run the
        free blocks only shrink and the batch only keeps its size.
        """
        shortest = min(r.max_tokens - r.generated for r, _ in work)
        if shortest <= 1:
            return 1
        free = self._free_blocks
        bs = self._bs
        if free >= len(work) * (shortest // bs + 1):
            return shortest  # every request can grow by ``shortest`` tokens without the cache filling
        # After the first step's allocation, request i holds blocks b_i covering computed_i + 1 tokens.
        # j more steps need sum_i max(0, ceil((computed_i + 1 + j) / bs) - b_i) extra blocks.
        state = [(r.computed + 1, r.blocks) for r, _ in work]

        def demand(j: int) -> int:
            total = 0
            for c, b in state:
                extra = -(-(c + j) // bs) - b
                if extra > 0:
                    total += extra
            return total

        hi = shortest - 1
        if demand(hi) <= free:
            return shortest
        lo = 0  # demand(lo) <= free holds for lo = 0
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if demand(mid) <= free:
                lo = mid
            else:
                hi = mid - 1
        return 1 + lo

    def _preempt(self, req: _Request, t: float) -> None:
        self._release(req)
        req.computed = 0
        req.running = False
        self._waiting.appendleft(req)
        self.counters.preemptions += 1
        self._events.append(Preempted(t, req.rid, req.generated))

    def _plan_naive(self, start: float) -> _Run | None:
        if not self._batch:
            if not self._waiting:
                return None
            # Take up to max_num_seqs waiting requests whose prompt plus output fits the KV cache.
            batch: list[_Request] = []
            while self._waiting and len(batch) < self.profile.max_num_seqs:
                req = self._waiting[0]
                if req.ready > start + _EPS:
                    break
                need = -(-(req.prompt + req.max_tokens) // self._bs)
                if need > self._free_blocks:
                    break
                self._waiting.popleft()
                self._free_blocks -= need
                req.blocks = need
                req.running = True
                req.started = True
                batch.append(req)
                self._running.append(req)
                self._events.append(Scheduled(start, req.rid, resumed=False))
            if not batch:
                return None
            self._batch = batch
            self._batch_size = len(batch)
            work = [(r, r.prompt) for r in batch]
            prefill_tokens = sum(r.prompt for r in batch)
            prefill_s = self.profile.prefill_time(prefill_tokens)
            return _Run(
                start=start,
                duration=prefill_s,
                steps=1,
                work=work,
                decode_seqs=0,
                prefill_tokens=prefill_tokens,
                prefill_seqs=len(batch),
                decode_s=0.0,
                prefill_s=prefill_s,
                uniform=False,
            )
        active = [(r, 1) for r in self._batch if r.generated < r.max_tokens and not r.aborted]
        if not active:
            self._batch = []
            self._batch_size = 0
            return self._plan_naive(start)
        # Padding: finished sequences keep their slot, so the step costs the full batch size.
        decode_s = self.profile.decode_step_time(self._batch_size)
        steps = min(r.max_tokens - r.generated for r, _ in active)
        return _Run(
            start=start,
            duration=decode_s,
            steps=steps,
            work=active,
            decode_seqs=self._batch_size,
            prefill_tokens=0,
            prefill_seqs=0,
            decode_s=decode_s,
            prefill_s=0.0,
            uniform=True,
        )

    # --- committing steps ----------------------------------------------------------------------------

    def _commit(self, run: _Run, n: int) -> None:
        """Apply ``n`` steps of ``run`` (``n`` <= ``run.steps``) and emit their events."""
        d = run.duration
        start = run.start
        end = start + n * d
        self.counters.steps += n
        self.counters.busy_s += n * d
        if self.token_events:
            sampled = len(run.work) if run.uniform else sum(1 for r, c in run.work if r.computed + c >= r.target)
            self._events.append(
                Step(
                    start=start,
                    duration=d,
                    count=n,
                    decode_seqs=run.decode_seqs,
                    prefill_tokens=run.prefill_tokens,
                    prefill_seqs=run.prefill_seqs,
                    decode_s=run.decode_s,
                    prefill_s=run.prefill_s,
                    sampled=sampled,
                )
            )
        if run.uniform:
            self._commit_uniform(run, n, start, d)
        else:
            self._commit_single(run, end)
        run.start = end
        run.steps -= n
        if run.steps == 0:
            self._boundary = end

    def _commit_uniform(self, run: _Run, n: int, start: float, d: float) -> None:
        naive = self.mode is BatchingMode.NAIVE
        work = run.work
        if self.token_events:
            events = self._events
            for s in range(1, n + 1):
                t = start + s * d
                for req, _ in work:
                    if not req.aborted:
                        events.append(Token(t, req.rid, req.generated + s))
        bs = self._bs
        live = 0
        for req, _ in work:
            req.computed += n
            req.generated += n
            req.target += n
            if not req.aborted:
                live += 1
            if not naive:
                need = -(-req.computed // bs) - req.blocks
                if need > 0:
                    self._free_blocks -= need
                    req.blocks += need
        self.counters.generation_tokens += n * live
        if run.steps == n:
            self._after_step(work, start + n * d)
        if self._free_blocks < 0:  # pragma: no cover - guarded by _uniform_run_length
            raise AssertionError("KV cache over-committed; this is a bug in the run-length computation")

    def _commit_single(self, run: _Run, end: float) -> None:
        counters = self.counters
        cache = self._cache
        for req, n in run.work:
            if not (n == 1 and req.generated and req.target - req.computed == 1):
                counters.computed_prefill_tokens += n
            req.computed += n
            if cache is not None and req.keys is not None and req.registered < len(req.keys):
                self._cache_computed(cache, req)
            if req.computed < req.target or req.aborted:
                continue
            req.generated += 1
            req.target += 1
            counters.generation_tokens += 1
            if req.generated == 1:
                counters.prompt_tokens += req.prompt
                self._events.append(FirstToken(end, req.rid))
            if self.token_events:
                self._events.append(Token(end, req.rid, req.generated))
        self._after_step(run.work, end)

    def _cache_computed(self, cache: PrefixCache, req: _Request) -> None:
        """Cache the prompt blocks ``req`` has filled since it last did (vLLM's ``cache_full_blocks``)."""
        keys = req.keys
        assert keys is not None
        full = min(min(req.computed, req.prompt) // self._bs, len(keys))
        held = req.held if req.held is not None else []
        for key in keys[req.registered : full]:
            if cache.add(key):
                held.append(key)
        req.held = held
        req.registered = max(req.registered, full)

    def _after_step(self, work: list[tuple[_Request, int]], end: float) -> None:
        """Retire requests that finished or were aborted during the step ending at ``end``."""
        for req, _ in work:
            if req.aborted:
                self._retire(req, end, FinishReason.ABORT)
            elif req.generated >= req.max_tokens:
                self._retire(req, end, FinishReason.LENGTH)

    def _retire(self, req: _Request, t: float, reason: FinishReason) -> None:
        if self.mode is BatchingMode.NAIVE:
            # The slot stays in the static batch (padding); KV is freed when the whole batch ends.
            if req.rid not in self._requests:
                return
            self._running.remove(req)
            self._finish(req, t, reason, release=False)
            if all(r.generated >= r.max_tokens or r.aborted for r in self._batch):
                for r in self._batch:
                    self._release(r)
                    r.running = False
                self._batch = []
                self._batch_size = 0
            return
        if req in self._running:
            self._running.remove(req)
        req.running = False
        self._finish(req, t, reason)

    def _finish(self, req: _Request, t: float, reason: FinishReason, *, release: bool = True) -> None:
        if release:
            self._release(req)
        self._requests.pop(req.rid, None)
        if reason is FinishReason.ABORT:
            self.counters.aborted += 1
        else:
            self.counters.finished += 1
        self._events.append(Finished(t, req.rid, reason, req.generated, req.prompt))
