"""Conditions follow the Kubernetes conventions; readiness is read off the Deployment."""

from datetime import UTC, datetime, timedelta

from inferscale.api import ConditionStatus
from inferscale.status import condition_json, missing_deployment, readiness, set_condition

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def _deployment(*, wanted: int, ready: int, updated: int | None = None, generation: int = 1) -> dict:
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": wanted},
        "status": {
            "observedGeneration": 1,
            "replicas": wanted,
            "readyReplicas": ready,
            "updatedReplicas": wanted if updated is None else updated,
        },
    }


def test_transition_time_moves_only_when_status_flips() -> None:
    first = condition_json(
        set_condition([], type="Ready", status=ConditionStatus.FALSE, reason="A", message="a", now=T0)
    )
    same = set_condition([first], type="Ready", status=ConditionStatus.FALSE, reason="B", message="b", now=T1)
    flipped = set_condition([first], type="Ready", status=ConditionStatus.TRUE, reason="C", message="c", now=T1)
    assert same.last_transition_time == T0
    assert same.reason == "B"
    assert flipped.last_transition_time == T1


def test_ready_when_all_replicas_ready() -> None:
    counts, condition = readiness(_deployment(wanted=2, ready=2), now=T0, existing=[])
    assert counts == {"replicas": 2, "readyReplicas": 2}
    assert (condition.status, condition.reason, condition.message) == (
        ConditionStatus.TRUE,
        "ReplicasReady",
        "2/2 replicas ready.",
    )


def test_not_ready_while_replicas_start() -> None:
    _, condition = readiness(_deployment(wanted=3, ready=1), now=T0, existing=[])
    assert condition.status is ConditionStatus.FALSE
    assert condition.reason == "ReplicasStarting"
    assert "1/3" in condition.message


def test_rolling_out_until_the_deployment_controller_catches_up() -> None:
    _, stale = readiness(_deployment(wanted=2, ready=2, generation=2), now=T0, existing=[])
    _, updating = readiness(_deployment(wanted=2, ready=2, updated=1), now=T0, existing=[])
    assert stale.reason == updating.reason == "RollingOut"


def test_scaled_to_zero_is_not_ready() -> None:
    _, condition = readiness(_deployment(wanted=0, ready=0), now=T0, existing=[])
    assert (condition.status, condition.reason) == (ConditionStatus.FALSE, "ScaledToZero")


def test_a_deleted_deployment_reports_nothing_ready_whatever_was_ready_before() -> None:
    _, was = readiness(_deployment(wanted=1, ready=1), now=T0, existing=[])
    counts, condition = missing_deployment("serving", "llama", now=T1, existing=[condition_json(was)])
    assert counts == {"replicas": 0, "readyReplicas": 0}
    assert (condition.status, condition.reason) == (ConditionStatus.FALSE, "DeploymentMissing")
    assert condition.message == "Deployment serving/llama does not exist; the operator recreates it."
    assert condition.last_transition_time == T1


def _refused(condition: dict) -> dict:
    deployment = _deployment(wanted=2, ready=0)
    deployment["status"]["conditions"] = [
        {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "no"},
        condition,
    ]
    return deployment


def test_pods_kubernetes_refused_are_said_in_its_own_words() -> None:
    forbidden = (
        'pods "chat-5d9f-abcde" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "engine" must set securityContext.allowPrivilegeEscalation=false)'
    )
    failure = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": forbidden}
    counts, condition = readiness(_refused(failure), now=T0, existing=[])
    assert counts == {"replicas": 2, "readyReplicas": 0}
    assert (condition.status, condition.reason) == (ConditionStatus.FALSE, "ReplicaFailure")
    assert condition.message == f"0/2 replicas ready; Kubernetes refused the pods (FailedCreate): {forbidden}"


def test_a_rollout_past_its_deadline_is_said() -> None:
    stuck = {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": 'ReplicaSet "chat-5d9f" has timed out progressing.',
    }
    _, condition = readiness(_refused(stuck), now=T0, existing=[])
    assert condition.reason == "ProgressDeadlineExceeded"
    timed_out = 'the rollout stopped progressing: ReplicaSet "chat-5d9f" has timed out progressing.'
    assert condition.message == f"0/2 replicas ready; {timed_out}"


def test_a_refusal_that_no_longer_keeps_replicas_away_is_not_reported() -> None:
    # Kubernetes clears ReplicaFailure only at the ReplicaSet's next sync: ready replicas are what count.
    failure = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota"}
    deployment = _refused(failure)
    deployment["status"]["readyReplicas"] = 2
    _, condition = readiness(deployment, now=T0, existing=[])
    assert condition.reason == "ReplicasReady"
