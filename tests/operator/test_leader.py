"""Leader election: which replica may take the Lease, and an elector against an in-memory Lease store
that behaves like the API server (404 when missing, 409 on a stale resourceVersion)."""

from __future__ import annotations

import copy
from typing import Any

from inferscale import leader
from inferscale.kube import KubeError, NotFound


class Leases:
    """Just enough of the API server for Leases: get, create, replace with optimistic concurrency."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 0

    def _key(self, manifest: dict[str, Any]) -> tuple[str, str]:
        return manifest["metadata"]["namespace"], manifest["metadata"]["name"]

    def _store(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(manifest)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[self._key(manifest)] = stored
        return copy.deepcopy(stored)

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        if (namespace, name) not in self.objects:
            raise NotFound("not found", status=404)
        return copy.deepcopy(self.objects[namespace, name])

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        if self._key(manifest) in self.objects:
            raise KubeError("exists", status=409)
        return self._store(manifest)

    def replace(self, manifest: dict[str, Any]) -> dict[str, Any]:
        current = self.objects[self._key(manifest)]
        if manifest["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise KubeError("conflict", status=409)
        return self._store(manifest)

    def holder(self) -> str | None:
        return self.objects["ops", "inferscale-leader"]["spec"].get("holderIdentity")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _elector(leases: Leases, identity: str, clock: Clock) -> leader.Elector:
    return leader.Elector(leases, "ops", "inferscale-leader", identity=identity, clock=clock)  # type: ignore[arg-type]


def test_who_may_take_a_lease() -> None:
    def view(holder: str | None, unchanged: float) -> leader.LeaseView:
        return leader.LeaseView(holder=holder, duration_seconds=15, unchanged_for_seconds=unchanged)

    assert leader.may_take(view(None, 0), "a")
    assert leader.may_take(view("a", 0), "a")
    assert not leader.may_take(view("b", 14.9), "a")
    assert leader.may_take(view("b", 15), "a")


def test_the_first_replica_leads_and_the_second_stands_by_until_the_lease_expires() -> None:
    leases, clock = Leases(), Clock()
    first, second = _elector(leases, "pod-1", clock), _elector(leases, "pod-2", clock)
    assert first.try_once()
    assert not second.try_once()
    assert second.holder == "pod-1"
    clock.now += 10
    assert first.try_once()  # renewed: the record changed, so the standby's count restarts
    clock.now += 10
    assert not second.try_once()
    clock.now += 15  # pod-1 stopped renewing 15 s ago, as pod-2 has seen it
    assert second.try_once()
    assert leases.holder() == "pod-2"
    assert leases.objects["ops", "inferscale-leader"]["spec"]["leaseTransitions"] == 1
    assert not first.try_once() and first.holder == "pod-2"


def test_release_hands_over_at_once() -> None:
    leases, clock = Leases(), Clock()
    first, second = _elector(leases, "pod-1", clock), _elector(leases, "pod-2", clock)
    assert first.try_once()
    first.release()
    assert leases.holder() is None
    assert second.try_once()
    assert leases.holder() == "pod-2"


def test_a_concurrent_write_loses_without_an_error() -> None:
    leases, clock = Leases(), Clock()
    first, second = _elector(leases, "pod-1", clock), _elector(leases, "pod-2", clock)
    assert first.try_once()
    first.release()
    read = leases.get

    def read_then_lose_the_race(*args: str) -> dict[str, Any]:
        seen = read(*args)
        leases.get = read  # type: ignore[method-assign]
        assert first.try_once()  # pod-1 takes the Lease between pod-2's read and its write
        return seen

    leases.get = read_then_lose_the_race  # type: ignore[method-assign]
    assert not second.try_once()
    assert leases.holder() == "pod-1"


def test_identities_differ_even_on_one_host() -> None:
    assert leader.new_identity() != leader.new_identity()
