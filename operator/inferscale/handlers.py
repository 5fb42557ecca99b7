"""kopf wiring: the only module that knows kopf.

Create, update and resume share one level-based reconcile: validate, render, apply,
record status. Children carry owner references, so deleting an InferenceService lets
Kubernetes' garbage collector remove them, with no finalizer to block the deletion
while the operator is down. A watch on the children's Deployments keeps the ready
counts and the Ready condition current.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import kopf

from inferscale import render
from inferscale.api import (
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    ConditionStatus,
    InferenceService,
    InvalidSpec,
    ObjectMeta,
    parse_name,
    parse_spec,
)
from inferscale.kube import Kube, KubeError, NotFound
from inferscale.status import READY, RECONCILED, condition_json, readiness, set_condition

# Status writers, one field manager each (see Kube.apply_status).
RECONCILER = "inferscale-reconciler"
READINESS = "inferscale-readiness"
SECRET_RETRY_SECONDS = 30
_RECONCILER_FIELDS = ("observedGeneration", "desiredReplicas", "deploymentName", "endpoint")


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Keep kopf's bookkeeping in annotations under our own prefix: the status schema is
    # strict, and users' status stays ours.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300
    memo.kube = await asyncio.to_thread(Kube.from_environment)


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

    replicas = _replicas_to_render(isvc, status)
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
        desiredReplicas=replicas,
        deploymentName=name,
        endpoint=render.endpoint(isvc),
    )
    logger.info(f"Reconciled {KIND} {namespace}/{name}: {isvc.spec.engine.value} with {replicas} replicas")


def _replicas_to_render(isvc: InferenceService, status: kopf.Status) -> int:
    """Keep the replica count the operator last wanted, within the spec's current bounds."""
    bounds = isvc.spec.replicas
    desired = status.get("desiredReplicas")
    if desired is None:
        desired = bounds.min
    return max(bounds.min, min(bounds.max, int(desired)))


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


@kopf.on.event("apps", "v1", "deployments", labels={"app.kubernetes.io/managed-by": render.MANAGED_BY})
async def deployment_changed(body: kopf.Body, type: str | None, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Mirror an engine Deployment's replica counts and readiness into its owner's status."""
    if type == "DELETED":
        return
    owner = next(
        (
            ref
            for ref in body["metadata"].get("ownerReferences", [])
            if ref.get("kind") == KIND and ref.get("controller")
        ),
        None,
    )
    if owner is None:
        return
    kube: Kube = memo.kube
    namespace = body["metadata"]["namespace"]
    try:
        parent = await asyncio.to_thread(kube.get, f"{GROUP}/{VERSION}", KIND, namespace, owner["name"])
    except NotFound:
        return  # being deleted; the garbage collector takes the Deployment next
    if parent["metadata"]["uid"] != owner["uid"]:
        return
    existing = (parent.get("status") or {}).get("conditions") or []
    counts, ready = readiness(body, now=datetime.now(UTC), existing=existing)
    previous: dict[str, Any] = next((c for c in existing if c.get("type") == READY), {})
    if previous.get("reason") != ready.reason:
        logger.info(f"{KIND} {namespace}/{owner['name']} is now {ready.reason}: {ready.message}")
    counts_and_ready = {**counts, "conditions": [condition_json(ready)]}
    try:
        await asyncio.to_thread(kube.apply_status, namespace, owner["name"], counts_and_ready, manager=READINESS)
    except NotFound:
        return  # deleted meanwhile
    except KubeError as error:
        # Event handlers are not retried; the Deployment's next change (or the next
        # resume) writes the counts again.
        logger.warning(f"Recording readiness of {KIND} {namespace}/{owner['name']} failed: {error}")
