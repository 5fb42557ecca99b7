"""The streaming client: open-loop runs from a schedule, closed-loop runs at a fixed concurrency.

Both send OpenAI-compatible ``/v1/completions`` requests (or ``/v1/chat/completions`` with ``messages``,
``ClientConfig.chat``) with ``stream: true`` and ``stream_options.include_usage`` (vLLM and TGI both serve
it) and measure each request the same way:

* ``sent``: when the request started, in seconds from the run's start. In an open-loop run every request
  is started at its scheduled time, whatever the server is doing: no request waits for another, so a slow
  server cannot slow the arrivals down (no coordinated omission). ``lag = sent - scheduled`` shows how well
  the client kept to the schedule.
* TTFT: ``sent`` to the first token chunk; inter-token latency (ITL): the gaps between token chunks (chunks
  read in one go have gap 0, as in vLLM's own benchmark); end-to-end: ``sent`` to the end of the stream.
* Output tokens: the ``usage`` the server reports at the end, else the number of token chunks.

A failed request is recorded with an error kind (``ERROR_KINDS``) and the run goes on. Requests whose
scheduled time falls in the warm-up are sent and recorded but flagged, and left out of every figure.

The HTTP layer is ``loadgen.client.wire``: keep-alive connections in a pool without a size limit (a limit would
queue requests inside the client, which is coordinated omission again), parsing the stream in the
protocol callback so that each token costs no task wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import json
import random
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from loadgen.client.stats import LogHistogram
from loadgen.client.wire import Collect, ConnectionPool, Disconnected, ProtocolError
from loadgen.engine.tokens import WORDS
from loadgen.traffic.prompts import ChatLayout, PromptMaker, PromptText
from loadgen.traffic.shapes import Arrival, LengthDist, PromptContent

__all__ = [
    "ERROR_KINDS",
    "ClientConfig",
    "LiveProgress",
    "Measurement",
    "RequestRecord",
    "RunResult",
    "StreamingClient",
    "TargetUnreachable",
    "run_closed_loop",
    "run_open_loop",
]

ERROR_KINDS = {
    "http_<status>": "the server answered with this HTTP status instead of 200",
    "connection_refused": "nothing listens at the target (connection refused)",
    "connection_error": "the connection could not be made (DNS, routing, too many open files, ...)",
    "timeout": "no complete answer within the request timeout",
    "disconnected": "the server closed the connection before the stream ended",
    "stream_error": "the server sent an error event inside the stream",
    "empty_stream": "the stream ended without any token",
    "incomplete": "still running when the run ended (drain timeout or interrupt)",
    "client_error": "another HTTP client error (the detail says which)",
}

CHAT_ENDPOINT = "/v1/chat/completions"
_DONE = b"[DONE]"
_PLACEHOLDER = "\x00prompt\x00"  # json.dumps writes it as "\u0000prompt\u0000", which no model name holds
_PLAIN = re.compile(r"[a-z]+")


class TargetUnreachable(Exception):
    """The target did not answer the pre-flight request; the message says what was tried and what failed."""


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request. Times are seconds from the run's start."""

    index: int
    scheduled: float
    prompt_tokens: int
    max_tokens: int
    warmup: bool = False
    sent: float | None = None
    first_token: float | None = None
    finished: float | None = None
    output_tokens: int = 0
    chunks: int = 0
    error: str | None = None
    detail: str | None = None
    content: PromptContent | None = None
    """What the prompt shares with others (``loadgen.traffic.prompts``); ``None``: a prompt of its own."""
    max_itl: float = 0.0
    """The longest gap between two of its token chunks (the ``itl`` SLO, ``loadgen.client.slo``)."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.finished is not None

    @property
    def lag(self) -> float | None:
        return None if self.sent is None else self.sent - self.scheduled

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None or self.sent is None else self.first_token - self.sent

    @property
    def e2e(self) -> float | None:
        return None if not self.ok or self.sent is None or self.finished is None else self.finished - self.sent

    @property
    def tpot(self) -> float | None:
        """Mean time per output token after the first (None with fewer than two tokens)."""
        if not self.ok or self.first_token is None or self.finished is None or self.output_tokens < 2:
            return None
        return (self.finished - self.first_token) / (self.output_tokens - 1)


@dataclass(slots=True)
class Measurement:
    """The records of one run (or of one knee level) and the running counters the progress line shows."""

    warmup: float = 0.0
    records: list[RequestRecord] = field(default_factory=list)
    itl: LogHistogram = field(default_factory=LogHistogram)
    """Inter-token gaps of measured (non-warm-up) successful streams."""
    live_ttft: LogHistogram = field(default_factory=LogHistogram)
    live_lag: LogHistogram = field(default_factory=LogHistogram)
    """Schedule lag of the requests sent since the progress line last read it (it swaps in a new one)."""
    tokens: int = 0
    """Token chunks received so far, warm-up included (the progress line's tok/s)."""
    sent: int = 0
    done: int = 0
    errors: int = 0

    @property
    def in_flight(self) -> int:
        return self.sent - self.done


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Where to send requests and how."""

    base_url: str
    model: str | None = None
    """Model name for the request body; None asks the target's ``/v1/models`` (or sends none)."""
    endpoint: str = "/v1/completions"
    """``/v1/completions`` (a ``prompt``) or ``/v1/chat/completions`` (``messages``: see ``chat``)."""
    chat: ChatLayout | None = None
    """Send chat requests to ``/v1/chat/completions``, their messages laid out by this (``loadgen.traffic.prompts``)."""
    timeout: float = 300.0
    """Seconds for one whole request, connection to last token."""
    connect_timeout: float = 10.0
    ignore_eos: bool = True
    """Ask for exactly ``max_tokens`` tokens (vLLM's ``ignore_eos``), as a benchmark must."""


class Progress(Protocol):
    def update(self, elapsed: float, measurement: Measurement) -> None: ...

    def close(self) -> None: ...


class LiveProgress:
    """A compact status line on ``stream`` (stderr), rewritten in place on a terminal, one line a tick elsewhere."""

    def __init__(self, stream: TextIO | None = None, *, label: str = "") -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._label = label
        self._dirty = False
        self._last = (0.0, 0)  # (elapsed, tokens) at the previous update: tok/s is over the last tick

    def update(self, elapsed: float, measurement: Measurement) -> None:
        line = self.line(elapsed, measurement)
        if self._tty:
            self._stream.write("\r\x1b[2K" + line)
            self._dirty = True
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def line(self, elapsed: float, measurement: Measurement) -> str:
        """The status line: counts, then tok/s and the schedule lag p99 since the last line, and p95 TTFT."""
        m = measurement
        p95 = m.live_ttft.quantile(0.95)
        ttft = f"{p95 * 1e3:.0f}ms" if p95 is not None else "-"
        then, tokens = self._last
        rate = (m.tokens - tokens) / (elapsed - then) if elapsed > then else 0.0
        self._last = (elapsed, m.tokens)
        lags, m.live_lag = m.live_lag, LogHistogram()
        lag = lags.quantile(0.99)
        return (
            f"{self._label}[{elapsed:6.1f}s] sent {m.sent}  done {m.done}  in flight {m.in_flight}  "
            f"errors {m.errors}  {rate:,.0f} tok/s  lag p99 {'-' if lag is None else f'{lag * 1e3:.1f}ms'}  "
            f"p95 TTFT {ttft}"
        )

    def close(self) -> None:
        if self._dirty:
            self._stream.write("\n")
            self._stream.flush()
            self._dirty = False


def _error_detail(body: bytes) -> str:
    """The server's error message from a JSON error body (vLLM's ``error.message`` or TGI's ``error``)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict):
        err = data.get("error", data.get("message"))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:300]
    return text[:300]


def _classify(exc: BaseException) -> tuple[str, str]:
    """``(kind, detail)`` of a failed request."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused", str(exc)
    if isinstance(exc, TimeoutError):
        return "timeout", str(exc) or "no complete answer in time"
    if isinstance(exc, Disconnected | ConnectionResetError | BrokenPipeError):
        return "disconnected", str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        return "connection_error", str(exc) or type(exc).__name__
    return "client_error", f"{type(exc).__name__}: {exc}"


class _Meter:
    """The body sink of one streamed completion: parses SSE events as they arrive and times the tokens."""

    __slots__ = ("_pending", "error_body", "first", "last", "m", "measured", "rec", "start", "status", "t0", "usage")

    def __init__(self, rec: RequestRecord, m: Measurement, t0: float, start: float) -> None:
        self.rec, self.m, self.t0, self.start = rec, m, t0, start
        self.measured = not rec.warmup
        self.status = 0
        self.error_body = b""
        self._pending = b""
        self.first: float | None = None
        self.last = 0.0
        self.usage: int | None = None

    def head(self, status: int, headers: dict[str, str]) -> None:
        self.status = status

    def feed(self, data: bytes, now: float) -> None:
        rec = self.rec
        if self.status != 200:
            if len(self.error_body) < 4096:
                self.error_body += data[: 4096 - len(self.error_body)]
            return
        if rec.error is not None:
            return
        lines: Iterable[bytes]
        if not self._pending and data.endswith(b"\n\n") and data.find(b"\n") == len(data) - 2:
            lines = (data[:-2],)  # the common case: one whole event
        else:
            if self._pending:
                data = self._pending + data
            cut = data.rfind(b"\n")
            if cut < 0:
                self._pending = data
                return
            self._pending = data[cut + 1 :]
            lines = data[:cut].split(b"\n")
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            # Fast path for the compact JSON vLLM and TGI send: a token chunk has non-empty text and no usage
            # or error object; anything else is parsed.
            if b'"text":"' in payload and b'"usage":{' not in payload and b'"error"' not in payload:
                if b'"text":""' in payload:
                    continue
            elif b'"content":"' in payload and b'"usage":{' not in payload and b'"error"' not in payload:
                if b'"content":""' in payload:  # a chat stream's role opener, or an empty delta
                    continue
            elif payload == _DONE:
                continue
            else:
                token, usage = _event(payload, rec)
                if rec.error is not None:
                    return
                if usage is not None:
                    self.usage = usage
                if not token:
                    continue
            rec.chunks += 1
            self.m.tokens += 1
            if self.first is None:
                self.first = now
                rec.first_token = now - self.t0
                self.m.live_ttft.add(now - self.start)
            else:
                gap = now - self.last
                if gap > rec.max_itl:
                    rec.max_itl = gap
                if self.measured:
                    self.m.itl.add(gap)
            self.last = now

    def finish(self) -> None:
        """The response is complete: settle the record's outcome."""
        rec = self.rec
        if rec.error is not None:
            return
        if self.status != 200:
            rec.error = f"http_{self.status}"
            rec.detail = _error_detail(self.error_body)
            return
        rec.output_tokens = self.usage if self.usage is not None else rec.chunks
        if rec.chunks == 0:
            rec.error, rec.detail = "empty_stream", "the stream ended without a token"


def _event(payload: bytes, rec: RequestRecord) -> tuple[bool, int | None]:
    """Read a parsed SSE event: ``(carries a token, completion tokens from usage)``; errors go to ``rec``."""
    try:
        event = json.loads(payload)
    except ValueError:
        return False, None
    if not isinstance(event, dict):
        return False, None
    err = event.get("error")
    if err is not None:
        rec.error = "stream_error"
        rec.detail = str(err.get("message", err) if isinstance(err, dict) else err)[:300]
        return False, None
    usage = event.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    choices = event.get("choices")
    token = False
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        delta = choice.get("delta")
        text = choice["text"] if "text" in choice else (delta.get("content") if isinstance(delta, dict) else None)
        token = bool(text)
    return token, tokens if isinstance(tokens, int) else None


class StreamingClient:
    """One connection pool to one target; ``send`` measures one streamed completion into a record."""

    def __init__(self, config: ClientConfig, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.config = config
        self.model = config.model
        self._clock = clock
        self._pool = ConnectionPool(config.base_url, connect_timeout=config.connect_timeout, clock=clock)
        self._text = PromptText()
        # Distinct prompts start with a tag of their own: a random base (so no two runs share one), counted up.
        self._next_tag = random.SystemRandom().getrandbits(63)
        self._envelopes: dict[tuple[str | None, int], tuple[bytes, bytes]] = {}
        self._chat_envelopes: dict[tuple[str | None, int], tuple[bytes, bytes]] = {}
        self._chat = config.chat
        if self._chat is not None and config.endpoint == "/v1/completions":
            self.config = dataclasses.replace(config, endpoint=CHAT_ENDPOINT)
        # True when prompt text is plain lowercase words (so it needs no JSON escaping).
        self._plain_prompts = all(_PLAIN.fullmatch(word) for word in WORDS)

    async def __aenter__(self) -> StreamingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._pool.close()

    async def preflight(self, timeout: float = 10.0) -> None:
        """Check the target answers, and learn the model name from ``/v1/models`` unless one was given.

        Raises ``TargetUnreachable`` with a message naming the URL and the failure.
        """
        sink = Collect()
        try:
            async with asyncio.timeout(timeout):
                await self._pool.request(self._pool.head("GET", "/v1/models", accept="application/json"), sink)
        except (OSError, TimeoutError, ProtocolError) as exc:
            kind, detail = _classify(exc)
            hint = {
                "connection_refused": "connection refused: nothing is listening there; is the server running and "
                "the URL right?",
                "timeout": f"no answer within {timeout:g}s",
            }.get(kind, detail)
            raise TargetUnreachable(f"cannot reach the target {self.config.base_url}: {hint}") from None
        if sink.status == 200:
            if self.model is None:
                with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
                    self.model = str(json.loads(sink.body)["data"][0]["id"])
            return
        if sink.status in (404, 405):
            return  # an engine without /v1/models; requests go without a model name unless one was given
        raise TargetUnreachable(
            f"the target {self.config.base_url} is not ready: GET /v1/models answered {sink.status}: "
            f"{_error_detail(sink.body)}"
        )

    def prompt(self, prompt_tokens: int, content: PromptContent | None = None) -> str:
        """The prompt text: ``content`` rendered, or a prompt of its own (a fresh tag, then filler words)."""
        if content is not None:
            return self._text.render(content)
        self._next_tag += 1
        return self._text.segment(self._next_tag, prompt_tokens)

    def messages(self, prompt_tokens: int, content: PromptContent | None = None) -> list[tuple[str, str]]:
        """A chat request's ``(role, text)`` messages: ``content`` laid out by the chat layout, or one user
        message of its own."""
        if content is None or self._chat is None:
            return [("user", self.prompt(prompt_tokens, content))]
        return self._text.messages(content, self._chat)

    def body(self, prompt_tokens: int, max_tokens: int, content: PromptContent | None = None) -> bytes:
        """The whole request (head and JSON body); each call without ``content`` makes a distinct prompt."""
        if self._chat is not None:
            return self._chat_body(self.messages(prompt_tokens, content), max_tokens)
        prompt = self.prompt(prompt_tokens, content)
        if not self._plain_prompts:
            return self._request(self._payload(prompt, max_tokens))
        # Prompt words need no JSON escaping: splice the (possibly very long) prompt in as bytes between the
        # two halves of the JSON around it, rather than have json.dumps scan it, which would hold the event
        # loop for milliseconds.
        key = (self.model, max_tokens)
        envelope = self._envelopes.get(key)
        if envelope is None:
            data = self._payload(_PLACEHOLDER, max_tokens)
            before, _, after = data.partition(json.dumps(_PLACEHOLDER).encode())
            envelope = self._envelopes[key] = (before + b'"', b'"' + after)
        before, after = envelope
        text = prompt.encode("ascii")
        length = len(before) + len(text) + len(after)
        head = self._pool.head("POST", self.config.endpoint, content_length=length, accept="text/event-stream")
        return b"".join((head, before, text, after))

    def _chat_body(self, messages: list[tuple[str, str]], max_tokens: int) -> bytes:
        if not self._plain_prompts:
            listed = [{"role": role, "content": text} for role, text in messages]
            return self._request(self._payload(listed, max_tokens, key="messages"))
        # As in ``body``: the messages are spliced in as bytes (plain words and role names need no escaping).
        key = (self.model, max_tokens)
        envelope = self._chat_envelopes.get(key)
        if envelope is None:
            data = self._payload(_PLACEHOLDER, max_tokens, key="messages")
            before, _, after = data.partition(json.dumps(_PLACEHOLDER).encode())
            envelope = self._chat_envelopes[key] = (before, after)
        before, after = envelope
        array = b"[" + b",".join(b'{"role":"%s","content":"%s"}' % (r.encode(), t.encode("ascii")) for r, t in messages)
        array += b"]"
        length = len(before) + len(array) + len(after)
        head = self._pool.head("POST", self.config.endpoint, content_length=length, accept="text/event-stream")
        return b"".join((head, before, array, after))

    def _payload(self, prompt: str | list[dict[str, str]], max_tokens: int, *, key: str = "prompt") -> bytes:
        payload: dict[str, Any] = {
            key: prompt,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.model is not None:
            payload = {"model": self.model, **payload}
        if self.config.ignore_eos:
            payload["ignore_eos"] = True
        return json.dumps(payload, separators=(",", ":")).encode()

    def _request(self, data: bytes) -> bytes:
        head = self._pool.head("POST", self.config.endpoint, content_length=len(data), accept="text/event-stream")
        return head + data

    async def send(self, rec: RequestRecord, m: Measurement, t0: float) -> None:
        """Send ``rec``'s request now, stream the answer and fill in ``rec``; never raises but on cancel."""
        clock = self._clock
        request = self.body(rec.prompt_tokens, rec.max_tokens, rec.content)
        start = clock()
        rec.sent = start - t0
        m.sent += 1
        m.live_lag.add(max(rec.sent - rec.scheduled, 0.0))
        meter = _Meter(rec, m, t0, start)
        try:
            async with asyncio.timeout(self.config.timeout):
                await self._pool.request(request, meter)
            meter.finish()
        except asyncio.CancelledError:
            rec.error, rec.detail = "incomplete", "the run ended before the request did"
            raise
        except Exception as exc:  # every failure is recorded by kind; the run goes on
            if rec.error is None:
                rec.error, rec.detail = _classify(exc)
        finally:
            rec.finished = clock() - t0
            m.done += 1
            if rec.error is not None:
                m.errors += 1


# --- runs ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class RunResult:
    """The outcome of one run: its measurement plus how it ended."""

    measurement: Measurement
    started_at: float
    """Wall-clock (epoch) time of the run's start."""
    elapsed: float
    """Seconds from the start to the last request's end."""
    status: str
    """``completed``, ``interrupted`` or ``drain_timeout``."""
    scheduled: int
    schedule_end: float


async def _tick(progress: Progress | None, m: Measurement, t0: float, clock: Callable[[], float]) -> None:
    if progress is None:
        return
    while True:
        await asyncio.sleep(1.0)
        progress.update(clock() - t0, m)


async def _finish(tasks: set[asyncio.Task[None]], timeout: float) -> bool:
    """Wait up to ``timeout`` for ``tasks``; cancel the rest. True if all finished in time."""
    if not tasks:
        return True
    _, pending = await asyncio.wait(set(tasks), timeout=timeout)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    return not pending


async def run_open_loop(
    client: StreamingClient,
    schedule: Sequence[Arrival],
    *,
    warmup: float = 0.0,
    drain_timeout: float = 60.0,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Send every request of ``schedule`` at its time, whatever the server does; wait for the answers.

    After the last send, requests still running get ``drain_timeout`` seconds, then are cancelled and
    recorded as ``incomplete``. Setting ``stop`` ends the run early (status ``interrupted``), keeping
    what was measured.
    """
    m = Measurement(warmup=warmup)
    tasks: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    status = "completed"
    gc.collect()
    gc.freeze()  # the schedule and the session never need collecting; keeps pauses short during the run
    started_at = time.time()
    t0 = clock()
    ticker = loop.create_task(_tick(progress, m, t0, clock))
    stopper = loop.create_task(stop.wait()) if stop is not None else None
    try:
        for index, (send_time, prompt_tokens, max_tokens, content) in enumerate(schedule):
            delay = t0 + send_time - clock()
            if delay > 0:
                if stopper is None:
                    await asyncio.sleep(delay)
                else:
                    await asyncio.wait({stopper}, timeout=delay)
            if stop is not None and stop.is_set():
                status = "interrupted"
                break
            rec = RequestRecord(index, send_time, prompt_tokens, max_tokens, warmup=send_time < warmup, content=content)
            m.records.append(rec)
            task = loop.create_task(client.send(rec, m, t0))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if status == "interrupted":
            await _finish(tasks, 0)
        else:
            waiter = asyncio.ensure_future(_finish(tasks, drain_timeout))
            done_set = {waiter} if stopper is None else {waiter, stopper}
            await asyncio.wait(done_set, return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                status = "interrupted"
                await _finish(tasks, 0)
                await waiter
            elif not waiter.result():
                status = "drain_timeout"
    finally:
        ticker.cancel()
        if stopper is not None:
            stopper.cancel()
        await _finish(tasks, 0)
        gc.unfreeze()
        if progress is not None:
            progress.update(clock() - t0, m)
            progress.close()
    elapsed = clock() - t0
    schedule_end = schedule[-1].send_time if schedule else 0.0
    return RunResult(m, started_at, elapsed, status, len(schedule), schedule_end)


async def run_closed_loop(
    client: StreamingClient,
    *,
    concurrency: int,
    duration: float,
    warmup: float,
    prompt: LengthDist,
    output: LengthDist,
    seed: int = 0,
    prompts: PromptMaker | None = None,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> RunResult:
    """Keep ``concurrency`` requests in flight for ``warmup + duration`` seconds (each worker sends its next
    request as soon as the previous one ends), then let the last ones finish.

    The standard way to sweep for a knee: the load is the concurrency itself. The workers start staggered
    over the first half of the warm-up. Requests sent during the warm-up are flagged as such; ``scheduled``
    equals ``sent`` (there is no schedule to lag behind). ``prompts`` gives each request its content (each
    worker keeps one conversation going); without it every prompt is distinct.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    m = Measurement(warmup=warmup)
    rng = random.Random(f"{seed}:closed:{concurrency}")
    loop = asyncio.get_running_loop()
    started_at = time.time()
    t0 = clock()
    deadline = t0 + warmup + duration

    async def worker(k: int) -> None:
        # Stagger the first requests over half the warm-up: workers started together stay in lockstep
        # (their prompts all land in one prefill step), which inflates TTFT below the knee.
        await asyncio.sleep(warmup / 2 * k / concurrency)
        while clock() < deadline and not (stop is not None and stop.is_set()):
            now = clock() - t0
            tokens, max_tokens = prompt.sample(rng), output.sample(rng)
            content = None
            if prompts is not None:
                tokens, content = prompts.make(tokens, max_tokens, conversation=k)
            rec = RequestRecord(len(m.records), now, tokens, max_tokens, warmup=now < warmup, content=content)
            m.records.append(rec)
            await client.send(rec, m, t0)

    ticker = loop.create_task(_tick(progress, m, t0, clock))
    workers = {loop.create_task(worker(k)) for k in range(concurrency)}
    status = "completed"
    stopper = loop.create_task(stop.wait()) if stop is not None else None
    try:
        pending = set(workers)
        while pending:
            await asyncio.wait(pending if stopper is None else {*pending, stopper}, return_when=asyncio.FIRST_COMPLETED)
            pending = {w for w in workers if not w.done()}
            if stopper is not None and stopper.done():
                status = "interrupted"
                break
    finally:
        ticker.cancel()
        if stopper is not None:
            stopper.cancel()
        await _finish(workers, 0)
        if progress is not None:
            progress.update(clock() - t0, m)
            progress.close()
    return RunResult(m, started_at, clock() - t0, status, len(m.records), warmup + duration)
