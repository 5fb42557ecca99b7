"""The Prometheus edge: send the tick's fixed query set, get signals for every service back.

Build one `PrometheusSignals` at startup and call `fetch_all(now=...)` once per tick. It is
synchronous (prometheus-api-client uses requests), so run it off the event loop, e.g.
`await asyncio.to_thread(signals.fetch_all, now=now)`. The query text and the parsing
live in `promql`; failures come out as our own `MetricsUnavailable`, `QueryFailed` or
`MalformedAnswer`.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, cast

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from pydantic import BaseModel, ConfigDict, Field, field_validator
from urllib3.util.retry import Retry

from inferscale.promql import (
    QueryOptions,
    ServiceKey,
    ServiceSignals,
    Signal,
    SignalQuery,
    answer_problem,
    build_queries,
    parse_pod_load,
    parse_signals,
    pod_load_query,
)

__all__ = [
    "MalformedAnswer",
    "MetricsError",
    "MetricsUnavailable",
    "PrometheusClient",
    "PrometheusConfig",
    "PrometheusSignals",
    "QueryFailed",
    "QueryOptions",
    "ServiceKey",
    "ServiceSignals",
    "Signal",
]

logger = logging.getLogger(__name__)


class MetricsError(Exception):
    """Prometheus could not give the tick its signals."""


class MetricsUnavailable(MetricsError):
    """Prometheus was unreachable, refused our credentials, failed, or did not answer in time."""


class QueryFailed(MetricsError):
    """Prometheus rejected a query as malformed or could not evaluate it."""

    def __init__(self, message: str, *, query: str) -> None:
        super().__init__(message)
        self.query = query


class MalformedAnswer(MetricsError):
    """Prometheus answered a query with something that is not an instant vector of numbers."""


class PrometheusConfig(BaseModel):
    """Where Prometheus is and how to talk to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: Annotated[str, Field(description="Base URL of the Prometheus HTTP API, e.g. http://prometheus:9090.")]
    bearer_token_file: Annotated[
        Path | None,
        Field(description="File holding a bearer token, read again for every request (tokens rotate)."),
    ] = None
    ca_file: Annotated[Path | None, Field(description="CA bundle to verify an https URL with.")] = None
    timeout_seconds: Annotated[
        float, Field(gt=0, le=300, description="Budget for one tick's queries together, in seconds.")
    ] = 10.0
    parallel_queries: Annotated[int, Field(ge=1, le=16, description="Queries of one tick sent at the same time.")] = 4

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"prometheus url must start with http:// or https:// and name a host; got {value!r}")
        return value.rstrip("/")

    @field_validator("bearer_token_file", "ca_file")
    @classmethod
    def _readable_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a readable file: mount it, or leave the setting out")
        return value


class _BearerTokenFile(requests.auth.AuthBase):
    """Adds `Authorization: Bearer <token>`, reading the file each time; its repr shows only the path."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.path.read_text().strip()}"
        return request

    def __repr__(self) -> str:
        return f"_BearerTokenFile({str(self.path)!r})"


_STATUS = re.compile(r"^HTTP Status Code (\d+) \((.*)\)$", re.DOTALL)


def _prometheus_error(error: PrometheusApiClientException) -> tuple[int | None, str]:
    """The HTTP status and Prometheus' own error text out of prometheus-api-client's message."""
    match = _STATUS.match(str(error))
    if match is None:
        return None, str(error)
    status, body = int(match[1]), match[2]
    try:
        raw = ast.literal_eval(body)  # the client writes the body as a bytes repr: b'...'
    except (ValueError, SyntaxError, TypeError):
        raw = body
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    try:
        decoded: Any = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and "error" in decoded:
        return status, f"{decoded.get('errorType', 'error')}: {_cut(str(decoded['error']))}"
    return status, _cut(text)


def _cut(text: str, limit: int = 200) -> str:
    """An error body on one line and at most `limit` characters: it goes into a condition message."""
    line = " ".join(text.split()) or "(empty body)"
    return line if len(line) <= limit else f"{line[: limit - 3]}..."


class PrometheusClient:
    """Instant queries against one Prometheus, with its errors mapped to ours."""

    def __init__(self, config: PrometheusConfig) -> None:
        self.config = config
        session = requests.Session()
        session.verify = str(config.ca_file) if config.ca_file else True
        # Retry only connections that failed before a request went out; a slow answer is
        # not asked for twice (read=False also keeps a read timeout a Timeout), and the
        # next tick tries again anyway.
        retry = Retry(total=2, connect=2, read=False, status=0, other=0, backoff_factor=0.1, allowed_methods=None)
        self._prom = PrometheusConnect(
            url=config.url,
            session=session,
            auth=_BearerTokenFile(config.bearer_token_file) if config.bearer_token_file else None,
            retry=retry,
            timeout=config.timeout_seconds,
        )

    def close(self) -> None:
        self._prom.close()

    def instant_query(self, promql: str, *, at: datetime, timeout: float, name: str = "query") -> list[Any]:
        """The result list of one instant query evaluated at `at`; raises MetricsError."""
        url = self.config.url
        params = {"time": f"{at.timestamp():.3f}", "timeout": f"{max(int(timeout * 1000), 1)}ms"}
        try:
            result = self._prom.custom_query(promql, params=params, timeout=timeout)
        except PrometheusApiClientException as error:
            status, detail = _prometheus_error(error)
            if status in (400, 422):
                raise QueryFailed(f"Prometheus at {url} rejected query {name}: {detail}", query=promql) from None
            if status in (401, 403):
                token = self.config.bearer_token_file
                fix = f"check the token in {token}" if token else "set bearer_token_file"
                raise MetricsUnavailable(
                    f"Prometheus at {url} refused the credentials (HTTP {status}) for query {name}: {fix}"
                ) from None
            hint = ": check the url (it should be Prometheus' base URL)" if status == 404 else ""
            raise MetricsUnavailable(
                f"Prometheus at {url} failed query {name} (HTTP {status}): {detail}{hint}"
            ) from None
        except requests.exceptions.Timeout:
            raise MetricsUnavailable(f"Prometheus at {url} did not answer query {name} within {timeout:.1f}s") from None
        except requests.exceptions.SSLError as error:
            fix = f"is {self.config.ca_file} the CA that signed it?" if self.config.ca_file else "set ca_file"
            raise MetricsUnavailable(
                f"TLS verification of Prometheus at {url} failed ({_reason(error)}): {fix}"
            ) from None
        except requests.exceptions.ConnectionError as error:
            raise MetricsUnavailable(f"Cannot connect to Prometheus at {url}: {_reason(error)}") from None
        except (requests.exceptions.JSONDecodeError, KeyError, TypeError):
            raise MetricsUnavailable(
                f"{url} answered query {name} with something that is not a Prometheus API result: "
                "check the url points at Prometheus (no /api/v1 suffix)"
            ) from None
        except requests.exceptions.RequestException as error:
            raise MetricsUnavailable(f"Query {name} to Prometheus at {url} failed: {error}") from None
        except OSError as error:  # the token file could not be read
            raise MetricsUnavailable(
                f"Cannot read the bearer token file {error.filename}: {error.strerror}; query {name} not sent"
            ) from None
        problem = answer_problem(result)
        if problem is not None:
            raise MalformedAnswer(f"Prometheus at {url} answered query {name} with {problem}")
        return cast(list[Any], result)


def _reason(error: requests.exceptions.RequestException) -> str:
    """The innermost cause of a connection error, which names what went wrong (refused, DNS, TLS)."""
    cause: BaseException = error
    while cause.__context__ is not None and cause.__context__ is not cause:
        cause = cause.__context__
    return str(cause) or type(cause).__name__


class PrometheusSignals:
    """Signals for every InferenceService from one fixed set of queries; build once, call per tick."""

    def __init__(self, config: PrometheusConfig, *, options: QueryOptions | None = None) -> None:
        self.options = options or QueryOptions()
        self.queries: tuple[SignalQuery, ...] = build_queries(self.options)
        self.client = PrometheusClient(config)
        # Prometheus evaluates queries side by side; the slowest (TTFT's histograms) sets the pace.
        self._pool = ThreadPoolExecutor(max_workers=config.parallel_queries, thread_name_prefix="prometheus-query")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def __enter__(self) -> PrometheusSignals:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def fetch_all(self, *, now: datetime) -> dict[ServiceKey, ServiceSignals]:
        """Run the query set evaluated at `now`; signals keyed by (namespace, service).

        Services without any series are absent: use ServiceSignals.nothing_observed.
        Raises MetricsUnavailable, QueryFailed or MalformedAnswer; the whole budget is config.timeout_seconds.
        """
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware (e.g. datetime.now(UTC))")
        config = self.client.config
        budget = config.timeout_seconds
        started = time.monotonic()

        def run(query: SignalQuery) -> list[Any]:
            remaining = budget - (time.monotonic() - started)
            if remaining <= 0:
                raise MetricsUnavailable(f"Query {query.name} did not get a turn within {budget:.1f}s")
            return self.client.instant_query(query.promql, at=now, timeout=remaining, name=query.name)

        futures = [(query, self._pool.submit(run, query)) for query in self.queries]
        _, pending = wait([future for _, future in futures], timeout=budget)
        for _, future in futures:
            if future.done() and future.exception() is not None:
                for _, other in futures:
                    other.cancel()
                future.result()  # raises the first failure, in query order
        if pending:
            for future in pending:
                future.cancel()
            late = ", ".join(query.name for query, future in futures if future in pending)
            raise MetricsUnavailable(
                f"Prometheus at {config.url} did not answer the tick's queries within {budget:.1f}s "
                f"(still waiting for {late})"
            )
        results = {query.name: future.result() for query, future in futures}
        try:
            signals = parse_signals(results, sampled_at=now, options=self.options)
        except ValueError as error:
            raise MalformedAnswer(f"Prometheus at {config.url}: {error}") from None
        logger.debug(
            "Queried Prometheus for signals",
            extra={"queries": len(self.queries), "services": len(signals), "seconds": time.monotonic() - started},
        )
        return signals

    def pod_load(self, *, now: datetime) -> dict[ServiceKey, dict[str, float]]:
        """Requests in flight per engine pod, for every service (one query); raises MetricsError."""
        query = pod_load_query(self.options)
        result = self.client.instant_query(query, at=now, timeout=self.client.config.timeout_seconds, name="pod_load")
        try:
            return parse_pod_load(result, self.options)
        except ValueError as error:
            raise MalformedAnswer(f"Prometheus at {self.client.config.url}: {error}") from None
