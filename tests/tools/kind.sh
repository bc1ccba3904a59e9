#!/usr/bin/env bash
# A kind cluster for Phalanx's end-to-end suite, offline or with the published node image.
#
# Why it exists: kind's node image cannot be pulled on our machines (no container registry), and
# `kind build node-image` pulls etcd, CoreDNS, pause and kindnetd. So, when the published image
# cannot be had, we build an equivalent node image from the pinned Kubernetes binaries (Go
# modules), Debian packages and kind's own base files, and do kindnetd's job (pod routes) from
# here. The recipe and its timings are in ../shared/machine.md ("kind, offline").
#
# Usage: kind.sh COMMAND [options]
#   up [--workers N] [--node-image IMAGE]  create the cluster (default 3 workers), images loaded
#   images                                  (re)build the Phalanx images and load them into kind
#   node-image                              build the offline node image only
#   net                                     (re)write pod routes, e.g. after a node restarted
#   nodes                                   the node containers' names
#   down                                    delete the cluster
#   kubeconfig                              print the kubeconfig path
#   export-logs DIR                         `kind export logs` into DIR
#   kueue                                   install Kueue's controller (pinned Go module) on it
#   gang-scheduler                          install the TEST-ONLY gang scheduler and PodGroup CRD
#   prometheus                              build Prometheus (Go module), load its image; print its name
#   object-store                            build versitygw (an S3 server), load its image; print its name
#
# --node-image IMAGE (or PHALANX_KIND_NODE_IMAGE) uses a published node image such as
# kindest/node:v1.33.4 with kind's default CNI. Without it, `up` tries to pull the published
# image once (a machine without a registry answers "no" at once) and builds its own when it can't.
#
# Env:
#   PHALANX_CACHE      cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/phalanx)
#   PHALANX_KIND_NAME  cluster name (default phalanx-e2e)
#   PHALANX_KIND_STATE state folder: kubeconfig, the shared checkpoint folder (default .artifacts/kind)
#   PHALANX_KIND_NODE_GRACE  kube-controller-manager's node-monitor-grace-period (default 20s, so
#                      that lost nodes show sooner; "default" leaves Kubernetes' own, 50 s)
#   PYTHON             Python whose torch the test trainer image mounts (default .venv/bin/python)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
K8S_VERSION=${PHALANX_K8S_VERSION:-v1.33.13}
KIND_VERSION=${PHALANX_KIND_VERSION:-v0.30.0}
PUBLISHED_IMAGE=kindest/node:v1.33.4
NAME=${PHALANX_KIND_NAME:-phalanx-e2e}
STATE=${PHALANX_KIND_STATE:-$ROOT/.artifacts/kind}
NODE_GRACE=${PHALANX_KIND_NODE_GRACE:-20s}
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
# The recipe's revision is in the tag, so a changed recipe is rebuilt where the old image is
# cached (r2: etcd 3.5.24 built from Go, whose /livez and /readyz kubeadm's probes ask for).
NODE_IMAGE=phalanx/kind-node:$K8S_VERSION-r2
BASE_IMAGE=phalanx/debian:bookworm
KIND_BASE_IMAGE=phalanx/kind-base:$KIND_VERSION
PHALANX_VERSION=${PHALANX_IMAGE_TAG:-0.1.0}
CONTROLPLANE_IMAGE=phalanx/controlplane:$PHALANX_VERSION
TRAINER_IMAGE=phalanx/trainer:$PHALANX_VERSION
USER_IMAGE=phalanx/user-python:$PHALANX_VERSION
NO_PYTHON_IMAGE=phalanx/no-python:$PHALANX_VERSION
KUEUE_VERSION=${PHALANX_KUEUE_VERSION:-v0.17.0}
KUEUE_IMAGE=phalanx/kueue:$KUEUE_VERSION
KUEUE_PODS_READY_TIMEOUT=${PHALANX_KUEUE_PODS_READY_TIMEOUT:-120s}
POD_SUBNET=10.244.0.0/16

log() { printf '[kind] %s\n' "$*" >&2; }
timed() { # timed LABEL COMMAND...: run, then log how long it took
  local label=$1 start=$SECONDS
  shift
  "$@"
  log "$label: $((SECONDS - start)) s"
}

K8S_BIN=$(bash "$ROOT/tests/tools/k8s-binaries.sh" --print-dir)
TOOLS_BIN=$(bash "$ROOT/tests/tools/cluster-tools.sh" --print-dir)
KIND="$TOOLS_BIN/kind"
KUBECONFIG_PATH="$STATE/kubeconfig"
kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

tools() {
  bash "$ROOT/tests/tools/docker-engine.sh"
  bash "$ROOT/tests/tools/k8s-binaries.sh" kubectl >/dev/null
  bash "$ROOT/tests/tools/cluster-tools.sh" kind helm >/dev/null
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# --- the offline node image ------------------------------------------------------------------

kind_module_dir() {
  (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
}

k8s_module_dir() {
  (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
}

build_kind_base() {
  image_exists "$KIND_BASE_IMAGE" && { log "$KIND_BASE_IMAGE: cached"; return; }
  image_exists "$BASE_IMAGE" || bash "$ROOT/trainer_image/make-base.sh" "$BASE_IMAGE"
  local ctx
  ctx=$(mktemp -d)
  cp -r "$(kind_module_dir)/images/base/files" "$ctx/files"
  chmod -R u+w "$ctx"
  cp "$ROOT/tests/e2e/kind/node/Dockerfile" "$ROOT/tests/e2e/kind/node/phalanx-runc" "$ctx/"
  DOCKER_BUILDKIT=0 docker build -q --build-arg BASE="$BASE_IMAGE" -t "$KIND_BASE_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# import_binary IMAGE BINARY PATH_IN_IMAGE: a one-binary image (static Go builds need nothing else).
import_binary() {
  local image=$1 binary=$2 path=$3 dir
  dir=$(mktemp -d)
  install -D -m 0755 "$binary" "$dir$path"
  tar -C "$dir" -c . | docker import -c "ENTRYPOINT [\"$path\"]" - "$image" >/dev/null
  rm -rf "$dir"
}

# The images kubeadm expects, tagged exactly as `kubeadm config images list` names them.
build_kube_images() { # -> writes $1 (a docker save archive)
  local out=$1 images=() image kmod
  while read -r image; do
    case $image in
      */kube-apiserver:*|*/kube-controller-manager:*|*/kube-scheduler:*)
        local name=${image##*/}; name=${name%%:*}
        import_binary "$image" "$K8S_BIN/$name" "/usr/local/bin/$name" ;;
      */kube-proxy:*)
        local ctx
        ctx=$(mktemp -d)
        cp "$K8S_BIN/kube-proxy" "$ctx/"
        printf '%s\n' "FROM $BASE_IMAGE" \
          "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables conntrack && rm -rf /var/lib/apt/lists/*" \
          "COPY kube-proxy /usr/local/bin/kube-proxy" >"$ctx/Dockerfile"
        DOCKER_BUILDKIT=0 docker build -q -t "$image" "$ctx" >/dev/null
        rm -rf "$ctx" ;;
      */etcd:*)
        local dir
        dir=$(mktemp -d)
        install -D -m 0755 "$(readlink -f "$K8S_BIN/etcd")" "$dir/usr/local/bin/etcd"
        tar -C "$dir" -c . | docker import -c 'ENTRYPOINT ["/usr/local/bin/etcd"]' - "$image" >/dev/null
        rm -rf "$dir" ;;
      */coredns:*)
        bash "$ROOT/tests/tools/cluster-tools.sh" coredns >/dev/null
        import_binary "$image" "$(ls "$TOOLS_BIN"/coredns-* | head -n1)" /coredns ;;
      */pause:*)
        kmod=$(k8s_module_dir)
        local dir
        dir=$(mktemp -d)
        gcc -Os -static -o "$dir/pause" "$kmod/build/pause/linux/pause.c"
        import_binary "$image" "$dir/pause" /pause
        rm -rf "$dir" ;;
      *) log "no recipe for $image"; return 1 ;;
    esac
    images+=("$image")
  done < <("$K8S_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION")
  docker save -o "$out" "${images[@]}"
}

build_node_image() {
  image_exists "$NODE_IMAGE" && { log "$NODE_IMAGE: cached"; return; }
  bash "$ROOT/tests/tools/k8s-binaries.sh" kubelet kubeadm kubectl kube-apiserver \
    kube-controller-manager kube-scheduler kube-proxy etcd >/dev/null
  timed "kind base image" build_kind_base
  local archive container
  archive=$(mktemp --suffix=.tar)
  timed "kubeadm's images" build_kube_images "$archive"
  container=$(docker run -d --privileged --entrypoint sleep "$KIND_BASE_IMAGE" infinity)
  trap 'docker rm -f '"$container"' >/dev/null 2>&1 || true' EXIT  # also when a step fails
  for b in kubelet kubeadm kubectl; do docker cp "$(readlink -f "$K8S_BIN/$b")" "$container:/usr/bin/$b"; done
  docker cp "$archive" "$container:/kind/images.tar"
  docker exec "$container" sh -c "
    set -e
    echo $K8S_VERSION > /kind/version
    (containerd >/tmp/containerd.log 2>&1 &)
    for i in \$(seq 1 30); do ctr version >/dev/null 2>&1 && break; sleep 1; done
    ctr -n k8s.io images import --no-unpack /kind/images.tar >/dev/null
    pkill containerd; rm -f /kind/images.tar /tmp/containerd.log"
  # The base image's STOPSIGNAL (SIGRTMIN+3, systemd's) carries over; the entrypoint must be reset.
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    "$container" "$NODE_IMAGE" >/dev/null
  docker rm -f "$container" >/dev/null
  trap - EXIT
  rm -f "$archive"
  log "built $NODE_IMAGE"
}

# --- the cluster -----------------------------------------------------------------------------

torch_site() { # the site-packages folder holding the torch that test trainer pods mount
  "$PYTHON" -c 'import pathlib, torch; print(pathlib.Path(torch.__file__).resolve().parents[1])'
}

write_config() { # write_config WORKERS OFFLINE
  local workers=$1 offline=$2 site
  site=$(torch_site)
  mkdir -p "$STATE/shared" && chmod 1777 "$STATE/shared"
  {
    echo "kind: Cluster"
    echo "apiVersion: kind.x-k8s.io/v1alpha4"
    echo "networking:"
    echo "  podSubnet: $POD_SUBNET"
    [[ $offline == 1 ]] && echo "  disableDefaultCNI: true"
    # A lost node is noticed after 20 s instead of Kubernetes' 50 s: the suite stops node
    # containers. PHALANX_KIND_NODE_GRACE=default measures against Kubernetes' own.
    if [[ $NODE_GRACE != default ]]; then
      echo "kubeadmConfigPatches:"
      echo "  - |"
      echo "    kind: ClusterConfiguration"
      echo "    controllerManager:"
      echo "      extraArgs:"
      echo "        node-monitor-grace-period: $NODE_GRACE"
    fi
    echo "nodes:"
    echo "  - role: control-plane"
    for _ in $(seq 1 "$workers"); do
      echo "  - role: worker"
      echo "    extraMounts:"
      echo "      - {hostPath: $STATE/shared, containerPath: /var/phalanx/shared}"
      echo "      - {hostPath: $site, containerPath: /opt/phalanx-torch, readOnly: true}"
    done
  } >"$STATE/cluster.yaml"
}

# kindnetd's job, for the offline image: a ptp + host-local CNI config for each node's podCIDR,
# routes to every other node's podCIDR, and masquerading of pod traffic leaving the pod network.
network() {
  local nodes node cidr ip other
  mapfile -t nodes < <("$KIND" get nodes --name "$NAME")
  declare -A cidrs ips
  for node in "${nodes[@]}"; do
    cidrs[$node]=$(kubectl get node "$node" -o jsonpath='{.spec.podCIDR}')
    ips[$node]=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$node")
  done
  for node in "${nodes[@]}"; do
    cidr=${cidrs[$node]}
    docker exec -i "$node" sh -c 'mkdir -p /etc/cni/net.d && cat > /etc/cni/net.d/10-phalanx.conflist' <<JSON
{"cniVersion": "0.4.0", "name": "phalanx", "plugins": [
  {"type": "ptp", "ipMasq": false, "mtu": 1500,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
    for other in "${nodes[@]}"; do
      [[ $other == "$node" ]] && continue
      docker exec "$node" ip route replace "${cidrs[$other]}" via "${ips[$other]}"
    done
    docker exec "$node" sh -c "iptables -t nat -C POSTROUTING -s $POD_SUBNET ! -d $POD_SUBNET -j MASQUERADE 2>/dev/null \
      || iptables -t nat -A POSTROUTING -s $POD_SUBNET ! -d $POD_SUBNET -j MASQUERADE"
  done
}

healthy() { # every node container runs, and every node is Ready
  local node
  for node in $("$KIND" get nodes --name "$NAME"); do
    [[ $(docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null) == true ]] || return 1
  done
  [[ -f $KUBECONFIG_PATH ]] && kubectl wait --for=condition=Ready nodes --all --timeout=30s >/dev/null 2>&1
}

published_node_image() { # prints the published image to use, or nothing for the offline build
  local wanted=${NODE_IMAGE_FLAG:-${PHALANX_KIND_NODE_IMAGE:-}}
  if [[ -n $wanted ]]; then echo "$wanted"; return; fi
  if image_exists "$PUBLISHED_IMAGE" || timeout 120 docker pull -q "$PUBLISHED_IMAGE" >/dev/null 2>&1; then
    echo "$PUBLISHED_IMAGE"
  fi
}

up() {
  local workers=3
  while [[ $# -gt 0 ]]; do
    case $1 in
      --workers) workers=$2; shift 2 ;;
      --node-image) NODE_IMAGE_FLAG=$2; shift 2 ;;
      *) log "unknown option $1"; exit 2 ;;
    esac
  done
  timed "tools" tools
  if "$KIND" get clusters 2>/dev/null | grep -qx "$NAME"; then
    if healthy; then
      log "cluster $NAME is up already (kind.sh down to start over)"
      timed "images" images
      return
    fi
    log "cluster $NAME exists but is not healthy (stopped nodes?): making it again"
    "$KIND" delete cluster --name "$NAME"
  fi
  local image offline=0
  image=$(published_node_image)
  if [[ -z $image ]]; then
    offline=1
    image=$NODE_IMAGE
    timed "node image" build_node_image
  fi
  mkdir -p "$STATE"
  write_config "$workers" "$offline"
  timed "kind create cluster" "$KIND" create cluster --name "$NAME" --image "$image" \
    --config "$STATE/cluster.yaml" --kubeconfig "$KUBECONFIG_PATH" --wait 0s
  [[ $offline == 1 ]] && timed "pod network" network
  timed "nodes Ready" kubectl wait --for=condition=Ready nodes --all --timeout=180s >/dev/null
  # On 2 cores the suite's training pods compete with the control plane; under contention the
  # control-plane node gets ten times a worker's CPU weight (cgroup cpu shares), so API calls
  # and the node controller keep their pace; training still has every cycle the control plane
  # leaves idle. (The control plane lost after ~20 minutes in earlier runs was not this: it
  # was etcd 3.5.1 failing kubeadm's startup probe, see k8s-binaries.sh.)
  docker update --cpu-shares 10240 "$NAME-control-plane" >/dev/null
  # Cluster DNS stays on the control-plane node, out of the way of the workers the suite loses.
  kubectl -n kube-system patch deployment coredns --type merge \
    -p '{"spec":{"template":{"spec":{"nodeSelector":{"node-role.kubernetes.io/control-plane":""}}}}}' >/dev/null
  timed "images" images
  log "cluster $NAME is up: export KUBECONFIG=$KUBECONFIG_PATH"
}

python_base() { # the Dockerfiles' own base where a registry answers, else the local Debian base
  if image_exists python:3.11-slim || timeout 300 docker pull -q python:3.11-slim >/dev/null 2>&1; then
    echo python:3.11-slim
    return
  fi
  image_exists "$BASE_IMAGE" || bash "$ROOT/trainer_image/make-base.sh" "$BASE_IMAGE" >/dev/null
  echo "$BASE_IMAGE"
}

# The Phalanx images. The trainer image of this suite mounts torch from the host (TORCH=mounted):
# the same image with PyPI's torch is about 6 GB, and loading that into every node took minutes.
images() {
  # pip inside `docker build` trusts what pip here trusts (a TLS proxy's CA, on our machines).
  local bundle base
  for bundle in "${PIP_CERT:-}" "${REQUESTS_CA_BUNDLE:-}" "${SSL_CERT_FILE:-}" \
    "$(python3 -m pip config get global.cert 2>/dev/null)" /etc/ssl/certs/ca-certificates.crt; do
    if [[ -f $bundle && ! -f $ROOT/trainer_image/certs/ca.crt ]]; then
      cp "$bundle" "$ROOT/trainer_image/certs/ca.crt"
    fi
  done
  base=$(python_base)
  timed "control-plane image" docker build -q -f "$ROOT/operator/Dockerfile" \
    --build-arg BASE="$base" -t "$CONTROLPLANE_IMAGE" "$ROOT" >/dev/null
  timed "trainer image (torch mounted)" docker build -q -f "$ROOT/trainer_image/Dockerfile" \
    --build-arg BASE="$base" --build-arg TORCH=mounted -t "$TRAINER_IMAGE" "$ROOT" >/dev/null
  timed "user image (python3, torch mounted, no Phalanx)" docker build -q \
    -f "$ROOT/tests/e2e/images/user-python.Dockerfile" --build-arg BASE="$base" \
    -t "$USER_IMAGE" "$ROOT/tests/e2e/images" >/dev/null
  timed "image without python" docker build -q -f "$ROOT/tests/e2e/images/no-python.Dockerfile" \
    --build-arg BASE="$base" -t "$NO_PYTHON_IMAGE" "$ROOT/tests/e2e/images" >/dev/null
  # The control plane runs on the control-plane node and training on the workers (the suite
  # loses workers, never its own operator): each image goes only where it runs. The workers
  # get the control-plane image too: node pods' init containers copy the agent from it.
  local workers
  workers=$("$KIND" get nodes --name "$NAME" | grep -v control-plane | paste -sd, -)
  timed "kind load" "$KIND" load docker-image --name "$NAME" --nodes "$NAME-control-plane" \
    "$CONTROLPLANE_IMAGE" >/dev/null
  timed "kind load" "$KIND" load docker-image --name "$NAME" --nodes "$workers" \
    "$TRAINER_IMAGE" "$USER_IMAGE" "$NO_PYTHON_IMAGE" "$CONTROLPLANE_IMAGE" >/dev/null
  # A pod keeps the image it started with when its tag is loaded again: on a reused cluster,
  # restart Phalanx's own deployments (the suite's install) so they run what was just built.
  if kubectl get namespace phalanx-system >/dev/null 2>&1; then
    timed "control plane restarted" kubectl -n phalanx-system rollout restart deployment >/dev/null
    kubectl -n phalanx-system rollout status deployment --timeout=180s >/dev/null
  fi
}

# --- Kueue ------------------------------------------------------------------------------------

# Kueue's controller manager from its pinned Go module (cluster-tools.sh kueue): the binary as a
# one-file image (non-root, as its manifests require), its own config/default rendered with that
# image (never pulled) and waitForPodsReady on (all-or-nothing admission: a Workload whose pods
# are not all running within the timeout is evicted and requeued). Its visibility APIServices are
# left out: their discovery answers 404 through the aggregator on this cluster (the same as
# kubernetes-sigs/kueue#5150), and a registered group whose discovery fails holds every namespace
# deletion in the cluster at Terminating (NamespaceDeletionDiscoveryFailure). Phalanx never reads
# Kueue's visibility API (pending-workload listings); only its CRDs and controller.
install_kueue() {
  local dir rendered="$STATE/kueue.yaml"
  bash "$ROOT/tests/tools/cluster-tools.sh" kueue >/dev/null
  if ! image_exists "$KUEUE_IMAGE"; then
    dir=$(mktemp -d)
    install -D -m 0755 "$TOOLS_BIN/kueue" "$dir/manager"
    tar -C "$dir" -c . | docker import -c 'ENTRYPOINT ["/manager"]' -c 'USER 65532:65532' \
      - "$KUEUE_IMAGE" >/dev/null
    rm -rf "$dir"
  fi
  timed "kind load (kueue)" "$KIND" load docker-image --name "$NAME" "$KUEUE_IMAGE" >/dev/null
  "$K8S_BIN/kubectl" kustomize "$TOOLS_BIN/kueue-config/default" \
    | "$PYTHON" -c '
import sys, yaml
image, timeout = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] != "APIService"]
for d in docs:
    if d["kind"] == "Deployment" and d["metadata"]["name"] == "kueue-controller-manager":
        for c in d["spec"]["template"]["spec"]["containers"]:
            c.update(image=image, imagePullPolicy="Never")
    if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kueue-manager-config":
        config = yaml.safe_load(d["data"]["controller_manager_config.yaml"])
        config["waitForPodsReady"] = {"timeout": timeout, "blockAdmission": False}
        d["data"]["controller_manager_config.yaml"] = yaml.safe_dump(config)
yaml.safe_dump_all(docs, sys.stdout)
' "$KUEUE_IMAGE" "$KUEUE_PODS_READY_TIMEOUT" >"$rendered"
  kubectl apply --server-side --force-conflicts -f "$rendered" >/dev/null
  kubectl delete apiservice v1beta1.visibility.kueue.x-k8s.io v1beta2.visibility.kueue.x-k8s.io \
    --ignore-not-found >/dev/null  # left by an install before they were left out
  timed "kueue ready" kubectl -n kueue-system rollout status deployment/kueue-controller-manager \
    --timeout=300s >/dev/null
}

# --- Gang scheduler (TEST-ONLY) ---------------------------------------------------------------

# tests/tools/gang-scheduler: kube-scheduler with a minimal coscheduling plugin, as a second
# scheduler (phalanx-gang) in kube-system, and scheduler-plugins' PodGroup CRD (the test
# fixture's copy) it reads; for the kind suite's `gang: true` case.
install_gang_scheduler() {
  local dir target image
  bash "$ROOT/tests/tools/cluster-tools.sh" gang-scheduler >/dev/null
  target=$(readlink "$TOOLS_BIN/gang-scheduler")
  image="phalanx/gang-scheduler:${target#gang-scheduler-}"
  if ! image_exists "$image"; then
    dir=$(mktemp -d)
    install -D -m 0755 "$TOOLS_BIN/$target" "$dir/gang-scheduler"
    tar -C "$dir" -c . | docker import -c 'ENTRYPOINT ["/gang-scheduler"]' \
      -c 'USER 65532:65532' - "$image" >/dev/null
    rm -rf "$dir"
  fi
  timed "kind load (gang scheduler)" "$KIND" load docker-image --name "$NAME" "$image" >/dev/null
  kubectl apply --server-side -f "$ROOT/tests/fixtures/crds/scheduling.x-k8s.io_podgroups.yaml" \
    >/dev/null
  sed "s|GANG_SCHEDULER_IMAGE|$image|" "$ROOT/tests/e2e/kind/gang-scheduler.yaml" \
    | kubectl apply --server-side --force-conflicts -f - >/dev/null
  timed "gang scheduler ready" kubectl -n kube-system rollout status \
    deployment/phalanx-gang-scheduler --timeout=300s >/dev/null
}

# --- Prometheus (TEST-ONLY) -------------------------------------------------------------------

# A real Prometheus server, built from its Go module like promtool (k8s-binaries.sh prometheus),
# as an image loaded into kind; prints the image's name. tests/e2e/test_monitoring.py runs it
# with the scrape configuration the Prometheus Operator makes of the chart's ServiceMonitor.
load_prometheus() {
  local dir bin image
  bin=$(bash "$ROOT/tests/tools/k8s-binaries.sh" prometheus)/prometheus
  image="phalanx/prometheus:$(basename "$(dirname "$(dirname "$(readlink "$bin")")")")"
  if ! image_exists "$image"; then
    dir=$(mktemp -d)
    install -D -m 0755 "$(readlink -f "$bin")" "$dir/bin/prometheus"
    mkdir -p "$dir/prometheus" && chmod 0777 "$dir/prometheus"
    tar -C "$dir" -c . | docker import -c 'ENTRYPOINT ["/bin/prometheus"]' \
      -c 'USER 65534:65534' - "$image" >/dev/null
    rm -rf "$dir"
  fi
  timed "kind load (prometheus)" "$KIND" load docker-image --name "$NAME" "$image" >/dev/null
  echo "$image"
}

# --- S3 server (TEST-ONLY) --------------------------------------------------------------------

# versitygw, an S3 gateway over a folder, built from its Go module (cluster-tools.sh versitygw),
# as an image loaded into kind; prints the image's name (tests/e2e/test_object_storage.py).
load_object_store() {
  local dir bin image
  bin=$(bash "$ROOT/tests/tools/cluster-tools.sh" versitygw)/versitygw
  image="phalanx/versitygw:$(readlink "$bin" | sed 's/^versitygw-//')"
  if ! image_exists "$image"; then
    dir=$(mktemp -d)
    install -D -m 0755 "$(readlink -f "$bin")" "$dir/bin/versitygw"
    tar -C "$dir" -c . | docker import -c 'ENTRYPOINT ["/bin/versitygw"]' - "$image" >/dev/null
    rm -rf "$dir"
  fi
  timed "kind load (versitygw)" "$KIND" load docker-image --name "$NAME" "$image" >/dev/null
  echo "$image"
}

cmd=${1:-}
shift || true
case $cmd in
  up) up "$@" ;;
  images) images ;;
  node-image) tools && build_node_image ;;
  net) network ;;
  nodes) "$KIND" get nodes --name "$NAME" ;;
  down) "$KIND" delete cluster --name "$NAME" ;;
  kubeconfig) echo "$KUBECONFIG_PATH" ;;
  export-logs) "$KIND" export logs "${1:?directory}" --name "$NAME" ;;
  kueue) install_kueue ;;
  gang-scheduler) install_gang_scheduler ;;
  prometheus) load_prometheus ;;
  object-store) load_object_store ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
