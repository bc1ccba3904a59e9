#!/usr/bin/env bash
# Build the pinned cluster tools Phalanx's chart checks, kind suite and benchmarks use, into a
# cache outside the repo: helm, the helm-unittest plugin, kind, CoreDNS (for the offline kind node
# image), kwok (fake nodes and kubelets for the control-plane benchmark) and Kubeflow's training
# operator with its CRDs (the control-plane benchmark's baseline).
#
# Why from Go modules: our machines reach the Go module proxy but no release download site and
# no container registry. Each tool is keyed by version, so a second run is a no-op ("cached").
#
# Usage: cluster-tools.sh [--print-dir] [TOOL ...]
#   TOOL is any of: helm helm-unittest kind coredns kwok training-operator kueue gang-scheduler
#   versitygw
#   (default: helm helm-unittest kind).
#   --print-dir  only print the bin directory.
# Env:
#   PHALANX_CACHE           cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/phalanx)
#   PHALANX_HELM_VERSION    helm.sh/helm/v3 version (default v3.21.3, the one helm-unittest builds with)
#   PHALANX_HELM_UNITTEST_VERSION  github.com/helm-unittest/helm-unittest version (default v1.1.2)
#   PHALANX_KIND_VERSION    sigs.k8s.io/kind version (default v0.30.0)
#   PHALANX_COREDNS_VERSION github.com/coredns/coredns version (default v1.14.7)
#   PHALANX_KWOK_VERSION    sigs.k8s.io/kwok version (default v0.7.0)
#   PHALANX_TRAINING_OPERATOR_VERSION  github.com/kubeflow/training-operator version (default v1.8.1)
#   PHALANX_KUEUE_VERSION   sigs.k8s.io/kueue version (default v0.17.0)
#   PHALANX_VERSITYGW_VERSION  github.com/versity/versitygw version (default v1.8.0): the kind
#                           suite's S3 server (an S3 gateway to a POSIX folder, tests/e2e/test_object_storage.py)
# After it: helm is `$BIN/helm`; its plugins live in `$CACHE/helm/plugins` (export HELM_PLUGINS).
set -euo pipefail

HELM_VERSION=${PHALANX_HELM_VERSION:-v3.21.3}
UNITTEST_VERSION=${PHALANX_HELM_UNITTEST_VERSION:-v1.1.2}
KIND_VERSION=${PHALANX_KIND_VERSION:-v0.30.0}
COREDNS_VERSION=${PHALANX_COREDNS_VERSION:-v1.14.7}
KWOK_VERSION=${PHALANX_KWOK_VERSION:-v0.7.0}
TRAINING_OPERATOR_VERSION=${PHALANX_TRAINING_OPERATOR_VERSION:-v1.8.1}
KUEUE_VERSION=${PHALANX_KUEUE_VERSION:-v0.17.0}
VERSITYGW_VERSION=${PHALANX_VERSITYGW_VERSION:-v1.8.0}
K8S_VERSION=${PHALANX_K8S_VERSION:-v1.33.13}
CACHE_ROOT=${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN_DIR="$CACHE_ROOT/tools/bin"
PLUGINS_DIR="$CACHE_ROOT/helm/plugins"

if [[ ${1:-} == --print-dir ]]; then
  echo "$BIN_DIR"
  exit 0
fi

log() { printf '[cluster-tools] %s\n' "$*" >&2; }

# go_build NAME MODULE@VERSION PACKAGE OUT [LDFLAGS] [helm-kube-version]: a throw-away module that
# requires MODULE and copies its replace directives (`go install pkg@v` refuses modules that have
# any). With `helm-kube-version`, the binary's default Kubernetes version (what `helm template` and
# helm-unittest render against, and what a chart's kubeVersion is checked with) is the one of the
# client-go it links, as helm's own Makefile sets it; without, helm's library says v1.20.0.
go_build() {
  local name=$1 modver=$2 pkg=$3 out=$4 ldflags=${5:-} kube=${6:-}
  local module=${modver%@*} version=${modver#*@}
  local work="$CACHE_ROOT/tools/modules/$name-$version" gomod start=$SECONDS
  log "building $name $version (first time: a few minutes)"
  rm -rf "$work" && mkdir -p "$work" "$(dirname "$out")"
  gomod=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$modver" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  {
    echo "module phalanxtool"
    echo
    grep -E '^go [0-9]' "$gomod" | head -n1
    echo
    echo "require $module $version"
    echo
    grep -E '^replace ' "$gomod" || true
  } >"$work/go.mod"
  (cd "$work" && GOFLAGS=-mod=mod go get "$pkg@$version")
  if [[ $kube == helm-kube-version ]]; then
    local client_go major minor
    client_go=$(cd "$work" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/client-go)
    IFS=. read -r major minor _ <<<"${client_go#v}"
    major=$((major + 1))
    log "$name: default Kubernetes version v$major.$minor (client-go $client_go)"
    for var in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
      ldflags+=" -X $var.k8sVersionMajor=$major -X $var.k8sVersionMinor=$minor"
    done
  fi
  (cd "$work" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w $ldflags" \
    -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  log "built $name in $((SECONDS - start)) s"
}

# The recipe's revision: bump it when the way helm or helm-unittest is built changes, so that
# cached binaries built the old way are rebuilt.
HELM_RECIPE=2

build_helm() {
  local out="$BIN_DIR/helm-$HELM_VERSION" stamp="$BIN_DIR/.helm-$HELM_VERSION.recipe"
  if [[ -x $out && -f $stamp && $(cat "$stamp") == "$HELM_RECIPE" ]]; then
    log "helm $HELM_VERSION: cached"
  else
    go_build helm "helm.sh/helm/v3@$HELM_VERSION" helm.sh/helm/v3/cmd/helm "$out" \
      "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" helm-kube-version
    echo "$HELM_RECIPE" >"$stamp"
  fi
  ln -sf "helm-$HELM_VERSION" "$BIN_DIR/helm"
}

# helm-unittest is a helm plugin: a folder with plugin.yaml (from the module) and its binary.
build_helm_unittest() {
  local dir="$PLUGINS_DIR/helm-unittest"
  if [[ -x $dir/untt && -f $dir/.version && $(cat "$dir/.version") == "$UNITTEST_VERSION $HELM_RECIPE" ]]; then
    log "helm-unittest $UNITTEST_VERSION: cached"
    return
  fi
  go_build helm-unittest "github.com/helm-unittest/helm-unittest@$UNITTEST_VERSION" \
    github.com/helm-unittest/helm-unittest/cmd/helm-unittest "$dir/untt" \
    "-X github.com/helm-unittest/helm-unittest/internal/build.version=$UNITTEST_VERSION" \
    helm-kube-version
  # The published plugin.yaml runs install hooks that download a release; ours is built, so the
  # manifest only names the binary.
  cat >"$dir/plugin.yaml" <<EOF
name: unittest
version: ${UNITTEST_VERSION#v}
usage: unittest for helm charts
description: Unit tests for helm charts in YAML (built from source by tests/tools/cluster-tools.sh).
ignoreFlags: false
command: \$HELM_PLUGIN_DIR/untt
EOF
  echo "$UNITTEST_VERSION $HELM_RECIPE" >"$dir/.version"
}

build_kind() {
  if [[ -x $BIN_DIR/kind-$KIND_VERSION ]]; then
    log "kind $KIND_VERSION: cached"
  else
    go_build kind "sigs.k8s.io/kind@$KIND_VERSION" sigs.k8s.io/kind "$BIN_DIR/kind-$KIND_VERSION"
  fi
  ln -sf "kind-$KIND_VERSION" "$BIN_DIR/kind"
}

build_coredns() {
  if [[ -x $BIN_DIR/coredns-$COREDNS_VERSION ]]; then
    log "coredns $COREDNS_VERSION: cached"
    return
  fi
  go_build coredns "github.com/coredns/coredns@$COREDNS_VERSION" github.com/coredns/coredns \
    "$BIN_DIR/coredns-$COREDNS_VERSION"
}

build_kwok() {
  if [[ -x $BIN_DIR/kwok-$KWOK_VERSION ]]; then
    log "kwok $KWOK_VERSION: cached"
  else
    go_build kwok "sigs.k8s.io/kwok@$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok \
      "$BIN_DIR/kwok-$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  fi
  ln -sf "kwok-$KWOK_VERSION" "$BIN_DIR/kwok"
}

# Kubeflow's training operator (v1: PyTorchJob and the others), and its CRDs beside it
# (`training-operator-crds-VERSION/`, from the module's manifests).
build_training_operator() {
  local out="$BIN_DIR/training-operator-$TRAINING_OPERATOR_VERSION"
  local crds="$BIN_DIR/training-operator-crds-$TRAINING_OPERATOR_VERSION" module dir
  if [[ -x $out && -d $crds ]]; then
    log "training-operator $TRAINING_OPERATOR_VERSION: cached"
  else
    module=github.com/kubeflow/training-operator
    go_build training-operator "$module@$TRAINING_OPERATOR_VERSION" \
      "$module/cmd/training-operator.v1" "$out"
    dir=$(cd "$CACHE_ROOT/tools/modules/training-operator-$TRAINING_OPERATOR_VERSION" \
      && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$module")
    rm -rf "$crds.tmp" && mkdir -p "$crds.tmp"
    cp "$dir"/manifests/base/crds/*.yaml "$crds.tmp/" && chmod u+w "$crds.tmp"/*.yaml
    mv "$crds.tmp" "$crds"
  fi
  ln -sf "training-operator-$TRAINING_OPERATOR_VERSION" "$BIN_DIR/training-operator"
  ln -sfn "training-operator-crds-$TRAINING_OPERATOR_VERSION" "$BIN_DIR/training-operator-crds"
}

# Kueue's controller manager (`kueue-VERSION`) and its manifests (`kueue-config-VERSION/`: the
# module's config/, kustomized by tests/tools/kind.sh kueue), for the kind suite's Kueue cases.
build_kueue() {
  local out="$BIN_DIR/kueue-$KUEUE_VERSION"
  local config="$BIN_DIR/kueue-config-$KUEUE_VERSION" module=sigs.k8s.io/kueue dir
  if [[ -x $out && -d $config ]]; then
    log "kueue $KUEUE_VERSION: cached"
  else
    go_build kueue "$module@$KUEUE_VERSION" "$module/cmd/kueue" "$out"
    dir=$(cd "$CACHE_ROOT/tools/modules/kueue-$KUEUE_VERSION" \
      && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$module")
    rm -rf "$config.tmp" && cp -r "$dir/config" "$config.tmp" && chmod -R u+w "$config.tmp"
    mv "$config.tmp" "$config"
  fi
  ln -sf "kueue-$KUEUE_VERSION" "$BIN_DIR/kueue"
  ln -sfn "kueue-config-$KUEUE_VERSION" "$BIN_DIR/kueue-config"
}

# TEST-ONLY: kube-scheduler of the pinned Kubernetes with a minimal coscheduling plugin
# (tests/tools/gang-scheduler/main.go; scheduler-plugins and Volcano are not on the Go proxy), for
# the kind suite's gang cases; built in k8s-binaries.sh's module, keyed by the source's hash.
build_gang_scheduler() {
  local src="$HERE/gang-scheduler/main.go" hash out work start=$SECONDS
  hash=$(sha256sum "$src" | cut -c1-12)
  out="$BIN_DIR/gang-scheduler-$K8S_VERSION-$hash"
  if [[ -x $out ]]; then
    log "gang-scheduler $K8S_VERSION ($hash): cached"
  else
    bash "$HERE/k8s-binaries.sh" kube-scheduler >/dev/null  # its module, with the replaces
    work="$CACHE_ROOT/tools/modules/gang-scheduler-$K8S_VERSION"
    log "building gang-scheduler $K8S_VERSION (first time: a few minutes)"
    rm -rf "$work" && mkdir -p "$work" "$BIN_DIR"
    sed 's/^module .*/module phalanxgangscheduler/' "$CACHE_ROOT/k8s/$K8S_VERSION/module/go.mod" \
      >"$work/go.mod"
    cp "$CACHE_ROOT/k8s/$K8S_VERSION/module/go.sum" "$src" "$work/"
    (cd "$work" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$out.tmp" .)
    mv "$out.tmp" "$out"
    log "built gang-scheduler in $((SECONDS - start)) s"
  fi
  ln -sf "$(basename "$out")" "$BIN_DIR/gang-scheduler"
}

build_versitygw() {
  if [[ -x $BIN_DIR/versitygw-$VERSITYGW_VERSION ]]; then
    log "versitygw $VERSITYGW_VERSION: cached"
  else
    go_build versitygw "github.com/versity/versitygw@$VERSITYGW_VERSION" \
      github.com/versity/versitygw/cmd/versitygw "$BIN_DIR/versitygw-$VERSITYGW_VERSION"
  fi
  ln -sf "versitygw-$VERSITYGW_VERSION" "$BIN_DIR/versitygw"
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(helm helm-unittest kind)
for t in "${targets[@]}"; do
  case $t in
    helm) build_helm ;;
    helm-unittest) build_helm_unittest ;;
    kind) build_kind ;;
    coredns) build_coredns ;;
    kwok) build_kwok ;;
    training-operator) build_training_operator ;;
    kueue) build_kueue ;;
    gang-scheduler) build_gang_scheduler ;;
    versitygw) build_versitygw ;;
    *) log "unknown tool: $t (known: helm helm-unittest kind coredns kwok training-operator kueue gang-scheduler versitygw)"; exit 2 ;;
  esac
done
echo "$BIN_DIR"
