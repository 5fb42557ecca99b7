"""The Prometheus client's edge: credentials, TLS, timeouts, and failures mapped to our errors.

A small HTTP(S) server on 127.0.0.1 stands in for Prometheus where the real one cannot
be made to misbehave on demand (refuse a token, stall, answer HTML).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inferscale import handlers
from inferscale.config import OperatorConfig
from inferscale.prometheus import MalformedAnswer, MetricsUnavailable, PrometheusConfig, PrometheusSignals, QueryFailed
from inferscale.promql import answer_problem
from pydantic import ValidationError

from tests.operator.test_plan_tick import indexes

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EMPTY_VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}


@dataclass
class Behaviour:
    status: int = 200
    body: bytes = json.dumps(EMPTY_VECTOR).encode()
    content_type: str = "application/json"
    delay: float = 0.0
    seen_authorization: list[str] = field(default_factory=list)
    seen_params: list[dict[str, list[str]]] = field(default_factory=list)


class FakePrometheus:
    def __init__(self, behaviour: Behaviour, tls: ssl.SSLContext | None = None) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(handler) -> None:
                url = urlparse(handler.path)
                behaviour.seen_authorization.append(handler.headers.get("Authorization", ""))
                behaviour.seen_params.append(parse_qs(url.query))
                time.sleep(behaviour.delay)
                try:
                    handler.send_response(behaviour.status)
                    handler.send_header("Content-Type", behaviour.content_type)
                    handler.send_header("Content-Length", str(len(behaviour.body)))
                    handler.end_headers()
                    handler.wfile.write(behaviour.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting, as it should

            def log_message(handler, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def behaviour() -> Behaviour:
    return Behaviour()


@pytest.fixture
def fake(behaviour: Behaviour) -> Iterator[FakePrometheus]:
    server = FakePrometheus(behaviour)
    yield server
    server.stop()


def fetch(config: PrometheusConfig) -> object:
    with PrometheusSignals(config) as signals:
        return signals.fetch_all(now=NOW)


def test_queries_are_evaluated_at_the_ticks_time_with_a_server_side_timeout(
    fake: FakePrometheus, behaviour: Behaviour
) -> None:
    assert fetch(PrometheusConfig(url=fake.url, timeout_seconds=5)) == {}

    assert len(behaviour.seen_params) == 15  # promql.py: fifteen fixed queries a tick
    for params in behaviour.seen_params:
        assert params["time"] == [f"{NOW.timestamp():.3f}"]
        (timeout,) = params["timeout"]
        assert timeout.endswith("ms") and 0 < int(timeout[:-2]) <= 5000


def test_the_bearer_token_is_sent_and_reread_when_it_rotates(
    fake: FakePrometheus, behaviour: Behaviour, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("first-secret\n")
    with PrometheusSignals(PrometheusConfig(url=fake.url, bearer_token_file=token)) as signals:
        signals.fetch_all(now=NOW)
        token.write_text("second-secret\n")
        signals.fetch_all(now=NOW)
        per_tick = len(signals.queries)

    assert set(behaviour.seen_authorization[:per_tick]) == {"Bearer first-secret"}
    assert set(behaviour.seen_authorization[per_tick:]) == {"Bearer second-secret"}


def test_refused_credentials_name_the_token_file_but_never_the_token(
    fake: FakePrometheus, behaviour: Behaviour, tmp_path: Path
) -> None:
    behaviour.status, behaviour.body = 401, b"Unauthorized"
    token = tmp_path / "token"
    token.write_text("super-secret-token")

    with pytest.raises(MetricsUnavailable) as caught:
        fetch(PrometheusConfig(url=fake.url, bearer_token_file=token))

    message = str(caught.value)
    assert "refused the credentials (HTTP 401)" in message
    assert str(token) in message
    assert "super-secret-token" not in message
    assert "super-secret-token" not in repr(PrometheusConfig(url=fake.url, bearer_token_file=token))


def test_an_unreadable_token_file_is_reported(fake: FakePrometheus, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    config = PrometheusConfig(url=fake.url, bearer_token_file=token)
    token.unlink()  # e.g. the projected volume went away after startup

    with pytest.raises(MetricsUnavailable, match=r"Cannot read the bearer token file .*token"):
        fetch(config)


def test_a_bad_query_answer_is_query_failed(fake: FakePrometheus, behaviour: Behaviour) -> None:
    behaviour.status = 422
    behaviour.body = json.dumps(
        {"status": "error", "errorType": "execution", "error": "many-to-many matching not allowed"}
    ).encode()

    with pytest.raises(QueryFailed, match=r"rejected query queue_depth: execution: many-to-many matching not allowed"):
        fetch(PrometheusConfig(url=fake.url))


def test_a_failing_prometheus_is_unavailable(fake: FakePrometheus, behaviour: Behaviour) -> None:
    behaviour.status = 503
    behaviour.body = json.dumps({"status": "error", "errorType": "timeout", "error": "query timed out"}).encode()

    with pytest.raises(MetricsUnavailable, match=r"failed query queue_depth \(HTTP 503\): timeout: query timed out"):
        fetch(PrometheusConfig(url=fake.url))


def test_a_url_that_is_not_prometheus_is_unavailable(fake: FakePrometheus, behaviour: Behaviour) -> None:
    behaviour.body, behaviour.content_type = b"<html>Grafana</html>", "text/html"

    with pytest.raises(MetricsUnavailable, match="not a Prometheus API result: check the url"):
        fetch(PrometheusConfig(url=fake.url))


def test_an_error_body_that_is_not_json_reaches_the_message_as_text(fake: FakePrometheus, behaviour: Behaviour) -> None:
    behaviour.status, behaviour.body, behaviour.content_type = 500, b"internal error\n", "text/plain"

    with pytest.raises(MetricsUnavailable) as caught:
        fetch(PrometheusConfig(url=fake.url))
    assert str(caught.value) == f"Prometheus at {fake.url} failed query queue_depth (HTTP 500): internal error"


def test_a_long_error_page_is_cut_to_one_short_line(fake: FakePrometheus, behaviour: Behaviour) -> None:
    page = "<html>\n<body>\n" + "Bad gateway. " * 100 + "</body></html>"
    behaviour.status, behaviour.body, behaviour.content_type = 502, page.encode(), "text/html"

    with pytest.raises(MetricsUnavailable) as caught:
        fetch(PrometheusConfig(url=fake.url))
    detail = str(caught.value).split("(HTTP 502): ", 1)[1]
    assert detail.startswith("<html> <body> Bad gateway. Bad gateway.")
    assert detail.endswith("...") and len(detail) == 200 and "\n" not in detail


CHAT = {"namespace": "a", "service": "chat"}


def vector(*samples: object) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": list(samples)}}).encode()


@pytest.mark.parametrize(
    ("sample", "what"),
    [
        ({"metric": "chat", "value": [1.0, "1"]}, 'sample 1 of 1: its metric is "chat", not an object of labels'),
        (
            {"metric": {"namespace": "a", "service": "chat"}, "value": [1.0, "busy"]},
            'its value is "busy", not a number',
        ),
        ({"metric": {"namespace": "a", "service": "chat"}, "value": 3}, 'its value is 3, not a [timestamp, "number"]'),
    ],
)
def test_a_malformed_answer_is_a_fault_that_names_the_query_and_what_was_wrong(
    fake: FakePrometheus, behaviour: Behaviour, sample: object, what: str
) -> None:
    behaviour.body = vector(sample)

    with pytest.raises(MalformedAnswer) as caught:
        fetch(PrometheusConfig(url=fake.url))
    message = str(caught.value)
    assert message.startswith(f"Prometheus at {fake.url} answered query queue_depth with ")
    assert what in message
    assert "stale" not in message


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
_NEAR_MISS = st.fixed_dictionaries(
    {},
    optional={"metric": st.just(CHAT) | _JSON, "value": st.tuples(st.just(1.0) | _JSON, _JSON).map(list) | _JSON},
)


@settings(max_examples=40, deadline=None)
@given(answer=(st.lists(_NEAR_MISS, min_size=1, max_size=3) | _JSON).filter(lambda a: answer_problem(a) is not None))
def test_any_malformed_answer_over_http_is_a_fault_that_says_why(answer: object) -> None:
    behaviour = Behaviour(
        body=json.dumps({"status": "success", "data": {"resultType": "vector", "result": answer}}).encode()
    )
    fake = FakePrometheus(behaviour)
    try:
        with pytest.raises(MalformedAnswer) as caught:
            fetch(PrometheusConfig(url=fake.url))
    finally:
        fake.stop()
    assert str(caught.value) == f"Prometheus at {fake.url} answered query queue_depth with {answer_problem(answer)}"


def test_the_tick_holds_and_says_what_is_wrong_now_not_what_was_wrong_before(
    fake: FakePrometheus, behaviour: Behaviour
) -> None:
    """Through the real client and the tick's planning: each tick's condition carries its own fault."""
    index = indexes({("a", "chat"): 3})

    def metrics_condition(signals: PrometheusSignals) -> dict[str, Any]:
        planned = asyncio.run(handlers.plan_tick(signals, OperatorConfig(), index, logging.getLogger("tick")))
        assert planned is not None
        [(_, _, held)] = planned.plans
        assert held.scale_to is None  # replicas are held, on purpose
        return next(c for c in held.status["conditions"] if c["type"] == "MetricsAvailable")

    with PrometheusSignals(PrometheusConfig(url=fake.url)) as signals:
        behaviour.body = vector({"metric": ["namespace", "a"], "value": [1.0, "1"]})
        first = metrics_condition(signals)
        assert first["status"] == "False"
        assert "answered query queue_depth with sample 1 of 1: its metric is [" in first["message"]

        behaviour.status, behaviour.body = 500, b"internal error"
        index.isvcs[("a", "chat")][0]["status"]["conditions"] = [first]
        second = metrics_condition(signals)
        assert second["message"] == (
            f"Prometheus at {fake.url} failed query queue_depth (HTTP 500): internal error; replicas are held"
        )


def test_a_stalled_prometheus_fails_within_the_budget(fake: FakePrometheus, behaviour: Behaviour) -> None:
    behaviour.delay = 2.0
    started = time.monotonic()

    with pytest.raises(MetricsUnavailable, match=r"did not answer .*within 0\.5s"):
        fetch(PrometheusConfig(url=fake.url, timeout_seconds=0.5, parallel_queries=2))
    assert time.monotonic() - started < 1.5
    asked = [params["query"][0] for params in behaviour.seen_params]
    assert len(asked) == len(set(asked)) == 2  # two at a time, none asked twice


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
    command += ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        command,
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


@pytest.fixture
def tls_fake(behaviour: Behaviour, certificate: tuple[Path, Path]) -> Iterator[FakePrometheus]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    server = FakePrometheus(behaviour, tls=context)
    yield server
    server.stop()


def test_https_is_verified_with_the_configured_ca(tls_fake: FakePrometheus, certificate: tuple[Path, Path]) -> None:
    assert tls_fake.url.startswith("https://")
    assert fetch(PrometheusConfig(url=tls_fake.url, ca_file=certificate[0])) == {}

    with pytest.raises(
        MetricsUnavailable, match=r"TLS verification of Prometheus at https://.* failed .*: set ca_file"
    ):
        fetch(PrometheusConfig(url=tls_fake.url))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"url": "prometheus:9090"}, "must start with http:// or https://"),
        ({"url": "http://p:9090", "bearer_token_file": "/nonexistent/token"}, "/nonexistent/token is not a readable"),
        ({"url": "http://p:9090", "ca_file": "/nonexistent/ca.crt"}, "/nonexistent/ca.crt is not a readable"),
        ({"url": "http://p:9090", "timeout_seconds": 0}, "greater than 0"),
    ],
)
def test_bad_settings_name_the_setting_and_the_fix(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PrometheusConfig.model_validate(settings)


def test_the_url_loses_its_trailing_slash() -> None:
    assert PrometheusConfig(url="http://prometheus:9090/").url == "http://prometheus:9090"
