"""The reading and deciding half of the scaling tick (handlers.plan_tick), with plain dicts for
kopf's indexes and a stand-in for PrometheusSignals: one query set per tick, sent while the
views are built; the per-pod load only when a service scales down; a failed query set holds."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from inferscale import handlers
from inferscale.autoscaler import ServiceView
from inferscale.config import OperatorConfig
from inferscale.kube import KubeError
from inferscale.policy import Memory, Reason
from inferscale.prometheus import MetricsUnavailable
from inferscale.promql import ServiceKey, ServiceSignals, Signal

LOGGER = logging.getLogger("test_plan_tick")
CONFIG = OperatorConfig()


class Signals:
    """Answers like PrometheusSignals, and records what was asked."""

    def __init__(self, load: dict[ServiceKey, tuple[float, float]], *, fail: bool = False) -> None:
        self.load = load  # (waiting, running) per service
        self.fail = fail
        self.fetched: list[datetime] = []
        self.pod_loads: list[datetime] = []
        self.fetch_started = threading.Event()

    def fetch_all(self, *, now: datetime) -> dict[ServiceKey, ServiceSignals]:
        self.fetch_started.set()
        self.fetched.append(now)
        if self.fail:
            raise MetricsUnavailable("Cannot connect to Prometheus at http://prom:9090: connection refused")
        fresh = dict.fromkeys((Signal.QUEUE_DEPTH, Signal.RUNNING_REQUESTS, Signal.TTFT_P95_SECONDS), now)
        return {
            key: ServiceSignals(
                namespace=key[0],
                service=key[1],
                sampled_at=now,
                queue_depth=waiting,
                running_requests=running,
                ttft_p95_seconds=0.2,
                request_rate=running / 4,
                queue_time_seconds=0.05 * waiting,
                prefill_time_seconds=0.08,
                prefill_p95_seconds=0.12,
                observed_at=fresh,
            )
            for key, (waiting, running) in self.load.items()
        }

    def pod_load(self, *, now: datetime) -> dict[ServiceKey, dict[str, float]]:
        self.pod_loads.append(now)
        return {key: {f"{key[1]}-0": 1.0} for key in self.load}


def indexes(replicas: dict[ServiceKey, int], *, invalid: Iterable[ServiceKey] = ()) -> handlers.Indexes:
    """kopf's three indexes for services that have run, settled, for an hour."""
    earlier = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    isvcs, deployments, pods = {}, {}, {}
    for (namespace, name), count in replicas.items():
        spec: dict[str, Any] = {"model": {"id": "m"}, "maxConcurrency": 8, "replicas": {"min": 1, "max": 6}}
        if (namespace, name) in invalid:
            spec["maxConcurrency"] = 0
        memory = Memory.model_validate({"readyReplicas": count, "readyChangedAt": earlier})
        status = {"desiredReplicas": count, "autoscaler": memory.model_dump(mode="json", by_alias=True)}
        metadata = {"name": name, "namespace": namespace}
        isvcs[(namespace, name)] = [{"metadata": metadata, "spec": spec, "status": status}]
        deployments[(namespace, name)] = [count]
        pods[(namespace, name)] = [(f"{name}-{i}", "ready", None) for i in range(count)]
    return handlers.Indexes(isvcs=isvcs, deployments=deployments, pods=pods)  # type: ignore[arg-type]


def plan(signals: Signals, index: handlers.Indexes) -> handlers.TickPlans | None:
    return asyncio.run(handlers.plan_tick(signals, CONFIG, index, LOGGER))  # type: ignore[arg-type]


def test_no_service_sends_no_query() -> None:
    signals = Signals({})
    assert plan(signals, indexes({})) is None
    assert signals.fetched == []


def test_one_query_set_for_every_service_and_no_pod_load_without_a_scale_down() -> None:
    load = {("a", "chat"): (0.0, 11.0), ("b", "code"): (1.0, 12.0)}
    signals = Signals(load)
    planned = plan(signals, indexes({("a", "chat"): 2, ("b", "code"): 2}))

    assert planned is not None
    assert signals.fetched == [planned.now]
    assert {view.isvc.metadata.name: p.scale_to for _, view, p in planned.plans} == {"chat": None, "code": None}
    assert signals.pod_loads == [] and planned.pod_load == {}


def test_queue_wait_and_prefill_go_from_the_query_set_to_each_services_status() -> None:
    signals = Signals({("a", "chat"): (2.0, 11.0), ("b", "code"): (0.0, 12.0)})
    planned = plan(signals, indexes({("a", "chat"): 2, ("b", "code"): 2}))

    assert planned is not None
    recorded = {view.isvc.metadata.name: p.status["signals"] for _, view, p in planned.plans}
    assert recorded["chat"]["queueTimeSeconds"] == 0.1 and recorded["code"]["queueTimeSeconds"] == 0
    assert recorded["chat"]["prefillTimeSeconds"] == 0.08 and recorded["chat"]["prefillP95Seconds"] == 0.12
    assert recorded["code"]["requestRate"] == 3


def test_a_scale_down_asks_for_the_per_pod_load_once() -> None:
    load = {("a", "quiet"): (0.0, 1.0), ("a", "also-quiet"): (0.0, 1.0), ("b", "busy"): (0.0, 12.0)}
    signals = Signals(load)
    planned = plan(signals, indexes({("a", "quiet"): 4, ("a", "also-quiet"): 4, ("b", "busy"): 2}))

    assert planned is not None
    decided = {view.isvc.metadata.name: p for _, view, p in planned.plans}
    assert decided["quiet"].decision.reason is Reason.SCALED_DOWN and decided["quiet"].scale_to == 3
    assert decided["also-quiet"].scale_to == 3
    assert decided["busy"].scale_to is None
    assert signals.pod_loads == [planned.now]
    assert planned.pod_load[("a", "quiet")] == {"quiet-0": 1.0}


def test_prometheus_failing_holds_every_service() -> None:
    signals = Signals({("a", "quiet"): (0.0, 1.0)}, fail=True)
    planned = plan(signals, indexes({("a", "quiet"): 4}))

    assert planned is not None
    [(_, _, held)] = planned.plans
    assert held.scale_to is None
    assert held.decision.reason is Reason.METRICS_MISSING
    metrics = next(c for c in held.status["conditions"] if c["type"] == "MetricsAvailable")
    assert metrics["reason"] == "PrometheusUnavailable"
    assert signals.pod_loads == []


def test_invalid_specs_are_skipped_and_only_them_means_nothing_to_plan() -> None:
    signals = Signals({("a", "bad"): (0.0, 1.0)})
    assert plan(signals, indexes({("a", "bad"): 2}, invalid=[("a", "bad")])) is None


def test_prometheus_is_asked_while_the_views_are_built(monkeypatch: pytest.MonkeyPatch) -> None:
    signals = Signals({("a", "chat"): (0.0, 6.0)})
    real_views = handlers.service_views

    def views(index: handlers.Indexes) -> Iterable[tuple[dict[str, Any], ServiceView]]:
        # Building the views does not yield to the event loop: the queries must already be on their way.
        assert signals.fetch_started.wait(timeout=5), "fetch_all did not start before the views were built"
        yield from real_views(index)

    monkeypatch.setattr(handlers, "service_views", views)
    planned = plan(signals, indexes({("a", "chat"): 2}))
    assert planned is not None and len(planned.plans) == 1


class UnreachableKube:
    """The API server down: every write fails the way Kube reports a refused connection."""

    def __init__(self) -> None:
        self.calls = 0

    def _refuse(self, *_: Any, **__: Any) -> None:
        self.calls += 1
        raise KubeError("PATCH InferenceService failed: Max retries exceeded ... Connection refused")

    merge_patch = apply_status = post_event = _refuse


def test_an_api_server_outage_is_one_warning_a_tick_however_many_services(
    caplog: pytest.LogCaptureFixture,
) -> None:
    services = {("a", f"s{i}"): 2 for i in range(30)}
    signals = Signals(dict.fromkeys(services, (0.0, 4.0)))
    kube = UnreachableKube()
    with caplog.at_level(logging.DEBUG, logger=LOGGER.name):
        asyncio.run(handlers.run_tick(kube, signals, CONFIG, indexes(services), LOGGER))  # type: ignore[arg-type]

    assert kube.calls == 30  # each service's status write was tried
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith("Scaling failed for 30 of 30 InferenceServices, the next tick retries: ")
    assert warnings[0].endswith("Connection refused (and 29 more)")
