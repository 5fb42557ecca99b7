"""One tick for one service: the decision, the replica change, and the status that records it."""

from datetime import UTC, datetime, timedelta
from typing import Any

from inferscale.api import InferenceService, InferenceServiceStatus, ObjectMeta, parse_spec
from inferscale.autoscaler import MEMORY_FIELD, ServiceView, observation, plan_service
from inferscale.policy import Memory
from inferscale.promql import ServiceSignals, Signal
from inferscale.replicas import ReplicaCounts

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
WINDOW = {"stale_after": timedelta(seconds=60), "ttft_window": timedelta(seconds=60)}


def _view(
    *, replicas: int = 2, ready: int | None = None, pending: int = 0, status: dict[str, Any] | None = None
) -> ServiceView:
    isvc = InferenceService(
        metadata=ObjectMeta(name="llama", namespace="serving"),
        spec=parse_spec({"model": {"id": "m"}, "maxConcurrency": 8, "replicas": {"min": 1, "max": 6}}),
    )
    return ServiceView(
        isvc=isvc,
        status=status if status is not None else {"desiredReplicas": replicas},
        deployment_replicas=replicas,
        pods=ReplicaCounts(ready=replicas if ready is None else ready, pending=pending),
    )


def service_signals(*, waiting: float, running: float, ttft: float | None, at: datetime = NOW) -> ServiceSignals:
    observed = {s: at for s in (Signal.QUEUE_DEPTH, Signal.RUNNING_REQUESTS, Signal.TTFT_P95_SECONDS)}
    return ServiceSignals(
        namespace="serving",
        service="llama",
        sampled_at=NOW,
        queue_depth=waiting,
        running_requests=running,
        ttft_p95_seconds=ttft,
        observed_at=observed,
        missing=frozenset() if ttft is not None else frozenset({Signal.TTFT_P95_SECONDS}),
    )


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_queue_growth_scales_up_and_records_why() -> None:
    plan = plan_service(
        _view(replicas=2), service_signals(waiting=30, running=16, ttft=2.5), metrics_error=None, now=NOW, **WINDOW
    )

    assert plan.scale_to is not None and plan.scale_to > 2
    assert plan.status["desiredReplicas"] == plan.scale_to
    assert plan.status["lastDecision"]["reason"] == "SLOBreached"
    assert plan.status["lastScaleTime"] == NOW.isoformat()
    assert plan.status["signals"]["queueDepth"] == 30
    assert _conditions(plan.status)["MetricsAvailable"]["status"] == "True"
    [event] = plan.events
    assert event.type == "Normal"
    assert event.message.startswith(f"Scaled Deployment serving/llama from 2 to {plan.scale_to}: p95 TTFT 2.50s")


def test_prometheus_down_holds_and_says_why() -> None:
    error = "Cannot connect to Prometheus at http://prom:9090: connection refused"
    plan = plan_service(_view(replicas=3), None, metrics_error=error, now=NOW, **WINDOW)

    assert plan.scale_to is None
    assert plan.status["desiredReplicas"] == 3
    metrics = _conditions(plan.status)["MetricsAvailable"]
    assert (metrics["status"], metrics["reason"]) == ("False", "PrometheusUnavailable")
    assert metrics["message"] == f"{error}; replicas are held"
    assert plan.status["lastDecision"]["reason"] == "MetricsMissing"


def test_stale_metrics_hold() -> None:
    signals = service_signals(waiting=50, running=16, ttft=3.0, at=NOW - timedelta(minutes=5))
    plan = plan_service(_view(replicas=2), signals, metrics_error=None, now=NOW, **WINDOW)
    assert plan.scale_to is None
    assert plan.decision.reason.value == "MetricsStale"


def test_an_idle_service_has_its_metrics_available() -> None:
    plan = plan_service(
        _view(replicas=1), service_signals(waiting=0, running=0, ttft=None), metrics_error=None, now=NOW, **WINDOW
    )
    assert _conditions(plan.status)["MetricsAvailable"]["status"] == "True"


def test_out_of_gpus_is_a_limit_not_a_runaway() -> None:
    view = _view(replicas=3, ready=2, pending=1)
    plan = plan_service(view, service_signals(waiting=40, running=16, ttft=3.0), metrics_error=None, now=NOW, **WINDOW)
    assert plan.scale_to is None
    limited = _conditions(plan.status)["ScalingLimited"]
    assert (limited["status"], limited["reason"]) == ("True", "GPUCapacityReached")
    assert "Pending" in limited["message"]


def test_a_replica_count_changed_by_someone_else_is_reported_not_fought() -> None:
    view = _view(replicas=5, status={"desiredReplicas": 2})
    plan = plan_service(view, service_signals(waiting=0, running=20, ttft=0.5), metrics_error=None, now=NOW, **WINDOW)

    assert plan.scale_to is None  # no silent revert to 2
    warning = next(e for e in plan.events if e.type == "Warning")
    assert warning.reason == "ReplicasChangedExternally"
    assert "scaled to 5 by someone other than inferscale (it wanted 2)" in warning.message
    assert _conditions(plan.status)["ReplicasOverridden"]["status"] == "True"
    assert plan.status["desiredReplicas"] == 5


def test_a_count_raised_by_someone_else_is_held_for_the_scale_down_window_not_undone_at_the_next_tick() -> None:
    # The policy remembers an idle service at 1 replica; someone scales it to 2 and the new pod is starting.
    settled = Memory(ready_replicas=1, ready_changed_at=NOW - timedelta(minutes=30))
    status = {"desiredReplicas": 1, MEMORY_FIELD: settled.model_dump(mode="json", by_alias=True, exclude_none=True)}
    view = ServiceView(isvc=_view().isvc, status=status, deployment_replicas=2, pods=ReplicaCounts(ready=1, starting=1))
    idle = service_signals(waiting=0, running=0, ttft=None)
    plan = plan_service(view, idle, metrics_error=None, now=NOW, **WINDOW)

    assert plan.scale_to is None  # not back to 1 at once
    assert _conditions(plan.status)["ReplicasOverridden"]["status"] == "True"
    # Their replica becomes ready; a window later, with nothing to serve, the count follows the load again.
    status = plan.status
    for seconds in (60, 301):
        at = NOW + timedelta(seconds=seconds)
        view = ServiceView(isvc=view.isvc, status=status, deployment_replicas=2, pods=ReplicaCounts(ready=2))
        after = plan_service(
            view, service_signals(waiting=0, running=0, ttft=None, at=at), metrics_error=None, now=at, **WINDOW
        )
        status = after.status
    assert after.scale_to == 1


def test_memory_in_status_prevents_a_flap_after_restart() -> None:
    busy = plan_service(
        _view(replicas=2), service_signals(waiting=30, running=16, ttft=2.5), metrics_error=None, now=NOW, **WINDOW
    )
    assert busy.scale_to is not None
    scaled = busy.scale_to
    # A restarted operator reads only what status holds; load has dropped a minute later.
    status = dict(busy.status)
    assert MEMORY_FIELD in status
    later = NOW + timedelta(seconds=90)
    quiet = service_signals(waiting=0, running=2, ttft=0.2, at=later)
    plan = plan_service(_view(replicas=scaled, status=status), quiet, metrics_error=None, now=later, **WINDOW)
    assert plan.scale_to is None  # the 300 s scale-down window still remembers the peak
    assert plan.decision.reason.value == "Stabilizing"


def test_manual_mode_reports_but_never_scales() -> None:
    view = _view(replicas=2, status={"desiredReplicas": 1})
    manual = view.isvc.model_copy(
        update={"spec": parse_spec({"model": {"id": "m"}, "replicas": {"max": 8}, "scaling": {"mode": "Manual"}})}
    )
    view = ServiceView(isvc=manual, status=view.status, deployment_replicas=5, pods=ReplicaCounts(ready=5))
    plan = plan_service(view, service_signals(waiting=60, running=40, ttft=4.0), metrics_error=None, now=NOW, **WINDOW)

    assert plan.scale_to is None
    assert plan.events == []  # a manual count is not an external change
    assert plan.status["desiredReplicas"] == 5
    message = plan.status["lastDecision"]["message"]
    assert message.startswith("Manual mode keeps 5 replicas; Auto would run 8 (SLOBreached: p95 TTFT 4.00s")


def test_crash_looping_replicas_are_named_and_not_counted_as_capacity() -> None:
    view = _view(replicas=1)
    crashing = ServiceView(
        isvc=view.isvc, status=view.status, deployment_replicas=1, pods=ReplicaCounts(ready=0, failing=1)
    )
    plan = plan_service(crashing, None, metrics_error=None, now=NOW, **WINDOW)

    assert plan.scale_to is None  # no ready engine, no metrics: held, not grown
    message = plan.status["lastDecision"]["message"]
    assert "1 replica(s) failing (crash loop or image error) are not counted as capacity" in message
    assert "kubectl describe pod -l inferscale.io/service=llama" in message


def test_pending_pods_are_said_in_the_schedulers_words() -> None:
    view = _view(replicas=3, ready=2, pending=1)
    words = "pod llama-2: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    pending = ServiceView(
        isvc=view.isvc,
        status=view.status,
        deployment_replicas=3,
        pods=ReplicaCounts(ready=2, pending=1, kubernetes_says=words),
    )
    plan = plan_service(
        pending, service_signals(waiting=40, running=32, ttft=3.0), metrics_error=None, now=NOW, **WINDOW
    )
    assert plan.decision.reason.value == "GPUCapacityReached"
    assert plan.decision.message.endswith(f"Kubernetes says: {words}")
    limited = next(c for c in plan.status["conditions"] if c["type"] == "ScalingLimited")
    assert limited["reason"] == "GPUCapacityReached" and words in limited["message"]


def test_queue_wait_and_prefill_reach_the_policy_and_the_status() -> None:
    signals = service_signals(waiting=12, running=16, ttft=1.9).model_copy(
        update={
            "request_rate": 6.0,
            "queue_time_seconds": 1.25,
            "prefill_time_seconds": 0.412345,
            "prefill_p95_seconds": 0.65,
        }
    )

    observed = observation(_view(replicas=2), signals)
    assert (
        observed.request_rate,
        observed.queue_time_seconds,
        observed.prefill_time_seconds,
        observed.prefill_p95_seconds,
    ) == (6.0, 1.25, 0.412345, 0.65)

    plan = plan_service(_view(replicas=2), signals, metrics_error=None, now=NOW, **WINDOW)
    recorded = plan.status["signals"]
    assert recorded["requestRate"] == 6.0
    assert recorded["queueTimeSeconds"] == 1.25
    assert recorded["prefillTimeSeconds"] == 0.412  # three significant digits, like the others
    assert recorded["prefillP95Seconds"] == 0.65
    # The keys are the CRD's: the status model reads every one of them back.
    status = InferenceServiceStatus.model_validate({"signals": recorded})
    assert status.signals is not None
    assert (status.signals.queue_time_seconds, status.signals.prefill_p95_seconds) == (1.25, 0.65)


def test_queue_and_prefill_times_unknown_are_left_out_of_status() -> None:
    plan = plan_service(
        _view(replicas=1), service_signals(waiting=0, running=0, ttft=None), metrics_error=None, now=NOW, **WINDOW
    )

    assert observation(_view(replicas=1), None).queue_time_seconds is None
    assert not {"queueTimeSeconds", "prefillTimeSeconds", "prefillP95Seconds"} & set(plan.status["signals"])


def test_llamacpp_status_says_ttft_is_not_exported_and_its_absence_is_no_problem() -> None:
    isvc = InferenceService(
        metadata=ObjectMeta(name="llama", namespace="serving"),
        spec=parse_spec({"engine": "llamacpp", "gpusPerReplica": 0, "model": {"id": "org/m-GGUF"}}),
    )
    view = ServiceView(isvc=isvc, status={"desiredReplicas": 2}, deployment_replicas=2, pods=ReplicaCounts(ready=2))
    plan = plan_service(view, service_signals(waiting=30, running=16, ttft=None), metrics_error=None, now=NOW, **WINDOW)

    assert observation(view, None).ttft_exported is False
    assert plan.scale_to is not None and plan.scale_to > 2
    assert plan.status["lastDecision"]["reason"] == "QueueGrowing"
    metrics = _conditions(plan.status)["MetricsAvailable"]
    assert (metrics["status"], metrics["reason"]) == ("True", "SignalsFresh")
    assert "llamacpp exports no TTFT" in metrics["message"]
    assert plan.status["signals"]["ttftExported"] is False
    assert (
        "ttftExported"
        not in plan_service(
            _view(), service_signals(waiting=0, running=1, ttft=0.2), metrics_error=None, now=NOW, **WINDOW
        ).status["signals"]
    )
