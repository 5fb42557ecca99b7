"""kopf wiring: the only module that knows kopf.

Create, update and resume share one level-based reconcile: validate, render, apply,
record status. Children carry owner references, so deleting an InferenceService lets
Kubernetes' garbage collector remove them, with no finalizer to block the deletion
while the operator is down. A watch on the children's Deployments keeps the ready
counts and the Ready condition current.

The children are level-triggered too: a watch on each kind compares every change (and
deletion) with what the spec renders, and a resync loop does the same from the indexes
every INFERSCALE_RESYNC_SECONDS for events a broken watch missed. What drifted is put back
with server-side apply, with a Warning Event naming it (`drift`, pure, decides what counts).

Scaling is one operator-wide loop (started at start-up), not a timer per object: every
tick it runs one fixed set of PromQL queries for all InferenceServices, reads the
Deployments and pods from in-memory indexes, asks the pure policy for each service
(`autoscaler.plan_service`) and applies the plans.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kopf

from inferscale import render, telemetry
from inferscale.api import (
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    ConditionStatus,
    InferenceService,
    InvalidSpec,
    ObjectMeta,
    ScalingMode,
    parse_name,
    parse_spec,
)
from inferscale.autoscaler import Event, Plan, ServiceView, plan_service
from inferscale.config import OperatorConfig
from inferscale.drift import Drift, drift
from inferscale.kube import Kube, KubeError, NotFound
from inferscale.prometheus import MetricsError, PrometheusSignals
from inferscale.promql import ServiceKey, ServiceSignals
from inferscale.replicas import assess, tally
from inferscale.status import (
    READY,
    RECONCILED,
    REFUSALS,
    condition_json,
    missing_deployment,
    readiness,
    set_condition,
)

# Status writers, one field manager each (see Kube.apply_status).
RECONCILER = "inferscale-reconciler"
READINESS = "inferscale-readiness"
AUTOSCALER = "inferscale-autoscaler"
# Pods with the lowest cost are deleted first when a ReplicaSet scales down.
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# API calls of one tick in flight at once.
TICK_CONCURRENCY = 16
SECRET_RETRY_SECONDS = 30
DRIFT_REPAIRED = "DriftRepaired"
_MANAGED = {"app.kubernetes.io/managed-by": render.MANAGED_BY}
_RECONCILER_FIELDS = ("observedGeneration", "desiredReplicas", "deploymentName", "endpoint")


@kopf.on.startup()
async def configure(
    *,
    settings: kopf.OperatorSettings,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **indexes: Any,
) -> None:
    # Keep kopf's bookkeeping in annotations under our own prefix: the status schema is
    # strict, and users' status stays ours.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300
    # A failed API call is reported by the operator, once a tick for all services; urllib3 would also
    # log each of its retries of each call (three lines per service per tick while the API server is down).
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    memo.kube = await asyncio.to_thread(Kube.from_environment)
    config: OperatorConfig = memo.get("config") or OperatorConfig()
    memo.config = config
    # One lock per service: the watch and the resync must not repair the same child twice.
    memo.repair_locks = {}
    children = Children(
        isvcs=indexes["inferenceservices"],
        by_kind={
            "Deployment": indexes["child_deployments"],
            "Service": indexes["child_services"],
            "PodDisruptionBudget": indexes["child_pdbs"],
        },
    )
    memo.resync_loop = asyncio.create_task(_resync_loop(memo.kube, memo.repair_locks, children, config, logger))
    prometheus = config.prometheus()
    if prometheus is None:
        logger.warning("No Prometheus configured (INFERSCALE_PROMETHEUS_URL): reconciling only, not scaling")
        return
    signals = PrometheusSignals(prometheus, options=config.query_options())
    memo.scaling_loop = asyncio.create_task(
        _scaling_loop(
            memo.kube,
            signals,
            config,
            # kopf passes the live indexes below by their function names.
            Indexes(
                isvcs=indexes["inferenceservices"],
                deployments=indexes["engine_deployments"],
                pods=indexes["engine_pods"],
            ),
            logger,
        )
    )
    logger.info(f"Scaling every {config.tick_seconds:g}s from Prometheus at {prometheus.url}")


@kopf.on.cleanup()
async def stop_scaling(memo: kopf.Memo, **_: Any) -> None:
    tasks = [task for task in (memo.get("scaling_loop"), memo.get("resync_loop")) if task is not None]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# --- in-memory indexes the scaling tick reads (kept current by kopf's watches) ---------


@kopf.index(GROUP, VERSION, PLURAL)
def inferenceservices(
    *, namespace: str | None, name: str, body: kopf.Body, **_: Any
) -> dict[ServiceKey, dict[str, Any]]:
    return {
        (namespace or "", name): {
            "metadata": dict(body["metadata"]),
            "spec": dict(body["spec"]),
            "status": dict(body.get("status") or {}),
        }
    }


@kopf.index("apps", "v1", "deployments", labels=_MANAGED)
def engine_deployments(*, namespace: str | None, name: str, spec: kopf.Spec, **_: Any) -> dict[ServiceKey, int]:
    return {(namespace or "", name): int(spec.get("replicas") or 0)}


@kopf.index("", "v1", "pods", labels={render.SERVICE_LABEL: kopf.PRESENT})
def engine_pods(
    *, namespace: str | None, name: str, labels: kopf.Labels, body: kopf.Body, **_: Any
) -> dict[ServiceKey, tuple[str, str, str | None]]:
    return {(namespace or "", labels[render.SERVICE_LABEL]): (name, *assess(body))}


def _child(body: kopf.Body) -> dict[ServiceKey, dict[str, Any]]:
    """A child by its owner's key, as drift compares it (no status, no managedFields)."""
    owner = _owner(body)
    if owner is None:
        return {}
    meta = {key: value for key, value in body["metadata"].items() if key != "managedFields"}
    return {(meta.get("namespace") or "", owner["name"]): {**dict(body), "metadata": meta, "status": {}}}


@kopf.index("apps", "v1", "deployments", labels=_MANAGED)
def child_deployments(body: kopf.Body, **_: Any) -> dict[ServiceKey, dict[str, Any]]:
    return _child(body)


@kopf.index("", "v1", "services", labels=_MANAGED)
def child_services(body: kopf.Body, **_: Any) -> dict[ServiceKey, dict[str, Any]]:
    return _child(body)


@kopf.index("policy", "v1", "poddisruptionbudgets", labels=_MANAGED)
def child_pdbs(body: kopf.Body, **_: Any) -> dict[ServiceKey, dict[str, Any]]:
    return _child(body)


@dataclass(frozen=True)
class Children:
    """The InferenceServices and their children by kind, as the resync reads them."""

    isvcs: kopf.Index[ServiceKey, dict[str, Any]]
    by_kind: dict[str, kopf.Index[ServiceKey, dict[str, Any]]]


@dataclass(frozen=True)
class Indexes:
    """The three indexes above, as the tick reads them: kopf keeps their contents current."""

    isvcs: kopf.Index[ServiceKey, dict[str, Any]]  # inferenceservices: the objects
    deployments: kopf.Index[ServiceKey, int]  # engine_deployments: spec.replicas
    pods: kopf.Index[ServiceKey, tuple[str, str, str | None]]  # engine_pods: (name, *replicas.assess)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def reconcile(
    body: kopf.Body,
    spec: kopf.Spec,
    meta: kopf.Meta,
    status: kopf.Status,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **_: Any,
) -> None:
    kube: Kube = memo.kube
    namespace, name, generation = meta["namespace"], meta["name"], meta.get("generation")
    conditions = list(status.get("conditions") or [])
    now = datetime.now(UTC)
    # On failure keep what the last good reconcile recorded: dropping desiredReplicas
    # would reset the replica count once the spec is fixed.
    kept = {key: status[key] for key in _RECONCILER_FIELDS if key in status}

    async def record(state: ConditionStatus, reason: str, message: str, **fields: Any) -> None:
        condition = set_condition(
            conditions, type=RECONCILED, status=state, reason=reason, message=message, now=now, generation=generation
        )
        body_status = {**kept, **fields, "conditions": [condition_json(condition)]}
        try:
            await asyncio.to_thread(kube.apply_status, namespace, name, body_status, manager=RECONCILER)
        except KubeError as error:
            raise kopf.TemporaryError(
                f"Recording status of {KIND} {namespace}/{name} failed: {error}", delay=10
            ) from error

    try:
        parse_name(name)
        isvc = InferenceService(metadata=ObjectMeta.model_validate(meta), spec=parse_spec(dict(spec)))
    except InvalidSpec as error:
        await record(ConditionStatus.FALSE, "InvalidSpec", str(error))
        kopf.warn(body, reason="InvalidSpec", message=str(error))
        raise kopf.PermanentError(f"{KIND} {namespace}/{name} is invalid: {error}") from error

    problem = await asyncio.to_thread(_missing_secret, kube, isvc)
    if problem:
        await record(ConditionStatus.FALSE, "SecretNotFound", problem)
        kopf.warn(body, reason="SecretNotFound", message=problem)
        raise kopf.TemporaryError(problem, delay=SECRET_RETRY_SECONDS)

    try:
        deployed = await asyncio.to_thread(_deployment_replicas, kube, namespace, name)
    except KubeError as error:
        raise kopf.TemporaryError(f"Reading Deployment {namespace}/{name} failed: {error}", delay=10) from error
    replicas = replicas_to_render(isvc, status, deployed)
    try:
        await asyncio.to_thread(kube.apply_all, render.for_service(isvc, replicas=replicas))
    except KubeError as error:
        raise kopf.TemporaryError(
            f"Applying children of {KIND} {namespace}/{name} failed: {error}", delay=10
        ) from error

    await record(
        ConditionStatus.TRUE,
        "Applied",
        f"Deployment, Service and PodDisruptionBudget {namespace}/{name} are applied ({isvc.spec.engine.value}).",
        observedGeneration=generation,
        desiredReplicas=desired_to_record(status, deployed, replicas),
        deploymentName=name,
        endpoint=render.endpoint(isvc),
    )
    logger.info(f"Reconciled {KIND} {namespace}/{name}: {isvc.spec.engine.value} with {replicas} replicas")


def _deployment_replicas(kube: Kube, namespace: str, name: str) -> int | None:
    try:
        deployment = kube.get("apps/v1", "Deployment", namespace, name)
    except NotFound:
        return None
    return int(deployment.get("spec", {}).get("replicas") or 0)


def replicas_to_render(isvc: InferenceService, status: Mapping[str, Any], deployed: int | None) -> int:
    """The replicas reconcile applies. An existing Deployment keeps its count, so a spec edit that
    does not touch the replicas never moves them: in Auto mode the count is the autoscaler's (an
    outside `kubectl scale` stays too, for the tick to report, not for reconcile to undo), held
    within the spec's current bounds; in Manual mode it is the user's, whatever it is. A missing
    Deployment starts where the operator last wanted it (status.desiredReplicas), within bounds."""
    if deployed is not None and isvc.spec.scaling.mode is ScalingMode.MANUAL:
        return deployed
    bounds = isvc.spec.replicas
    start = deployed if deployed is not None else status.get("desiredReplicas")
    if start is None:
        start = bounds.min
    return max(bounds.min, min(bounds.max, int(start)))


def desired_to_record(status: Mapping[str, Any], deployed: int | None, replicas: int) -> int:
    """status.desiredReplicas after reconcile: changed only when reconcile itself set the count
    (created the Deployment, or moved it into new bounds). Recording a count someone else set
    would hide their change from the tick, which reports it (ReplicasOverridden)."""
    last = status.get("desiredReplicas")
    if deployed is None or replicas != deployed or last is None:
        return replicas
    return int(last)


def _missing_secret(kube: Kube, isvc: InferenceService) -> str | None:
    """A message naming the field and the fix when the token Secret cannot be used."""
    ref = isvc.spec.model.token_secret_ref
    if ref is None:
        return None
    namespace = isvc.metadata.namespace
    create = (
        f"kubectl -n {namespace} create secret generic {ref.name} --from-literal={ref.key}=<your Hugging Face token>"
    )
    try:
        keys = kube.secret_keys(namespace, ref.name)
    except NotFound:
        return (
            f"spec.model.tokenSecretRef.name: Secret {namespace}/{ref.name} does not exist; "
            f"create it ({create}) or fix the name"
        )
    if ref.key not in keys:
        return (
            f"spec.model.tokenSecretRef.key: Secret {namespace}/{ref.name} has no key {ref.key!r} "
            f"(it has {sorted(keys)}); set the key or add it to the Secret"
        )
    return None


def _owner(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controlling InferenceService's owner reference, if any."""
    refs = body["metadata"].get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("kind") == KIND and ref.get("controller")), None)


@kopf.on.event("apps", "v1", "deployments", labels=_MANAGED)
async def deployment_changed(body: kopf.Body, type: str | None, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Mirror an engine Deployment's replica counts and readiness into its owner's status."""
    owner = _owner(body)
    if owner is None:
        return
    kube: Kube = memo.kube
    namespace = body["metadata"]["namespace"]
    try:
        parent = await asyncio.to_thread(kube.get, f"{GROUP}/{VERSION}", KIND, namespace, owner["name"])
    except NotFound:
        return  # being deleted; the garbage collector takes the Deployment next
    except KubeError as error:
        _event_call_failed(logger, f"Recording readiness of {KIND} {namespace}/{owner['name']}", error)
        return
    if parent["metadata"]["uid"] != owner["uid"]:
        return
    if parent["metadata"].get("deletionTimestamp"):
        return
    existing = (parent.get("status") or {}).get("conditions") or []
    if type == "DELETED":
        # Until it is recreated nothing runs: do not leave the last ready count standing.
        name = body["metadata"]["name"]
        counts, ready = missing_deployment(namespace, name, now=datetime.now(UTC), existing=existing)
    else:
        counts, ready = readiness(body, now=datetime.now(UTC), existing=existing)
    previous: dict[str, Any] = next((c for c in existing if c.get("type") == READY), {})
    became = previous.get("reason") != ready.reason
    if became:
        logger.info(f"{KIND} {namespace}/{owner['name']} is now {ready.reason}: {ready.message}")
    counts_and_ready = {**counts, "conditions": [condition_json(ready)]}
    try:
        await asyncio.to_thread(kube.apply_status, namespace, owner["name"], counts_and_ready, manager=READINESS)
    except NotFound:
        return  # deleted meanwhile
    except KubeError as error:
        _event_call_failed(logger, f"Recording readiness of {KIND} {namespace}/{owner['name']}", error)
        return
    if became and ready.reason in REFUSALS:
        await _post_events(kube, parent["metadata"], [Event("Warning", ready.reason, ready.message)], logger)


def _event_call_failed(logger: kopf.Logger, what: str, error: KubeError) -> None:
    """Log an event handler's failed API call: ``what`` is what failed ("Recording readiness of ...").

    Event handlers are not retried: the object's next event does it again, and a watch that reconnects
    after an outage lists every object anew. An API server that did not answer (no status) is already
    said once, by kopf's watch retries and the tick's summary: a line per service would repeat it (an
    event in flight when the API server went away ends here). An answered refusal is a warning.
    """
    if error.status is None:
        logger.debug(f"{what} failed, the API server did not answer: {error}")
    else:
        logger.warning(f"{what} failed: {error}")


# --- level-triggered children: put back what drifted ------------------------------------


@kopf.on.event("apps", "v1", "deployments", labels=_MANAGED)
@kopf.on.event("", "v1", "services", labels=_MANAGED)
@kopf.on.event("policy", "v1", "poddisruptionbudgets", labels=_MANAGED)
async def child_changed(
    body: kopf.Body,
    type: str | None,
    memo: kopf.Memo,
    logger: kopf.Logger,
    **kwargs: Any,
) -> None:
    """Compare a changed or deleted child with what its InferenceService renders; repair drift."""
    owner = _owner(body)
    if owner is None:
        return
    isvcs: kopf.Index[ServiceKey, dict[str, Any]] = kwargs["inferenceservices"]  # kopf passes indexes by name
    parent = next(iter(isvcs.get((body["metadata"].get("namespace") or "", owner["name"]), [])), None)
    if parent is None:
        return
    isvc = _repairable(parent)
    if isvc is None or isvc.metadata.uid != owner["uid"]:
        return
    actual = None if type == "DELETED" else dict(body)
    if _drifted(isvc, body["kind"], actual):
        await _repair(memo.kube, memo.repair_locks, isvc, parent, body["kind"], logger)


def _repairable(parent: Mapping[str, Any]) -> InferenceService | None:
    """The parsed InferenceService if its children should match its spec now: valid, not being
    deleted, and reconciled at its current generation (before that, reconcile applies them)."""
    meta, status = parent["metadata"], parent.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("observedGeneration") != meta.get("generation"):
        return None
    reconciled: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == RECONCILED), {})
    if reconciled.get("status") != ConditionStatus.TRUE.value:
        return None
    try:
        return InferenceService(metadata=ObjectMeta.model_validate(meta), spec=parse_spec(parent["spec"]))
    except InvalidSpec:
        return None


def _drifted(isvc: InferenceService, kind: str, actual: Mapping[str, Any] | None) -> bool:
    # The replicas rendered here are never compared (drift.IGNORED).
    return drift(render.child(isvc, kind, replicas=0), actual) is not None


async def _repair(
    kube: Kube,
    locks: dict[ServiceKey, asyncio.Lock],
    isvc: InferenceService,
    parent: Mapping[str, Any],
    kind: str,
    logger: kopf.Logger,
) -> Drift | None:
    """Read the child afresh and, if it still strays from its rendering, apply the rendering.

    The watch or the index that noticed may lag: only the fresh read decides, under the
    service's lock, so a repair is made (and reported) once.
    """
    namespace, name = isvc.metadata.namespace, isvc.metadata.name
    async with locks.setdefault((namespace, name), asyncio.Lock()):
        desired = render.child(isvc, kind, replicas=0)
        try:
            actual: dict[str, Any] | None = await asyncio.to_thread(
                kube.get, desired["apiVersion"], kind, namespace, name
            )
        except NotFound:
            actual = None
        except KubeError as error:
            _event_call_failed(logger, f"Reading {kind} {namespace}/{name} (the next resync retries)", error)
            return None
        found = drift(desired, actual)
        if found is None:
            return None
        if found.missing and not await _owner_alive(kube, isvc):
            return None  # the garbage collector is removing the children of a deleted service
        if kind == "Deployment":
            # An existing Deployment keeps its count (the autoscaler's or the user's); a recreated
            # one starts where the operator last wanted it.
            replicas = (actual or {}).get("spec", {}).get("replicas")
            if replicas is None:
                replicas = replicas_to_render(isvc, parent.get("status") or {}, None)
            desired["spec"]["replicas"] = int(replicas)
        try:
            await asyncio.to_thread(kube.apply, desired)
        except KubeError as error:
            if error.status == 403 and "being terminated" in str(error):
                return None  # the namespace is going away with everything in it
            _event_call_failed(logger, f"Repairing {kind} {namespace}/{name} (the next resync retries)", error)
            return None
    logger.warning(f"Repaired {found.message}")
    await _post_events(kube, parent["metadata"], [Event("Warning", DRIFT_REPAIRED, found.message)], logger)
    return found


async def _owner_alive(kube: Kube, isvc: InferenceService) -> bool:
    """Whether the InferenceService still exists (the same one) and is not being deleted."""
    namespace, name = isvc.metadata.namespace, isvc.metadata.name
    try:
        current = await asyncio.to_thread(kube.get, f"{GROUP}/{VERSION}", KIND, namespace, name)
    except KubeError:
        return False  # gone, or unknown: the next event or resync decides again
    meta = current["metadata"]
    return bool(meta.get("uid") == isvc.metadata.uid and not meta.get("deletionTimestamp"))


async def _resync_loop(
    kube: Kube,
    locks: dict[ServiceKey, asyncio.Lock],
    children: Children,
    config: OperatorConfig,
    logger: kopf.Logger,
) -> None:
    """Every resync period, compare every child in the indexes with its rendering."""
    while True:
        await asyncio.sleep(config.resync_seconds)
        try:
            for key, store in list(children.isvcs.items()):
                for parent in list(store):
                    isvc = _repairable(parent)
                    if isvc is None:
                        continue
                    for kind in render.KINDS:
                        actual = next(iter(children.by_kind[kind].get(key, [])), None)
                        if _drifted(isvc, kind, actual):
                            await _repair(kube, locks, isvc, parent, kind, logger)
        except Exception:
            # A bug in one pass must not end the resync for good; the traceback is logged.
            logger.exception("Resync of the children failed")


# --- the scaling tick ------------------------------------------------------------------


async def _scaling_loop(
    kube: Kube,
    signals: PrometheusSignals,
    config: OperatorConfig,
    indexes: Indexes,
    logger: kopf.Logger,
) -> None:
    try:
        while True:
            started = time.monotonic()
            try:
                await run_tick(kube, signals, config, indexes, logger)
            except Exception:
                # A bug in one tick must not end scaling for good; the traceback is logged.
                logger.exception("Scaling tick failed")
            elapsed = time.monotonic() - started
            telemetry.TICK_SECONDS.observe(elapsed)
            await asyncio.sleep(max(0.0, config.tick_seconds - elapsed))
    finally:
        signals.close()


def service_views(indexes: Indexes) -> Iterable[tuple[dict[str, Any], ServiceView]]:
    """Every service the tick can act on: valid, reconciled, with a Deployment, not being deleted."""
    isvcs, deployments, pods = indexes.isvcs, indexes.deployments, indexes.pods
    for key, store in list(isvcs.items()):
        for body in store:
            meta = body["metadata"]
            if meta.get("deletionTimestamp") or key not in deployments:
                continue
            try:
                isvc = InferenceService(metadata=ObjectMeta.model_validate(meta), spec=parse_spec(body["spec"]))
            except InvalidSpec:
                continue  # reconcile reports it; nothing to scale
            counts = tally((kind, says) for _, kind, says in pods.get(key, []))
            replicas = next(iter(deployments[key]))
            yield body, ServiceView(isvc=isvc, status=body["status"], deployment_replicas=replicas, pods=counts)


@dataclass(frozen=True)
class TickPlans:
    """What one tick decided for every service, before any write."""

    now: datetime
    plans: list[tuple[dict[str, Any], ServiceView, Plan]]
    pod_load: dict[ServiceKey, dict[str, float]]


async def plan_tick(
    signals: PrometheusSignals,
    config: OperatorConfig,
    indexes: Indexes,
    logger: kopf.Logger,
) -> TickPlans | None:
    """The reading and deciding half of a tick, for every service at once; None if there is none.

    Prometheus answers while the views are built, and the per-pod load (asked only when some
    service scales down) while the other services are planned: both are submitted to a thread
    at once, not at the event loop's next turn, since building and planning do not yield.
    """
    now = datetime.now(UTC)
    if not any(key in indexes.deployments for key in indexes.isvcs):
        return None  # nothing the tick could act on: do not query
    loop = asyncio.get_running_loop()
    fetching = loop.run_in_executor(None, functools.partial(signals.fetch_all, now=now))
    try:
        views = list(service_views(indexes))
    finally:
        found, failure = await _answer(fetching)
    if not views:
        return None
    metrics_error: str | None = None
    if failure is not None:
        metrics_error = str(failure)
        telemetry.QUERY_ERRORS.labels(type(failure).__name__).inc()
        logger.warning(f"Holding replicas of every InferenceService: {failure}")

    plans = []
    loading: asyncio.Future[dict[ServiceKey, dict[str, float]]] | None = None
    for body, view in views:
        plan = plan_service(
            view,
            found.get((view.isvc.metadata.namespace, view.isvc.metadata.name)),
            metrics_error=metrics_error,
            now=now,
            stale_after=config.stale_after,
            ttft_window=config.ttft_window,
        )
        plans.append((body, view, plan))
        if loading is None and plan.scale_to is not None and plan.scale_to < plan.current_replicas:
            loading = loop.run_in_executor(None, functools.partial(signals.pod_load, now=now))
    pod_load: dict[ServiceKey, dict[str, float]] = {}
    if loading is not None:
        try:
            pod_load = await loading
        except MetricsError as error:
            logger.warning(f"Scaling down without per-pod load (pods leave in the ReplicaSet's order): {error}")
    return TickPlans(now=now, plans=plans, pod_load=pod_load)


async def _answer(
    fetching: asyncio.Future[dict[ServiceKey, ServiceSignals]],
) -> tuple[dict[ServiceKey, ServiceSignals], MetricsError | None]:
    try:
        return await fetching, None
    except MetricsError as error:
        return {}, error


async def run_tick(
    kube: Kube,
    signals: PrometheusSignals,
    config: OperatorConfig,
    indexes: Indexes,
    logger: kopf.Logger,
) -> None:
    planned = await plan_tick(signals, config, indexes, logger)
    if planned is None:
        return
    now, pod_load = planned.now, planned.pod_load
    gate = asyncio.Semaphore(TICK_CONCURRENCY)

    async def act(body: dict[str, Any], view: ServiceView, plan: Plan) -> str | None:
        async with gate:
            return await _act(kube, body, view, plan, pod_load, indexes.pods, logger, now)

    failed = [
        failure
        for failure in await asyncio.gather(*(act(body, view, plan) for body, view, plan in planned.plans))
        if failure is not None
    ]
    if failed:
        # One line a tick, however many services: an API server outage fails them all alike.
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        logger.warning(
            f"Scaling failed for {len(failed)} of {len(planned.plans)} InferenceServices, "
            f"the next tick retries: {failed[0]}{more}"
        )


async def _act(
    kube: Kube,
    body: dict[str, Any],
    view: ServiceView,
    plan: Plan,
    pod_load: dict[ServiceKey, dict[str, float]],
    pods: kopf.Index[ServiceKey, tuple[str, str, str | None]],
    logger: kopf.Logger,
    now: datetime,
) -> str | None:
    """Carry out one service's plan; what failed (for the tick's one line), or None."""
    namespace, name = view.isvc.metadata.namespace, view.isvc.metadata.name
    key = (namespace, name)
    decision = plan.decision
    telemetry.DECISIONS.labels(namespace, name, decision.reason.value).inc()
    telemetry.DESIRED_REPLICAS.labels(namespace, name).set(decision.replicas)
    try:
        if plan.scale_to is not None:
            if plan.scale_to < plan.current_replicas and key in pod_load:
                await _set_deletion_costs(kube, namespace, pod_load[key], pods.get(key, []))
            await asyncio.to_thread(
                kube.merge_patch,
                "apps/v1",
                "Deployment",
                namespace,
                name,
                {"spec": {"replicas": plan.scale_to}},
                manager=AUTOSCALER,
            )
            direction = "up" if plan.scale_to > plan.current_replicas else "down"
            telemetry.SCALE_EVENTS.labels(namespace, name, direction).inc()
            change = f"from {plan.current_replicas} to {plan.scale_to}"
            logger.info(f"Scaled Deployment {namespace}/{name} {change}: {decision.message}")
        if _changed(view.status, plan.status):
            await asyncio.to_thread(kube.apply_status, namespace, name, plan.status, manager=AUTOSCALER)
        if plan.clear:
            # Nulls: what the autoscaler no longer holds goes, whoever else also wrote it.
            nulls = {"status": plan.clear}
            await asyncio.to_thread(
                kube.merge_patch, f"{GROUP}/{VERSION}", KIND, namespace, name, nulls, manager=AUTOSCALER,
                subresource="status",
            )  # fmt: skip
    except NotFound:
        return None  # deleted during the tick
    except KubeError as error:
        logger.debug(f"Scaling {KIND} {namespace}/{name} failed: {error}")
        return f"{KIND} {namespace}/{name}: {error}"
    await _post_events(kube, body["metadata"], plan.events, logger, now=now)
    for event in plan.events:
        if event.type == "Warning":
            logger.warning(f"{KIND} {namespace}/{name}: {event.message}")
    return None


async def _post_events(
    kube: Kube, meta: Mapping[str, Any], events: Iterable[Event], logger: kopf.Logger, *, now: datetime | None = None
) -> None:
    """Post Events about an InferenceService. kopf's own poster only works inside its handlers;
    the loops post directly."""
    target = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": dict(meta)}
    for event in events:
        try:
            await asyncio.to_thread(
                kube.post_event,
                target,
                type=event.type,
                reason=event.reason,
                message=event.message,
                now=now or datetime.now(UTC),
            )
        except KubeError as error:
            logger.warning(
                f"Recording event {event.reason} for {KIND} {meta['namespace']}/{meta['name']} failed: {error}"
            )


def _changed(status: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether applying `new` would change anything the autoscaler owns."""
    current_conditions = {c.get("type"): c for c in status.get("conditions") or []}
    for key, value in new.items():
        if key == "conditions":
            if any(current_conditions.get(c["type"]) != c for c in value):
                return True
        elif status.get(key) != value:
            return True
    return False


async def _set_deletion_costs(
    kube: Kube, namespace: str, load: dict[str, float], pods: Iterable[tuple[str, str, str | None]]
) -> None:
    """Mark the pods with the fewest requests in flight to go first, so the drain is short."""
    for pod, kind, _ in pods:
        if kind != "ready" or pod not in load:
            continue
        cost = str(round(load[pod]))
        patch = {"metadata": {"annotations": {DELETION_COST: cost}}}
        try:
            await asyncio.to_thread(kube.merge_patch, "v1", "Pod", namespace, pod, patch, manager=AUTOSCALER)
        except NotFound:
            continue
