"""Engine pods come alive: the pod runner (cluster/engines.sh) gives every Running engine pod a
simengine, Prometheus (cluster/prometheus.sh) scrapes it with the pod's labels, and a proxy per
service stands in for the Service. No operator here: plain Deployments with the labels and args
the operator renders.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.processes import wait_for
from inferscale.prometheus import PrometheusConfig, PrometheusSignals
from inferscale.promql import QueryOptions

from tests.e2e.conftest import KUBECONFIG, KUBECTL, ROOT, STATE, condition, get_json, kubectl

ENGINES_DIR = STATE / "engines"
PROMETHEUS = f"http://127.0.0.1:{os.environ.get('INFERSCALE_PROMETHEUS_PORT', '19090')}"
POD_ENV = "INFERSCALE_POD"  # set by the pod runner in each engine's environment: namespace/pod
VLLM_ARGS = ["--model", "test-model", "--port", "8000", "--max-num-seqs", "4", "--max-model-len", "8192"]


def script(name: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "cluster" / name), command], capture_output=True, text=True, timeout=60, check=False
    )


@contextlib.contextmanager
def started(name: str) -> Iterator[bool]:
    """Start cluster/NAME unless it runs already (yields whether we started it); stop it afterwards
    only if we did, so that a demo's runner or Prometheus is left alone."""
    if script(name, "status").returncode == 0:
        yield False
        return
    result = script(name, "start")
    assert result.returncode == 0, f"cluster/{name} start failed:\n{result.stdout}{result.stderr}"
    try:
        yield True
    finally:
        result = script(name, "stop")
        assert result.returncode == 0, f"cluster/{name} stop failed:\n{result.stdout}{result.stderr}"


def engine_pids(namespace_prefix: str = "") -> dict[str, int]:
    """Live engines started by a pod runner, as {namespace/pod: pid}, found by their environment."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for entry in environ:
            if entry.startswith(f"{POD_ENV}={namespace_prefix}".encode()):
                found[entry.split(b"=", 1)[1].decode()] = int(proc.name)
    return found


@pytest.fixture(scope="module")
def prometheus(cluster: Path) -> Iterator[str]:
    with started("prometheus.sh"):
        yield PROMETHEUS


@pytest.fixture(scope="module")
def runner(cluster: Path) -> Iterator[dict[str, Any]]:
    """The pod runner's runner.json (pid and settings); afterwards, none of its engines is left."""
    with started("engines.sh") as we_started:
        yield json.loads((ENGINES_DIR / "runner.json").read_text())
    if we_started:
        assert not engine_pids(), f"engines outlived the pod runner: {engine_pids()}"


@dataclass
class Endpoint:
    pod: str
    url: str
    pid: int
    ready: bool


def endpoints(namespace: str, name: str, count: int, *, ready: bool = True) -> tuple[str, list[Endpoint]] | None:
    """The proxy URL and the engines of a service (services.json) once it has `count` engines, all
    ready if `ready`."""
    entry = json.loads((ENGINES_DIR / "services.json").read_text()).get(f"{namespace}/{name}")
    if entry is None:
        return None
    found = [Endpoint(e["pod"], e["url"], e["pid"], e["ready"]) for e in entry["endpoints"]]
    if len(found) != count or (ready and not all(e.ready for e in found)):
        return None
    return entry["url"], found


def deploy(namespace: str, name: str, engine: str, args: list[str]) -> None:
    """A Deployment shaped like the operator's (labels, container `engine`, its args), without it."""
    labels = {"inferscale.io/service": name, "app.kubernetes.io/name": engine}
    gpu = {"nvidia.com/gpu": "1"}
    container = {"name": "engine", "image": f"example.invalid/{engine}", "args": args}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"inferscale.io/service": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{**container, "resources": {"limits": gpu, "requests": gpu}}]},
            },
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(deployment))


def promql(query: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{PROMETHEUS}/api/v1/query", params={"query": query}, timeout=10)
    response.raise_for_status()
    return list(response.json()["data"]["result"])


async def hold_streams(url: str, count: int, until: Callable[[], Any], timeout: float) -> Any:
    """Keep `count` long streaming completions open through the proxy until `until()` (polled in a
    thread) returns something truthy, then hang up (the engine aborts them)."""
    # 4 x 4,000 tokens fit the test profile's KV cache: nothing is preempted back into the queue.
    body = {"model": "test-model", "prompt": "hello", "max_tokens": 4000, "stream": True}

    async def stream(client: httpx.AsyncClient) -> None:
        async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
            assert response.status_code == 200, await response.aread()
            async for _ in response.aiter_raw():
                pass

    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=count)) as client:
        tasks = [asyncio.create_task(stream(client)) for _ in range(count)]
        try:
            return await asyncio.to_thread(wait_for, "the load to show in Prometheus", until, timeout=timeout)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.contextmanager
def ready_seen(namespace: str) -> Iterator[list[tuple[str, str | None]]]:
    """Every (pod, Ready status) the API server's watch shows in ``namespace`` while the block runs."""
    seen: list[tuple[str, str | None]] = []
    watch = subprocess.Popen(
        [KUBECTL, f"--kubeconfig={KUBECONFIG}", "-n", namespace, "get", "pods", "--watch", "-o", "json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1)  # the watch is established before anything happens
        yield seen
    finally:
        time.sleep(1)  # the last events reach the watch
        watch.terminate()
        out, _ = watch.communicate(timeout=10)
        decoder, at = json.JSONDecoder(), 0
        while (at := out.find("{", at)) >= 0:  # kubectl writes the objects one after another
            pod, at = decoder.raw_decode(out, at)
            seen.append((pod["metadata"]["name"], condition(pod, "Ready").get("status")))


def ready_pod(namespace: str, name: str) -> dict[str, Any] | None:
    pod = get_json("-n", namespace, "pod", name)
    return pod if condition(pod, "Ready").get("status") == "True" else None


def test_a_running_pod_gets_an_engine_that_prometheus_scrapes_with_the_pods_labels(
    namespace: str, runner: dict[str, Any], prometheus: str
) -> None:
    with ready_seen(namespace) as seen:
        deploy(namespace, "llama", "vllm", VLLM_ARGS)
        proxy, (endpoint,) = wait_for("the engine to be ready", lambda: endpoints(namespace, "llama", 1), timeout=30)
        pod = wait_for("the pod to be Ready", lambda: ready_pod(namespace, endpoint.pod), timeout=10)

    # The pod's own args reach the engine; ours (engine, profile, loopback port) come after and win.
    args = Path(f"/proc/{endpoint.pid}/cmdline").read_bytes().decode().split("\0")
    assert args[args.index("--max-num-seqs") + 1] == "4"
    assert "--engine=vllm" in args and f"--port={endpoint.url.rsplit(':', 1)[1]}" in args
    assert engine_pids(f"{namespace}/") == {f"{namespace}/{endpoint.pod}": endpoint.pid}

    # Readiness is the engine's: the pod turned Ready only once its cold start was over, and was not
    # Ready before (as a kubelet reports a pod before its readiness probe passes), so a Deployment
    # never counted it ready before its engine. kwok and the runner used to say True, False, True.
    if runner["reflect_readiness"]:
        statuses = [status for name, status in seen if name == endpoint.pod and status is not None]
        changes = [status for i, status in enumerate(statuses) if i == 0 or status != statuses[i - 1]]
        assert changes == ["False", "True"], statuses
        ready_at = datetime.fromisoformat(condition(pod, "Ready")["lastTransitionTime"])
        started_at = datetime.fromisoformat(pod["status"]["startTime"])
        assert (ready_at - started_at).total_seconds() >= runner["cold_start_s"] - 1.5
    wait_for(
        "the Deployment to count the pod ready",
        lambda: get_json("-n", namespace, "deployment", "llama")["status"].get("readyReplicas") == 1,
        timeout=10,
    )

    selector = f'namespace="{namespace}",service="llama"'
    (series,) = wait_for(
        "the engine's series in Prometheus", lambda: promql(f"vllm:num_requests_waiting{{{selector}}}"), timeout=20
    )
    assert series["metric"]["pod"] == endpoint.pod
    assert series["metric"]["inference_engine"] == "vllm"
    assert series["metric"]["engine"] == "0"  # vLLM's own label, kept
    assert series["value"][1] == "0"

    # Six requests against --max-num-seqs 4: four run, two wait, and the operator's own queries see it.
    options = QueryOptions(window_seconds=10, max_sample_age_seconds=10)
    with PrometheusSignals(PrometheusConfig(url=prometheus), options=options) as signals:

        def saturated() -> Any:
            got = signals.fetch_all(now=datetime.now(UTC)).get((namespace, "llama"))
            return got if got and (got.queue_depth, got.running_requests) == (2, 4) else None

        asyncio.run(hold_streams(proxy, 6, saturated, timeout=30))


def test_the_service_proxy_streams_tokens_from_a_tgi_engine(namespace: str, runner: dict[str, Any]) -> None:
    args = ["--model-id", "test-model", "--port", "8000", "--max-concurrent-requests", "8"]
    deploy(namespace, "mistral", "tgi", [*args, "--max-input-tokens", "2047", "--max-total-tokens", "2048"])
    proxy, (endpoint,) = wait_for("the engine to be ready", lambda: endpoints(namespace, "mistral", 1), timeout=30)

    tokens, first, started_at = 0, 0.0, time.monotonic()
    body = {"inputs": "hello", "parameters": {"max_new_tokens": 300}}
    with httpx.stream("POST", f"{proxy}/generate_stream", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-inferscale-pod"] == endpoint.pod
        for line in response.iter_lines():
            if line.startswith("data:"):
                tokens += 1
                first = first or time.monotonic() - started_at
    total = time.monotonic() - started_at
    assert tokens == 300
    # Passed through as it comes, not buffered: the first token long before the last.
    assert first < total / 2, (first, total)


def test_scaling_adds_targets_and_a_deleted_pod_takes_its_engine_with_it(
    namespace: str, runner: dict[str, Any], prometheus: str
) -> None:
    deploy(namespace, "llama", "vllm", VLLM_ARGS)
    wait_for("an engine", lambda: endpoints(namespace, "llama", 1, ready=False), timeout=30)
    kubectl("-n", namespace, "scale", "deployment/llama", "--replicas=2")
    proxy, both = wait_for("two ready engines", lambda: endpoints(namespace, "llama", 2), timeout=30)

    up = f'up{{namespace="{namespace}",service="llama"}} == 1'
    targets = wait_for("two targets up in Prometheus", lambda: len(promql(up)) == 2 and promql(up), timeout=20)
    assert {t["metric"]["pod"] for t in targets} == {e.pod for e in both}
    served = {httpx.get(f"{proxy}/v1/models", timeout=10).headers["x-inferscale-pod"] for _ in range(6)}
    assert served == {e.pod for e in both}, "the proxy spreads requests over the ready engines"

    gone, kept = both
    kubectl("-n", namespace, "delete", "pod", gone.pod, "--wait=false")
    wait_for(f"the engine of {gone.pod} (pid {gone.pid}) to exit", lambda: not Path(f"/proc/{gone.pid}").exists())
    assert f"{namespace}/{gone.pod}" not in engine_pids(f"{namespace}/"), "no orphan engine"

    # The ReplicaSet replaces the pod; the replacement gets an engine of its own.
    def replaced() -> list[Endpoint] | None:
        found = endpoints(namespace, "llama", 2, ready=False)
        return found[1] if found and gone.pod not in {e.pod for e in found[1]} else None

    now = wait_for("the replacement's engine", replaced, timeout=30)
    assert kept.pod in {e.pod for e in now}
    assert set(engine_pids(f"{namespace}/").values()) == {e.pid for e in now}
    wait_for("the deleted pod's target to leave Prometheus", lambda: not promql(f'up{{pod="{gone.pod}"}}'), timeout=20)


def test_a_pod_marked_not_ready_by_someone_else_is_set_ready_again(namespace: str, runner: dict[str, Any]) -> None:
    """After an API-server outage longer than the node-monitor grace period, the node-lifecycle
    controller marks every pod of the (kwok) nodes Ready=False, and no kubelet is there to undo it:
    the pod runner does, as a kubelet's status sync would, while the engine's /health says ready."""
    if not runner["reflect_readiness"]:
        pytest.skip("the running pod runner leaves Ready to kwok (--no-reflect-readiness)")
    deploy(namespace, "llama", "vllm", VLLM_ARGS)
    _, (endpoint,) = wait_for("the engine to be ready", lambda: endpoints(namespace, "llama", 1), timeout=30)

    def ready() -> str | None:
        return condition(get_json("-n", namespace, "pod", endpoint.pod), "Ready").get("status")

    wait_for("the pod Ready", lambda: ready() == "True", timeout=10)
    # What MarkPodsNotReady (kube-controller-manager's node-lifecycle controller) writes.
    not_ready = {"type": "Ready", "status": "False", "reason": "NodeNotReady"}
    patch = json.dumps({"status": {"conditions": [not_ready]}})
    kubectl("-n", namespace, "patch", "pod", endpoint.pod, "--subresource=status", "-p", patch)
    started_at = time.monotonic()
    wait_for("the pod Ready again", lambda: ready() == "True", timeout=10, interval=0.2)
    print(f"pod Ready again {time.monotonic() - started_at:.1f}s after it was marked NotReady")
