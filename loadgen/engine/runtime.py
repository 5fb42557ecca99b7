"""The simulated engine as a server sees it: the model plus per-request timelines plus metrics.

``EngineRuntime`` is still free of I/O and of any clock: the server passes ``now`` (seconds since it
started) into every call. It turns the model's events into per-request progress (tokens ready, finished)
and into metric observations, and calls a request's ``notify`` callback when that request has news.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loadgen.engine.metrics import EngineMetrics, RequestTimeline
from loadgen.engine.model import (
    BatchingMode,
    EngineEvent,
    EngineModel,
    EngineSnapshot,
    FinishReason,
    FirstToken,
    Preempted,
    Scheduled,
    Step,
    Token,
)
from loadgen.engine.prefix_cache import hash_blocks
from loadgen.engine.profiles import EngineProfile

__all__ = ["EngineRuntime", "TrackedRequest"]


@dataclass(slots=True, eq=False)
class TrackedRequest:
    """A request in the runtime: its timeline and who to tell when it progresses."""

    timeline: RequestTimeline
    notify: Callable[[], None] | None = None
    stops: bool = False
    """Its last token completes a stop string: it finishes as ``stop``."""

    @property
    def done(self) -> bool:
        return self.timeline.finished is not None


class EngineRuntime:
    """One simulated engine: ``submit`` requests, ``advance`` time, read progress and ``/metrics``."""

    def __init__(
        self,
        profile: EngineProfile,
        metrics: EngineMetrics,
        *,
        mode: BatchingMode = BatchingMode.CONTINUOUS,
        start: float = 0.0,
        prefix_caching: bool = True,
    ) -> None:
        self.profile = profile
        self.metrics = metrics
        self.model = EngineModel(profile, mode=mode, token_events=True, start=start, prefix_caching=prefix_caching)
        self._requests: dict[str, TrackedRequest] = {}
        self._ids = itertools.count(1)

    def submit(
        self,
        prompt_tokens: int,
        max_tokens: int,
        *,
        now: float,
        notify: Callable[[], None] | None = None,
        stops: bool = False,
        prompt: Sequence[object] = (),
    ) -> TrackedRequest:
        """Admit a request to the engine's queue; raises ``RequestRejected`` if the engine refuses it.

        ``stops``: its last token completes a stop string, so it finishes as ``stop`` rather than ``length``.
        ``prompt``: its tokens, for the prefix cache (without them it shares nothing).
        """
        rid = f"{next(self._ids):08x}"
        keys = hash_blocks(prompt, self.profile.block_size) if prompt else None
        self.model.submit(rid, prompt_tokens, max_tokens, at=now, block_keys=keys)
        tracked = TrackedRequest(RequestTimeline(rid, prompt_tokens, max_tokens, arrival=now), notify, stops)
        self._requests[rid] = tracked
        self.metrics.request_accepted(tracked.timeline)
        self._deliver(self.model.advance(now))
        return tracked

    def cancel(self, tracked: TrackedRequest, *, now: float) -> None:
        """The client went away; drop the request if it is still in the engine."""
        if not tracked.done:
            self.model.abort(tracked.timeline.request_id, at=now)
            self._deliver(self.model.advance(now))

    def advance(self, now: float) -> None:
        """Move the engine to ``now`` and deliver what happened."""
        self._deliver(self.model.advance(max(now, self.model.now)))

    def next_event_time(self) -> float | None:
        """When the engine next has something to deliver (``None`` when idle)."""
        return self.model.next_event_time()

    def snapshot(self) -> EngineSnapshot:
        return self.model.snapshot()

    def render_metrics(self, now: float) -> tuple[bytes, str]:
        """The ``/metrics`` page as of ``now``."""
        self.advance(now)
        return self.metrics.render(self.model.snapshot())

    @property
    def in_flight(self) -> int:
        """Requests submitted and not yet finished."""
        return len(self._requests)

    def _deliver(self, events: list[EngineEvent]) -> None:
        touched: dict[str, TrackedRequest] = {}
        for event in events:
            if isinstance(event, Step):
                self.metrics.step(event)
                continue
            tracked = self._requests.get(str(event.request_id))
            if tracked is None:
                continue
            tl = tracked.timeline
            if isinstance(event, Token):
                gap = None if tl.last_token is None else event.t - tl.last_token
                tl.generated = event.index
                tl.last_token = event.t
                self.metrics.token(tl, gap)
            elif isinstance(event, FirstToken):
                tl.first_token = event.t
                self.metrics.first_token(tl)
            elif isinstance(event, Scheduled):
                if tl.scheduled is None:
                    tl.scheduled = event.t
                    tl.cached_tokens = event.cached_tokens
            elif isinstance(event, Preempted):
                tl.preemptions += 1
                self.metrics.preempted(tl)
            else:
                tl.finished = event.t
                stopped = tracked.stops and event.reason is FinishReason.LENGTH
                tl.finish_reason = FinishReason.STOP if stopped else event.reason
                if event.reason is FinishReason.ABORT:
                    tl.generated = min(tl.generated, event.generated)
                self.metrics.finished(tl)
                del self._requests[tl.request_id]
            touched[tl.request_id] = tracked
        for tracked in touched.values():
            if tracked.notify is not None:
                tracked.notify()
