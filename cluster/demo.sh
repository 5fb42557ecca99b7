#!/usr/bin/env bash
# The demo: local cluster (already up), the operator, and an example InferenceService,
# shown the way a user sees it with kubectl.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=env.sh
source "$root/cluster/env.sh"

"$root/cluster/operator.sh" start
echo
echo "$ kubectl apply -f examples/llama-vllm.yaml"
kubectl apply -f "$root/examples/llama-vllm.yaml"
echo "waiting for InferenceService llama to be Ready ..."
kubectl wait --for=condition=Ready inferenceservice/llama --timeout=180s >/dev/null
echo
echo "$ kubectl get inferenceservices"
kubectl get inferenceservices
echo
echo "$ kubectl get deployments,services,pods -l inferscale.io/service=llama -o wide"
kubectl get deployments,services,pods -l inferscale.io/service=llama -o wide
echo
echo "$ kubectl get deployment llama -o jsonpath='{.spec.template.spec.containers[0].args}'"
kubectl get deployment llama -o jsonpath='{.spec.template.spec.containers[0].args}'; echo
echo
echo "Try it:   source cluster/env.sh; kubectl edit infsvc llama   (e.g. spec.replicas.min: 2)"
echo "Logs:     cluster/operator.sh logs"
echo "Stop:     make down"
