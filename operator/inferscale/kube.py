"""The thin edge to the Kubernetes API: server-side apply, reads, status writes.

The official client is synchronous; callers in the operator run these methods off the
event loop (`asyncio.to_thread`). Every call has a timeout, so a slow API server
delays one handler, never the whole operator. Errors the caller can act on are
turned into our own types; anything unexpected propagates.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from inferscale.api import GROUP, KIND, PLURAL, VERSION

FIELD_MANAGER = "inferscale-operator"
REQUEST_TIMEOUT_SECONDS = 15

_COLLECTIONS = {
    ("v1", "Service"): "/api/v1/namespaces/{namespace}/services/{name}",
    ("v1", "Pod"): "/api/v1/namespaces/{namespace}/pods/{name}",
    ("apps/v1", "Deployment"): "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
    ("policy/v1", "PodDisruptionBudget"): "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}",
    (f"{GROUP}/{VERSION}", KIND): f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}/{{name}}",
    ("coordination.k8s.io/v1", "Lease"): "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
}


class KubeError(Exception):
    """A Kubernetes API call failed in a way the caller should report or retry."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(KubeError):
    """The object does not exist (HTTP 404)."""


def _path(manifest: Mapping[str, Any], suffix: str = "") -> str:
    key = (manifest["apiVersion"], manifest["kind"])
    if key not in _COLLECTIONS:
        raise ValueError(f"no API path known for {key[1]} {key[0]}")
    meta = manifest["metadata"]
    return _COLLECTIONS[key].format(namespace=meta["namespace"], name=meta["name"]) + suffix


def _describe(manifest: Mapping[str, Any]) -> str:
    meta = manifest["metadata"]
    return f"{manifest['kind']} {meta['namespace']}/{meta['name']}"


@dataclass
class Kube:
    """The operator's one Kubernetes client, built once at start-up."""

    api_client: client.ApiClient

    @classmethod
    def from_environment(cls) -> Kube:
        """In-cluster config when running in a pod, else the kubeconfig (KUBECONFIG)."""
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        return cls(client.ApiClient())

    def _call(
        self,
        path: str,
        method: str,
        *,
        what: str,
        query: list[tuple[str, str]] | None = None,
        content_type: str | None = None,
        body: str | dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(*request, _request_timeout=REQUEST_TIMEOUT_SECONDS)
            response.read()
        except (ApiException, urllib3.exceptions.HTTPError) as error:
            raise KubeError(f"{method} {what} failed: {error}") from error
        text = response.data.decode("utf-8") if response.data else ""
        if not 200 <= response.status < 300:
            cls = NotFound if response.status == 404 else KubeError
            raise cls(f"{method} {what} failed: {response.status}: {_api_message(text)}", status=response.status)
        return dict(json.loads(text)) if text else {}

    def apply(
        self, manifest: Mapping[str, Any], *, subresource: str = "", manager: str = FIELD_MANAGER
    ) -> dict[str, Any]:
        """Server-side apply with our field manager: a repeat with the same content is a no-op."""
        return self._call(
            _path(manifest, f"/{subresource}" if subresource else ""),
            "PATCH",
            what=_describe(manifest) + (f" {subresource}" if subresource else ""),
            query=[("fieldManager", manager), ("force", "true")],
            # JSON is YAML, so the apply body goes as JSON text.
            content_type="application/apply-patch+yaml",
            body=json.dumps(manifest),
        )

    def apply_all(self, manifests: list[dict[str, Any]]) -> None:
        for manifest in manifests:
            self.apply(manifest)

    def apply_status(self, namespace: str, name: str, status: Mapping[str, Any], *, manager: str) -> dict[str, Any]:
        """Apply part of an InferenceService's status. Each writer uses its own manager, so
        writers own distinct fields (and distinct condition types) and never clobber each other."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": name, "namespace": namespace},
            "status": dict(status),
        }
        return self.apply(body, subresource="status", manager=manager)

    def merge_patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        manager: str,
        subresource: str = "",
    ) -> dict[str, Any]:
        """A JSON merge patch (for single fields another manager also sets, e.g. replicas; a null
        value removes a field whoever owns it)."""
        manifest = {"apiVersion": api_version, "kind": kind, "metadata": {"namespace": namespace, "name": name}}
        return self._call(
            _path(manifest, f"/{subresource}" if subresource else ""),
            "PATCH",
            what=_describe(manifest) + (f" {subresource}" if subresource else ""),
            query=[("fieldManager", manager)],
            content_type="application/merge-patch+json",
            body=dict(patch),  # the client serialises JSON bodies itself
        )

    def post_event(self, involved: Mapping[str, Any], *, type: str, reason: str, message: str, now: datetime) -> None:
        """Record a core/v1 Event about `involved` (an object with apiVersion, kind, metadata)."""
        meta = involved["metadata"]
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": involved["apiVersion"],
                "kind": involved["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
            },
            "type": type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": socket.gethostname(),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        path = f"/api/v1/namespaces/{meta['namespace']}/events"
        self._call(path, "POST", what=f"Event for {involved['kind']} {meta['namespace']}/{meta['name']}", body=event)

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        manifest = {"apiVersion": api_version, "kind": kind, "metadata": {"namespace": namespace, "name": name}}
        return self._call(_path(manifest), "GET", what=_describe(manifest))

    def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """POST a new object; raises KubeError with status 409 if it already exists."""
        collection = _path(manifest).rsplit("/", 1)[0]
        return self._call(collection, "POST", what=_describe(manifest), body=dict(manifest))

    def replace(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object; with metadata.resourceVersion set, a concurrent change makes it fail with 409."""
        return self._call(_path(manifest), "PUT", what=_describe(manifest), body=dict(manifest))

    def secret_keys(self, namespace: str, name: str) -> set[str]:
        """The keys a Secret holds (never its values). Raises NotFound if it does not exist."""
        path = f"/api/v1/namespaces/{namespace}/secrets/{name}"
        secret = self._call(path, "GET", what=f"Secret {namespace}/{name}")
        return set((secret.get("data") or {}).keys())


def _api_message(text: str) -> str:
    """The API server's own message out of a Status body, else the raw body."""
    try:
        return str(json.loads(text).get("message") or text)
    except (ValueError, AttributeError):
        return text
