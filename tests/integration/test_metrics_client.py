"""The Prometheus client's edge: credentials, TLS, timeouts, and failures mapped to our errors.

A small HTTP(S) server on 127.0.0.1 stands in for Prometheus where the real one cannot
be made to misbehave on demand (refuse a token, stall, answer HTML).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from inferscale.metrics import MetricsUnavailable, PrometheusConfig, PrometheusSignals, QueryFailed
from pydantic import ValidationError

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

    assert len(behaviour.seen_params) == 14
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
