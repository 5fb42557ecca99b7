"""simengine: an HTTP server that looks like vLLM, TGI, SGLang or llama.cpp to clients and to Prometheus.

Run it as::

    python -m loadgen.engine.server --engine vllm --profile a10g-llama3-8b-awq --port 8000

Behind the API is ``EngineRuntime`` (the pure ``EngineModel`` plus per-request bookkeeping and metrics),
advanced against the real clock by one asyncio task; request handlers wait for their tokens and stream
them as the engine would.

Differences from the real servers, on purpose:

* Every request generates ``max_tokens`` tokens (as with ``ignore_eos``) of a fixed sequence of filler
  words; one whitespace-separated word of prompt counts as one token (see ``loadgen.engine.tokens``). In vLLM mode
  a ``stop`` string ends generation where that fixed text first contains it (``finish_reason: "stop"``), and
  the ``n`` choices are n sequences in the engine with the same text.
* SGLang and llama.cpp modes speak those servers' APIs and ``/metrics`` over the same batching model: SGLang's
  RadixAttention is modelled by the same block-level prefix cache as vLLM's, and llama.cpp's slots as
  ``--parallel`` sequences sharing one KV pool of ``--ctx-size`` tokens (the real server gives each slot a
  fixed ``ctx-size / parallel`` share and keeps only that slot's last prompt cached).
* On SIGTERM it stops listening, answers 503 to new requests on open connections, lets the requests in
  flight finish (up to ``--drain-timeout``), then exits, as vLLM or TGI do behind a preStop hook.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from inferscale.api import Engine

from loadgen.engine import api_llamacpp as llamacpp
from loadgen.engine.api import (
    VLLM_VERSION,
    ApiError,
    Choice,
    Endpoint,
    GenerationRequest,
    ResponseContext,
    StopHit,
    chat_chunk,
    completion_chunk,
    completion_response,
    engine_error,
    find_stop,
    generated_text,
    parse_request,
    rejection_error,
    sglang_model_info,
    sglang_models,
    sse,
    tgi_error,
    tgi_generate_response,
    tgi_info,
    tgi_models,
    tgi_overloaded,
    tgi_stream_token,
    usage,
    usage_chunk,
    vllm_error,
    vllm_models,
)
from loadgen.engine.metrics import (
    VLLM_METRICS_VERSIONS,
    EngineMetrics,
    LlamacppMetrics,
    RequestTimeline,
    SglangMetrics,
    TgiMetrics,
    VllmMetrics,
)
from loadgen.engine.model import BatchingMode, RequestRejected
from loadgen.engine.profiles import DEFAULT_PROFILES, PROFILES, EngineProfile, get_profile
from loadgen.engine.runtime import EngineRuntime, TrackedRequest
from loadgen.engine.tokens import output_token_text

__all__ = ["ServerConfig", "SimEngineServer", "main", "running_server"]

log = logging.getLogger("loadgen.engine.server")

DEFAULT_MODEL_NAME = "meta-llama/Meta-Llama-3-8B-Instruct"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything that shapes one simulated engine server."""

    engine: Engine
    profile: EngineProfile
    model_name: str
    mode: BatchingMode = BatchingMode.CONTINUOUS
    cold_start_s: float = 0.0
    vllm_metrics_version: str = "0.11"
    max_concurrent_requests: int = 128
    """TGI's router limit: beyond this many requests in flight, answer 429 ``Model is overloaded``."""
    drain_timeout_s: float = 600.0
    prefix_caching: bool = True
    """vLLM V1's automatic prefix caching (``--no-enable-prefix-caching`` turns it off); TGI's prefix cache
    (``PREFIX_CACHING=0`` turns it off)."""


class SimEngineServer:
    """The aiohttp application around one ``EngineRuntime``."""

    def __init__(self, config: ServerConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._t0 = clock()
        self._created = int(time.time())
        profile = config.profile
        metrics: EngineMetrics
        if config.engine is Engine.VLLM:
            metrics = VllmMetrics(
                model_name=config.model_name,
                max_model_len=profile.max_model_len,
                block_size=profile.block_size,
                num_gpu_blocks=profile.kv_blocks,
                version=config.vllm_metrics_version,
                prefix_caching=config.prefix_caching,
            )
        elif config.engine is Engine.SGLANG:
            metrics = SglangMetrics(
                model_name=config.model_name,
                max_total_num_tokens=profile.kv_capacity_tokens,
                block_size=profile.block_size,
            )
        elif config.engine is Engine.LLAMACPP:
            metrics = LlamacppMetrics()
        else:
            metrics = TgiMetrics(
                max_input_tokens=profile.max_model_len - 1,
                max_total_tokens=profile.max_model_len,
                max_batch_total_tokens=profile.kv_capacity_tokens,
            )
        self.runtime = EngineRuntime(profile, metrics, mode=config.mode, prefix_caching=config.prefix_caching)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._inflight = 0
        self._draining = False
        self._driver: asyncio.Task[None] | None = None
        self.app = self._make_app()

    # --- clock and engine loop ---------------------------------------------------------------------

    def now(self) -> float:
        """Seconds since the server started (the engine's time)."""
        return self._clock() - self._t0

    @property
    def ready(self) -> bool:
        """True once the cold start has elapsed."""
        return self.now() >= self.config.cold_start_s

    async def _drive(self) -> None:
        while True:
            self.runtime.advance(self.now())
            due = self.runtime.next_event_time()
            self._wake.clear()
            if due is None:
                await self._wake.wait()
                continue
            delay = due - self.now()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)

    async def _on_startup(self, app: web.Application) -> None:
        self._driver = asyncio.create_task(self._drive(), name="simengine-engine-loop")

    async def _on_cleanup(self, app: web.Application) -> None:
        if self._driver is not None:
            self._driver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._driver

    # --- draining ----------------------------------------------------------------------------------

    def begin_drain(self) -> None:
        """Refuse new work from now on; requests in flight carry on."""
        self._draining = True

    async def wait_drained(self, timeout: float) -> bool:
        """Wait until no request is in flight; False if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @property
    def in_flight(self) -> int:
        return self._inflight

    # --- HTTP --------------------------------------------------------------------------------------

    def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        routes = [
            web.get("/health", self._health),
            web.get("/metrics", self._metrics),
            web.post("/v1/completions", self._completions),
            web.post("/v1/chat/completions", self._chat),
        ]
        engine = self.config.engine
        if engine is Engine.VLLM:
            routes += [web.get("/v1/models", self._vllm_models), web.get("/version", self._vllm_version)]
        elif engine is Engine.SGLANG:
            routes += [web.get("/v1/models", self._sglang_models), web.get("/get_model_info", self._sglang_info)]
        elif engine is Engine.LLAMACPP:
            routes += [
                web.get("/v1/models", self._llamacpp_models),
                web.post("/completion", self._completion),
                web.post("/completions", self._completion),
            ]
        else:
            routes += [
                web.get("/info", self._tgi_info),
                web.get("/v1/models", self._tgi_models),
                web.post("/generate", self._generate),
                web.post("/generate_stream", self._generate_stream),
                web.post("/", self._compat_generate),
            ]
        app.add_routes(routes)
        return app

    def _error(self, err: ApiError) -> web.Response:
        return _json(err.body, err.status)

    def _unavailable(self, message: str) -> web.Response:
        return self._error(engine_error(self.config.engine, 503, message))

    @web.middleware
    async def _gate(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if self.config.engine is Engine.LLAMACPP and not self.ready:
            # llama-server listens at once and answers 503 "Loading model" until the model is in memory.
            status, body = llamacpp.loading()
            return _json(body, status)
        try:
            response: web.StreamResponse = await handler(request)
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as missing:
            return self._no_route(missing)
        return response

    def _no_route(self, missing: web.HTTPException) -> web.Response:
        """A path or method no route serves. vLLM's FastAPI answers with Starlette's default handler,
        ``{"detail": "Not Found"}`` (or ``"Method Not Allowed"``) as JSON; TGI's axum router has no fallback
        route (``router/src/server.rs``), and axum's default is the bare status with an empty body."""
        headers = {"Allow": missing.headers["Allow"]} if "Allow" in missing.headers else {}
        if self.config.engine in (Engine.VLLM, Engine.SGLANG):  # both FastAPI
            return _json({"detail": missing.reason}, missing.status, headers)
        if self.config.engine is Engine.LLAMACPP:  # the server's error handler
            return _json(engine_error(Engine.LLAMACPP, 404, "File Not Found").body, 404)
        return web.Response(status=missing.status, headers=headers)

    async def _health(self, request: web.Request) -> web.Response:
        if self._draining:
            return self._unavailable("The server is shutting down")
        if self.config.engine is Engine.LLAMACPP:
            return _json(llamacpp.health_ok(), 200)
        return web.Response(status=200)

    async def _metrics(self, request: web.Request) -> web.Response:
        body, content_type = self.runtime.render_metrics(self.now())
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _vllm_models(self, request: web.Request) -> web.Response:
        cfg = self.config
        return web.json_response(vllm_models(cfg.model_name, cfg.profile.max_model_len, self._created))

    async def _vllm_version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VLLM_VERSION})

    async def _sglang_models(self, request: web.Request) -> web.Response:
        cfg = self.config
        return _json(sglang_models(cfg.model_name, cfg.profile.max_model_len, self._created), 200)

    async def _sglang_info(self, request: web.Request) -> web.Response:
        return _json(sglang_model_info(self.config.model_name), 200)

    async def _llamacpp_models(self, request: web.Request) -> web.Response:
        cfg = self.config
        return _json(llamacpp.models(cfg.model_name, self._created, cfg.profile.max_model_len), 200)

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, Endpoint.COMPLETION)

    async def _tgi_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        return web.json_response(tgi_info(cfg.model_name, cfg.profile.max_model_len, cfg.max_concurrent_requests))

    async def _tgi_models(self, request: web.Request) -> web.Response:
        return web.json_response(tgi_models(self.config.model_name))

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, Endpoint.COMPLETIONS)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, Endpoint.CHAT)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, Endpoint.GENERATE, stream=False)

    async def _generate_stream(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, Endpoint.GENERATE, stream=True)

    async def _compat_generate(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, Endpoint.GENERATE, compat=True)

    async def _serve(
        self, request: web.Request, endpoint: Endpoint, *, stream: bool | None = None, compat: bool = False
    ) -> web.StreamResponse:
        cfg = self.config
        metrics = self.runtime.metrics
        metrics.request_received()
        if self._draining:
            return self._unavailable("The server is shutting down")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            bad_json = (
                tgi_error(422, "Failed to parse the request body as JSON")
                if cfg.engine is Engine.TGI
                else engine_error(cfg.engine, 400, "The request body is not valid JSON")
            )
            metrics.request_rejected(bad_json.error_kind)
            return self._error(bad_json)
        try:
            req = parse_request(cfg.engine, endpoint, body, max_model_len=cfg.profile.max_model_len)
            if cfg.engine is Engine.VLLM and req.model is not None and req.model != cfg.model_name:
                raise vllm_error(404, f"The model `{req.model}` does not exist.", "NotFoundError")
            if cfg.engine is Engine.TGI and self._inflight >= cfg.max_concurrent_requests:
                raise tgi_overloaded()
        except ApiError as err:
            metrics.request_rejected(err.error_kind)
            return self._error(err)
        if stream is not None:
            req = dataclasses.replace(req, stream=stream)

        # A stop string ends every choice at the same token, since the text is deterministic: the engine is
        # asked for that many tokens, once the request has passed validation with the max_tokens it carries.
        hit = find_stop(req.max_tokens, req.stop)
        wakeup = asyncio.Event()
        seqs: list[_Sequence] = []
        try:
            refusal = self.runtime.model.validate(req.prompt_tokens, req.max_tokens)
            if refusal is not None:
                raise RequestRejected(refusal)
            for _ in range(req.n):  # vLLM runs each of n choices as a request of its own in the engine
                tokens = req.max_tokens if hit is None else hit.tokens
                tracked = self.runtime.submit(
                    req.prompt_tokens,
                    tokens,
                    now=self.now(),
                    notify=wakeup.set,
                    stops=hit is not None,
                    prompt=req.prompt,
                )
                seqs.append(_Sequence(tracked, hit))
        except RequestRejected as rejected:
            refusal = rejected.rejection
            answer = rejection_error(cfg.engine, refusal)
            metrics.request_rejected(answer.error_kind)
            return self._error(answer)
        self._wake.set()
        self._inflight += 1
        self._idle.clear()
        try:
            if req.stream:
                return await self._stream(request, req, seqs, wakeup)
            while not all(seq.tracked.done for seq in seqs):
                await wakeup.wait()
                wakeup.clear()
            return self._final_response(req, seqs, compat=compat)
        finally:
            for seq in seqs:
                if not seq.tracked.done:
                    self.runtime.cancel(seq.tracked, now=self.now())
                    self._wake.set()
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    def _context(self, tracked: TrackedRequest) -> ResponseContext:
        return ResponseContext(
            self.config.engine, tracked.timeline.request_id, self.config.model_name, int(time.time())
        )

    def _final_response(self, req: GenerationRequest, seqs: list[_Sequence], *, compat: bool) -> web.Response:
        tl = seqs[0].tracked.timeline
        if self.config.engine is Engine.LLAMACPP:
            body = llamacpp.final(self._context(seqs[0].tracked), req.endpoint, tl.prompt_tokens, seqs[0].result(),
                                  _timings(tl))  # fmt: skip
            return _json(body, 200)
        if req.endpoint is Endpoint.GENERATE:
            payload = tgi_generate_response(
                tl.prompt_tokens, tl.generated, details=req.details, finish_reason=seqs[0].reason
            )
            headers = {
                "x-prompt-tokens": str(tl.prompt_tokens),
                "x-generated-tokens": str(tl.generated),
                "x-compute-type": "gpu+optimized",
            }
            return web.json_response([payload] if compat else payload, headers=headers)
        ctx = self._context(seqs[0].tracked)
        choices = [seq.result() for seq in seqs]
        return web.json_response(completion_response(ctx, req.endpoint, tl.prompt_tokens, choices))

    async def _stream(
        self, request: web.Request, req: GenerationRequest, seqs: list[_Sequence], wakeup: asyncio.Event
    ) -> web.StreamResponse:
        engine = self.config.engine
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        if engine is Engine.TGI:
            headers["X-Accel-Buffering"] = "no"
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        ctx = self._context(seqs[0].tracked)
        prompt = seqs[0].tracked.timeline.prompt_tokens
        if engine is Engine.LLAMACPP:
            return await self._llamacpp_stream(response, req, seqs[0], wakeup)
        if req.endpoint is Endpoint.CHAT and engine in (Engine.VLLM, Engine.SGLANG):
            # vLLM opens a chat stream with one role chunk per choice (serving_chat.py).
            opener = b"".join(sse(chat_chunk(ctx, "", None, choice=i, first=True)) for i in range(len(seqs)))
            await response.write(opener)
        while True:
            await wakeup.wait()
            wakeup.clear()
            chunks: list[bytes] = []
            for choice, seq in enumerate(seqs):
                tl = seq.tracked.timeline
                while seq.sent < tl.generated:
                    seq.sent += 1
                    final = seq.tracked.done and seq.sent == tl.generated
                    seq.finish_sent = seq.finish_sent or final
                    chunks.append(sse(self._token_chunk(req, ctx, choice, seq, prompt, final=final)))
            if chunks:
                await response.write(b"".join(chunks))
            if all(seq.tracked.done for seq in seqs):
                break
        tail: list[bytes] = []
        if req.endpoint is not Endpoint.GENERATE:
            for choice, seq in enumerate(seqs):
                if not seq.finish_sent:  # e.g. finished with no token: a bare finish
                    seq.finish_sent = True
                    tail.append(sse(self._token_chunk(req, ctx, choice, seq, prompt, final=True, bare=True)))
            # TGI's completions take no stream_options: the last token's chunk carries the usage instead.
            if req.include_usage and not (engine is Engine.TGI and req.endpoint is Endpoint.COMPLETIONS):
                generated = sum(seq.tracked.timeline.generated for seq in seqs)
                tail.append(sse(usage_chunk(ctx, req.endpoint, prompt, generated)))
            tail.append(sse("[DONE]"))
        if tail:
            await response.write(b"".join(tail))
        await response.write_eof()
        return response

    async def _llamacpp_stream(
        self, response: web.StreamResponse, req: GenerationRequest, seq: _Sequence, wakeup: asyncio.Event
    ) -> web.StreamResponse:
        """llama-server's streams: token events, then a final event of their own (the finish reason and
        timings, ``"stop": true`` on ``/completion``), then ``data: [DONE]`` on the OpenAI routes only."""
        ctx = self._context(seq.tracked)
        tl = seq.tracked.timeline
        if req.endpoint is Endpoint.CHAT:
            await response.write(sse(llamacpp.chunk(ctx, req.endpoint, None, prompt=tl.prompt_tokens, predicted=0,
                                                    opener=True)))  # fmt: skip
        while True:
            await wakeup.wait()
            wakeup.clear()
            chunks = []
            while seq.sent < tl.generated:
                seq.sent += 1
                text = seq.piece(seq.sent)
                chunks.append(sse(llamacpp.chunk(ctx, req.endpoint, text, prompt=tl.prompt_tokens, predicted=seq.sent)))
            if chunks:
                await response.write(b"".join(chunks))
            if seq.tracked.done:
                break
        last = llamacpp.chunk(
            ctx,
            req.endpoint,
            None,
            prompt=tl.prompt_tokens,
            predicted=tl.generated,
            finish=seq.result(),
            timings=_timings(tl),
            include_usage=req.include_usage,
        )
        tail = sse(last) + (b"" if req.endpoint is Endpoint.COMPLETION else sse("[DONE]"))
        await response.write(tail)
        await response.write_eof()
        return response

    @staticmethod
    def _token_chunk(
        req: GenerationRequest,
        ctx: ResponseContext,
        choice: int,
        seq: _Sequence,
        prompt: int,
        *,
        final: bool,
        bare: bool = False,
    ) -> dict[str, Any]:
        text = "" if bare else seq.piece(seq.sent)
        reason = seq.reason if final else None
        stop_reason = seq.hit.stop if final and seq.hit is not None else None
        if req.endpoint is Endpoint.CHAT:
            return chat_chunk(ctx, text, reason, choice=choice, stop_reason=stop_reason)
        if req.endpoint is Endpoint.COMPLETIONS:
            generated = seq.tracked.timeline.generated
            return completion_chunk(
                ctx,
                text,
                reason,
                choice=choice,
                stop_reason=stop_reason,
                usage_body=usage(prompt, generated, ctx.engine) if final else None,
            )
        return tgi_stream_token(
            seq.sent,
            final=final,
            prompt=prompt,
            generated=seq.sent,
            details=req.details,
            finish_reason=reason or "length",
        )


def _json(body: Any, status: int, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON response typed ``application/json`` with no charset parameter, as Starlette's ``JSONResponse``
    and axum's ``Json`` send it (aiohttp's ``json_response`` would add ``; charset=utf-8``)."""
    data = json.dumps(body, separators=(",", ":")).encode()
    return web.Response(body=data, status=status, headers={**(headers or {}), "Content-Type": "application/json"})


def _timings(tl: RequestTimeline) -> llamacpp.Timings:
    """A finished llama.cpp slot's timings, from the request's engine timeline."""
    scheduled = tl.scheduled if tl.scheduled is not None else tl.arrival
    first = tl.first_token if tl.first_token is not None else scheduled
    last = tl.last_token if tl.last_token is not None else first
    return llamacpp.Timings(
        prompt_n=tl.prompt_tokens - tl.cached_tokens,
        prompt_ms=(first - scheduled) * 1e3,
        predicted_n=tl.generated,
        predicted_ms=(last - first) * 1e3,
    )


@dataclass(slots=True)
class _Sequence:
    """One choice of a request in the engine, and how much of it has been streamed."""

    tracked: TrackedRequest
    hit: StopHit | None
    sent: int = 0
    """Output tokens streamed so far."""
    chars: int = 0
    """Characters of uncut output text before token ``sent + 1``."""
    finish_sent: bool = False

    @property
    def reason(self) -> str:
        """The finish reason (``stop`` when a stop string ended it)."""
        tl = self.tracked.timeline
        return tl.finish_reason.value if tl.finish_reason is not None else "length"

    def piece(self, index: int) -> str:
        """The text of output token ``index`` (called once per token, in order), cut at a stop string."""
        text = output_token_text(index)
        start, self.chars = self.chars, self.chars + len(text)
        if self.hit is None:
            return text
        return text[: max(0, self.hit.text_chars - start)]

    def result(self) -> Choice:
        generated = self.tracked.timeline.generated
        text = generated_text(generated)
        stop_reason = None
        if self.reason == "stop" and self.hit is not None:
            text, stop_reason = text[: self.hit.text_chars], self.hit.stop
        return Choice(text, generated, self.reason, stop_reason)


# --- running ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_server(
    config: ServerConfig, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[tuple[SimEngineServer, str]]:
    """Start a server on ``host:port`` (0 picks a free port); yields it and its base URL, then drains it.

    The port is bound at once but listened on only once the cold start has elapsed, so until then a client
    is refused a connection, as by a loading engine: vLLM binds its socket before it builds the engine and
    listens only when uvicorn starts after it (``setup_server``/``create_server_socket`` in
    ``vllm/entrypoints/openai/api_server.py``); TGI's launcher starts the router, the process that binds the
    port, only once every shard reports ready (``launcher/src/main.rs``).
    """
    server = SimEngineServer(config)
    runner = web.AppRunner(server.app, handler_cancellation=True, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        await runner.cleanup()
        raise
    bound_port = sock.getsockname()[1]
    url = f"http://{host}:{bound_port}"
    site = web.SockSite(runner, sock)

    async def open_when_loaded() -> None:
        if config.engine is not Engine.LLAMACPP:
            await asyncio.sleep(max(0.0, config.cold_start_s - server.now()))
        await site.start()  # listen(): connections are accepted from here on
        if config.cold_start_s > 0:
            log.info("Model loaded; accepting connections on %s", url)

    opening = asyncio.create_task(open_when_loaded(), name="simengine-cold-start")
    try:
        # llama-server opens its port before loading the model and answers 503 until it is loaded.
        if config.cold_start_s <= 0 or config.engine is Engine.LLAMACPP:
            await opening
        yield server, url
    finally:
        server.begin_drain()
        if not opening.done():
            opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await opening
        if opening.done() and not opening.cancelled() and opening.exception() is None:
            await site.stop()
        await server.wait_drained(config.drain_timeout_s)
        await runner.cleanup()
        sock.close()


async def serve(config: ServerConfig, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT, then drain and return."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with running_server(config, host, port) as (server, url):
        ready_in = config.cold_start_s
        log.info(
            "Started simengine (%s, %s mode) on %s for model %s; ready in %.0fs. Profile %s",
            config.engine.value,
            config.mode.value,
            url,
            config.model_name,
            ready_in,
            config.profile.describe(),
        )
        await stop.wait()
        log.info("Received a stop signal; draining %d request(s) in flight", server.in_flight)
    log.info("Stopped simengine on %s", url)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadgen.engine.server",
        description=(
            "Simulated vLLM, TGI, SGLang or llama.cpp server: each one's HTTP API, SSE streaming, real /metrics names."
        ),
    )
    parser.add_argument("--engine", choices=[e.value for e in Engine], default=Engine.VLLM.value)
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="calibrated engine profile (see loadgen/engine/profiles.py; default: the engine's own, "
        + ", ".join(f"{engine}: {name}" for engine, name in DEFAULT_PROFILES.items())
        + ")",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--cold-start",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds the port refuses connections, as while an engine loads its model (default: the profile's "
        "cached cold start)",
    )
    parser.add_argument("--naive", action="store_true", help="serve fixed batches run to completion")
    parser.add_argument(
        "--model-name",
        "--served-model-name",
        "--model",
        "--model-id",
        "--model-path",
        "--hf-repo",
        "-hf",
        "-m",
        dest="model_name",
        default=None,
        help="model name to serve and to label metrics with (also accepted as vLLM's --model, TGI's --model-id, "
        "SGLang's --model-path, llama.cpp's --hf-repo/-hf/--model/-m)",
    )
    parser.add_argument(
        "--max-num-seqs",
        "--max-batch-size",
        "--max-running-requests",
        "--parallel",
        "-np",
        dest="max_num_seqs",
        type=int,
        default=None,
        help="concurrency ceiling of the running batch (default: the profile's knee)",
    )
    parser.add_argument(
        "--max-model-len",
        "--max-total-tokens",
        "--context-length",
        dest="max_model_len",
        type=int,
        default=None,
        help="longest prompt plus output (TGI: --max-total-tokens, SGLang: --context-length)",
    )
    parser.add_argument(
        "--ctx-size",
        "-c",
        dest="ctx_size",
        type=int,
        default=None,
        help="llama.cpp only: context tokens shared by the --parallel slots (each slot gets ctx-size / parallel)",
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=None,
        help="chunked-prefill token budget per step (default: the profile's)",
    )
    parser.add_argument("--no-chunked-prefill", action="store_true", help="prefill each prompt whole")
    parser.add_argument(
        "--max-concurrent-requests",
        type=int,
        default=None,
        help="TGI only: answer 429 beyond this many requests in flight (default 128, as TGI); when given "
        "without --max-batch-size it is also the batch ceiling, since no more can run",
    )
    parser.add_argument(
        "--vllm-metrics-version",
        choices=VLLM_METRICS_VERSIONS,
        default="0.11",
        help="which vLLM release's /metrics layout to expose",
    )
    parser.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reuse the KV of cached prompt prefixes (vLLM V1's default; TGI's is the PREFIX_CACHING "
        "environment variable, on by default too)",
    )
    parser.add_argument("--drain-timeout", type=float, default=600.0, metavar="SECONDS")
    parser.add_argument("--log-level", default="INFO")
    return parser


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """Turn parsed flags into a ``ServerConfig``; raises ``ValueError`` naming a bad flag."""
    engine = Engine(args.engine)
    profile = get_profile(args.profile or DEFAULT_PROFILES[engine.value])
    batched: int | bool | None = False
    if args.no_chunked_prefill:
        batched = None
    elif args.max_num_batched_tokens is not None:
        batched = args.max_num_batched_tokens
    max_num_seqs = args.max_num_seqs
    max_concurrent = 128 if args.max_concurrent_requests is None else args.max_concurrent_requests
    if max_concurrent < 1:
        raise ValueError(f"--max-concurrent-requests must be >= 1, got {max_concurrent}")
    if engine is Engine.TGI and args.max_concurrent_requests is not None and max_num_seqs is None:
        max_num_seqs = max_concurrent
    if max_num_seqs is not None and max_num_seqs < 1:
        raise ValueError(f"--max-num-seqs must be >= 1, got {max_num_seqs}")
    max_model_len = args.max_model_len
    if args.ctx_size is not None:
        if engine is not Engine.LLAMACPP:
            raise ValueError("--ctx-size is llama.cpp's flag: use --max-model-len for this engine")
        slots = max_num_seqs or profile.max_num_seqs
        if args.ctx_size < slots:
            raise ValueError(f"--ctx-size {args.ctx_size} leaves no context to each of {slots} slots")
        # The slots split the context evenly and the KV pool is exactly that context.
        max_model_len = args.ctx_size // slots
        profile = dataclasses.replace(profile, kv_capacity_tokens=max(args.ctx_size, profile.kv_capacity_tokens))
    profile = profile.with_overrides(
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        max_num_batched_tokens=batched,
    )
    cold_start = profile.cold_start_s if args.cold_start is None else args.cold_start
    if cold_start < 0:
        raise ValueError(f"--cold-start must be >= 0 seconds, got {cold_start}")
    return ServerConfig(
        engine=engine,
        profile=profile,
        model_name=args.model_name or DEFAULT_MODEL_NAME,
        mode=BatchingMode.NAIVE if args.naive else BatchingMode.CONTINUOUS,
        cold_start_s=cold_start,
        vllm_metrics_version=args.vllm_metrics_version,
        max_concurrent_requests=max_concurrent,
        drain_timeout_s=args.drain_timeout,
        prefix_caching=args.enable_prefix_caching,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if unknown:
        # Engine flags the simulator has no use for (--dtype, --revision, --tensor-parallel-size, ...), so a
        # pod's real argument list can be passed through unchanged.
        log.warning("Ignored engine flags the simulator does not model: %s", " ".join(unknown))
    try:
        config = config_from_args(args)
    except ValueError as err:
        parser.error(str(err))  # exits with status 2
    try:
        asyncio.run(serve(config, args.host, args.port))
    except OSError as err:
        print(f"simengine: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
