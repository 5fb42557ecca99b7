# Source me (`. cluster/env.sh`, POSIX sh too) to use the local cluster of cluster/up.sh:
# KUBECONFIG points at its admin kubeconfig, and its bin dir (the pinned kubectl, and helm once
# `make helm` has built it; see versions.env) comes first on PATH. Safe to source more than once.
_inferscale_state="${INFERSCALE_CLUSTER_DIR:-$HOME/.cache/inferscale/cluster}"
export KUBECONFIG="$_inferscale_state/kubeconfig"
case ":$PATH:" in
  *":$_inferscale_state/bin:"*) ;;
  *) export PATH="$_inferscale_state/bin:$PATH" ;;
esac
unset _inferscale_state
