#!/usr/bin/env bash
# The demo: the closed loop on the local cluster. Engines for every engine pod, a real
# Prometheus scraping them, the operator scaling from it, and loadgen sending a step in
# load through the service's endpoint, with a live table of load, replicas and p95 TTFT.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=env.sh
source "$root/cluster/env.sh"
export INFERSCALE_PROMETHEUS_URL="http://127.0.0.1:${INFERSCALE_PROMETHEUS_PORT:-19090}"
reports="${INFERSCALE_DEMO_REPORTS:-$root/reports}"

"$root/cluster/prometheus.sh" start
"$root/cluster/engines.sh" start
"$root/cluster/operator.sh" start
echo
echo "$ kubectl apply -f examples/demo-chat.yaml"
kubectl apply -f "$root/examples/demo-chat.yaml"
echo "waiting for InferenceService chat to be Ready ..."
kubectl wait --for=condition=Ready inferenceservice/chat --timeout=180s >/dev/null
echo
echo "$ kubectl get inferenceservices"
kubectl get inferenceservices
echo
echo "$ kubectl get deployment chat -o jsonpath='{.spec.template.spec.containers[0].args}'"
kubectl get deployment chat -o jsonpath='{.spec.template.spec.containers[0].args}'; echo
url="$("$root/.venv/bin/python" -m harness.podrunner url default/chat)"
# The pod is Ready once its engine answers; the proxy in front of it may come a moment later.
for _ in $(seq 60); do curl -sf "$url/v1/models" >/dev/null && break; sleep 1; done
echo
echo "Sending a step in load to $url (the service's endpoint) ..."
mkdir -p "$reports"
status=0
"$root/.venv/bin/python" -m harness.validate --namespace default --name chat --url "$url" \
  --kubectl "kubectl" --json "$reports/demo.json" --png "$reports/demo.png" || status=$?
echo
echo "$ kubectl get inferenceservices"
kubectl get inferenceservices
echo
echo "$ kubectl get events --field-selector involvedObject.name=chat,reason!=Logging"
kubectl get events --field-selector involvedObject.name=chat --sort-by=.lastTimestamp | grep -v "Logging" | tail -8 || true
echo
echo "Logs:     cluster/operator.sh logs"
echo "Stop:     make down"
exit $status
