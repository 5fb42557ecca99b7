#!/usr/bin/env bash
# Start a real local Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, and kwok with fake GPU nodes (pods scheduled
# there go Running without containers). Binaries come from cluster/build.sh (it builds them
# the first time; helm only with `cluster/build.sh helm`).
#
# Env: INFERSCALE_CLUSTER_DIR (state dir), INFERSCALE_GPU_NODES (default 2),
#      INFERSCALE_CLUSTER_TIMEOUT (seconds per wait, default 120),
#      INFERSCALE_{ETCD,ETCD_PEER,APISERVER,KCM,SCHEDULER}_PORT.
# Idempotent: exits 0 at once when the cluster is already up; cleans up stale state.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

gpu_nodes="${INFERSCALE_GPU_NODES:-2}"
timeout="${INFERSCALE_CLUSTER_TIMEOUT:-120}"

# Seconds since $1 (an $EPOCHREALTIME), one decimal.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

hints() {
  local tools="kubectl $KUBERNETES_VERSION"
  if [[ -x $helm_bin/helm ]]; then tools+=", helm $HELM_VERSION"; else tools+="; helm: \`make helm\` builds it"; fi
  echo "kubeconfig: $kubeconfig"
  echo "  export KUBECONFIG=$kubeconfig"
  echo "  export PATH=$state/bin:\$PATH   # $tools (or: source cluster/env.sh)"
}

# The pinned kubectl, and helm once built (`make helm`; the demo does not need it), first on PATH
# after `source cluster/env.sh`. No link to a helm not built: a dangling one would hide any other.
link_tools() {
  mkdir -p "$state/bin"
  ln -sfn "$bin/kubectl" "$state/bin/kubectl"
  if [[ -x $helm_bin/helm ]]; then ln -sfn "$helm_bin/helm" "$state/bin/helm"; else rm -f "$state/bin/helm"; fi
}

# --- binaries (a no-op when cached) -------------------------------------------------
t0=$EPOCHREALTIME
"$here/build.sh"
echo "cluster build took $(since "$t0")s"

kubectl() { "$bin/kubectl" --kubeconfig="$kubeconfig" "$@"; }
# curl against the apiserver as admin (certificates, not kubectl: faster to poll).
api_get() {
  curl -sf --max-time 5 --cacert "$certs/ca.crt" --cert "$certs/admin.crt" --key "$certs/admin.key" \
    "https://127.0.0.1:$apiserver_port$1"
}

# --- already up? stale? ---------------------------------------------------------------
# kwok's stages (cluster/build.sh keeps them beside the binary) make nodes Ready and keep their leases
# fresh for the node-lifecycle controller, complete Job pods and let deleted pods go; the repository's
# (cluster/kwok/) make pods Running, and Ready only when no pod runner has claimed them (see there).
stages=("$bin"/kwok-stages/{node-initialize,node-heartbeat-with-lease,pod-complete,pod-delete}.yaml "$here"/kwok/*.yaml)
stages_sum="$(cat "${stages[@]}" | sha256sum | cut -d' ' -f1)"

up=1 stale="not all components running"
for c in "${components[@]}"; do component_alive "$c" || up=0; done
if [[ $up == 1 ]] && api_get /readyz >/dev/null; then
  if [[ "$(cat "$state/kwok-stages.sum" 2>/dev/null)" == "$stages_sum" ]]; then
    echo "cluster already up (state in $state)"
    link_tools
    hints
    exit 0
  fi
  stale="started with other kwok stages than cluster/kwok/ holds now"
fi
if [[ -e $state || -n "$(cluster_pids)" ]]; then
  echo "stale cluster state in $state ($stale): cleaning up"
  "$here/down.sh"
fi

# Fail early and clearly if something else holds one of our ports.
for p in "$etcd_port" "$etcd_peer_port" "$apiserver_port" "$kcm_port" "$scheduler_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "ERROR: 127.0.0.1:$p is already in use by another process; set INFERSCALE_*_PORT (see cluster/common.sh)" >&2
    exit 1
  fi
done

t0=$EPOCHREALTIME
mkdir -p "$certs" "$logs" "$pids" "$state/config"
link_tools

# --- certificates ---------------------------------------------------------------------
# One CA signs the apiserver serving cert and the client certs (the apiserver trusts it
# through --client-ca-file). ECDSA P-256 keys: generated in milliseconds where RSA takes
# seconds on a busy machine. SKID/AKID extensions keep strict TLS clients (Python 3.13+) happy.
gen_certs() (
  local newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)
  cd "$certs"

  # mkca NAME CN: a self-signed CA.
  mkca() {
    printf '%s\n' "[req]" "distinguished_name = dn" "x509_extensions = v3_ca" "prompt = no" \
      "[dn]" "CN = $2" "[v3_ca]" "basicConstraints = critical, CA:TRUE" \
      "keyUsage = critical, digitalSignature, keyCertSign" "subjectKeyIdentifier = hash" >"$1.cnf"
    openssl req -x509 "${newkey[@]}" -nodes -days 3650 -config "$1.cnf" -keyout "$1.key" -out "$1.crt" 2>/dev/null
    rm -f "$1.cnf"
  }
  # sign CA NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]: a leaf cert signed by CA.
  sign() {
    openssl req "${newkey[@]}" -nodes -subj "$3" -keyout "$2.key" -out "$2.csr" 2>/dev/null
    {
      echo "basicConstraints = critical, CA:FALSE"
      echo "keyUsage = critical, digitalSignature"
      echo "extendedKeyUsage = $4"
      echo "subjectKeyIdentifier = hash"
      echo "authorityKeyIdentifier = keyid"
      [[ -z ${5:-} ]] || echo "subjectAltName = $5"
    } >"$2.ext"
    openssl x509 -req -in "$2.csr" -CA "$1.crt" -CAkey "$1.key" -CAcreateserial -days 365 \
      -extfile "$2.ext" -out "$2.crt" 2>/dev/null
    rm -f "$2.csr" "$2.ext"
  }

  mkca ca inferscale-local-ca
  sign ca apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1, IP:$service_ip, DNS:localhost, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local"
  sign ca admin "/O=system:masters/CN=inferscale-admin" clientAuth # system:masters = cluster-admin, bypasses RBAC
  # Controller-manager and scheduler use their own identities, bound by RBAC's bootstrap roles.
  sign ca kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
  sign ca kube-scheduler "/CN=system:kube-scheduler" clientAuth
  # Front proxy (request-header auth, as kubeadm sets up): without it the controller-manager
  # and scheduler log "missing content for CA bundle ... requestheader-client-ca-file" in a
  # loop, and aggregated APIs could not authenticate. Its own CA, as in kubeadm.
  mkca front-proxy-ca inferscale-front-proxy-ca
  sign front-proxy-ca front-proxy-client "/CN=front-proxy-client" clientAuth
  # Service-account token signing key pair (apiserver signs/verifies, controller-manager signs).
  openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
  openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  chmod 600 ./*.key
)

# write_kubeconfig FILE CERT_NAME
write_kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: inferscale
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority-data: $(base64 -w0 "$certs/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$certs/$2.crt")
    client-key-data: $(base64 -w0 "$certs/$2.key")
contexts:
- name: inferscale
  context:
    cluster: inferscale
    user: $2
current-context: inferscale
EOF
  chmod 600 "$1"
}

gen_certs
write_kubeconfig "$kubeconfig" admin
write_kubeconfig "$state/config/kube-controller-manager.kubeconfig" kube-controller-manager
write_kubeconfig "$state/config/kube-scheduler.kubeconfig" kube-scheduler

# --- process helpers --------------------------------------------------------------------
# start NAME CMD...: run detached in its own session (setsid: no controlling terminal, no
# SIGHUP when the calling shell exits), output to logs/NAME.log, pid to pids/NAME.pid.
# Without job control the background child is no process-group leader, so setsid execs
# in place and $! is the component's own pid.
start() {
  local name=$1; shift
  setsid "$@" </dev/null >"$logs/$name.log" 2>&1 &
  echo $! >"$pids/$name.pid"
}

# Between fork and exec the recorded pid is still setsid (or the forked shell): the component is
# starting, not gone. On a busy machine the first poll can land in that gap (a CI run failed so).
not_yet_exec() {
  local pid exe
  pid="$(cat "$pids/$1.pid" 2>/dev/null)" || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  [[ ${exe##*/} == setsid || ${exe##*/} == bash ]]
}

# exited NAME: the component is gone. Each check reads /proc apart from the other, so an exec landing
# between them reads as neither (setsid for the first, already the component for the second): only
# three misses in a row, 0.1 s apart, mean exited (a CI run failed on a single miss, with an empty log).
exited() {
  local _
  for _ in 1 2 3; do
    if component_alive "$1" || not_yet_exec "$1"; then return 1; fi
    sleep 0.1
  done
}

# wait_for COMPONENT WHAT CMD...: poll CMD until it succeeds; fail (pointing at the
# component's log) on timeout or when the component has exited.
wait_for() {
  local name=$1 what=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if exited "$name"; then
      echo "ERROR: $name exited while waiting for $what; see $logs/$name.log:" >&2
      tail -n 20 "$logs/$name.log" | sed 's/^/  | /' >&2
      exit 1
    fi
    if ((SECONDS >= deadline)); then
      echo "ERROR: timed out after ${timeout}s waiting for $what; see $logs/$name.log:" >&2
      tail -n 20 "$logs/$name.log" | sed 's/^/  | /' >&2
      echo "(processes left running for inspection; cluster/down.sh stops them)" >&2
      exit 1
    fi
    sleep 0.2
  done
}

# --- etcd: fresh data dir on every start --------------------------------------------------
start etcd "$bin/etcd" \
  --name=inferscale \
  --data-dir="$state/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" \
  --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster="inferscale=http://127.0.0.1:$etcd_peer_port" \
  --log-level=warn
wait_for etcd "etcd health" curl -sf --max-time 2 "http://127.0.0.1:$etcd_port/health"

# --- kube-apiserver -------------------------------------------------------------------------
# --advertise-address=127.0.0.1 keeps it off the host's interfaces; the endpoint reconciler
# is off because Endpoints may not hold a loopback IP (the `kubernetes` Service still exists,
# with no endpoints: nothing runs inside this cluster).
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$etcd_port" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --secure-port="$apiserver_port" \
  --endpoint-reconciler-type=none \
  --cert-dir="$state/apiserver" \
  --tls-cert-file="$certs/apiserver.crt" \
  --tls-private-key-file="$certs/apiserver.key" \
  --client-ca-file="$certs/ca.crt" \
  --requestheader-client-ca-file="$certs/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$certs/front-proxy-client.crt" \
  --proxy-client-key-file="$certs/front-proxy-client.key" \
  --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$certs/sa.pub" \
  --service-account-signing-key-file="$certs/sa.key" \
  --service-cluster-ip-range="$service_cidr" \
  --allow-privileged=true
wait_for kube-apiserver "kube-apiserver /readyz" api_get /readyz

# --- controller-manager, scheduler, kwok (all only need the apiserver) -----------------------
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$state/config/kube-controller-manager.kubeconfig" \
  --authentication-kubeconfig="$state/config/kube-controller-manager.kubeconfig" \
  --authorization-kubeconfig="$state/config/kube-controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 \
  --secure-port="$kcm_port" \
  --cert-dir="$state/kube-controller-manager" \
  --root-ca-file="$certs/ca.crt" \
  --service-account-private-key-file="$certs/sa.key" \
  --use-service-account-credentials=true \
  --cluster-signing-cert-file="$certs/ca.crt" \
  --cluster-signing-key-file="$certs/ca.key" \
  --cluster-cidr="$pod_cidr" \
  --service-cluster-ip-range="$service_cidr" \
  --leader-elect=false

start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig="$state/config/kube-scheduler.kubeconfig" \
  --authentication-kubeconfig="$state/config/kube-scheduler.kubeconfig" \
  --authorization-kubeconfig="$state/config/kube-scheduler.kubeconfig" \
  --bind-address=127.0.0.1 \
  --secure-port="$scheduler_port" \
  --cert-dir="$state/kube-scheduler" \
  --leader-elect=false

# kwok only manages nodes annotated kwok.x-k8s.io/node=fake.
stage_args=()
for f in "${stages[@]}"; do stage_args+=(-c "$f"); done
echo "$stages_sum" >"$state/kwok-stages.sum"
start kwok "$bin/kwok" \
  --kubeconfig="$kubeconfig" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr="$pod_cidr" \
  --node-lease-duration-seconds=40 \
  "${stage_args[@]}"

# --- fake GPU nodes -------------------------------------------------------------------------
for ((i = 0; i < gpu_nodes; i++)); do
  echo "---"
  # Node IPs from 10.240.0.0/16: apart from the pod and service CIDRs.
  sed -e "s/NODE_NAME/gpu-node-$i/g" -e "s/NODE_IP/10.240.$((i / 250)).$((i % 250 + 1))/g" "$here/gpu-node.yaml"
done | kubectl create -f - >/dev/null

# --- wait until usable ------------------------------------------------------------------------
healthz() { curl -skf --max-time 2 "https://127.0.0.1:$1/healthz"; }
wait_for kube-controller-manager "kube-controller-manager /healthz" healthz "$kcm_port"
wait_for kube-scheduler "kube-scheduler /healthz" healthz "$scheduler_port"
nodes_ready() {
  local ready
  ready="$(kubectl get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)"
  ((ready == gpu_nodes))
}
wait_for kwok "$gpu_nodes GPU nodes Ready" nodes_ready
# The node-lifecycle controller taints nodes not-ready until it sees them Ready: wait for it
# to lift the taints so the first pods schedule at once.
no_taints() { [[ -z "$(kubectl get nodes -l type=kwok -o jsonpath='{.items[*].spec.taints}')" ]]; }
wait_for kube-controller-manager "node taints lifted" no_taints
# Pods are rejected until their ServiceAccount exists: proves the controller-manager works.
wait_for kube-controller-manager "ServiceAccount default/default" kubectl get serviceaccount default -n default

echo "cluster started in $(since "$t0")s ($gpu_nodes GPU nodes, Kubernetes $KUBERNETES_VERSION, state in $state)"
hints
