#!/usr/bin/env bash
# Make sure a Docker engine answers, starting one if needed: kind's nodes are Docker containers.
#
# Why this is more than `dockerd &`: on some VMs (ours) the capability bounding set lacks
# CAP_SYS_RESOURCE, so every `--privileged` container (every kind node) fails with "unable to
# apply caps". When that capability is missing we register a tiny OCI runtime wrapper as the
# default runtime; it deletes CAP_SYS_RESOURCE from the container's spec and execs runc (see
# ../shared/machine.md, "kind, offline"). On a normal machine with Docker running, this script
# only checks `docker info` and exits.
#
# Usage: docker-engine.sh            (idempotent; needs root when it must install or start dockerd)
# Env:   PHALANX_DOCKER_LOG  dockerd's log file (default /var/log/phalanx-dockerd.log)
set -euo pipefail

log() { printf '[docker-engine] %s\n' "$*" >&2; }

if docker info >/dev/null 2>&1; then
  log "a Docker engine is running"
  exit 0
fi
[[ $(id -u) == 0 ]] || { log "no Docker engine answers, and starting one needs root"; exit 1; }

if ! command -v dockerd >/dev/null; then
  log "installing Debian's docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi

# Bit 24 of the bounding set is CAP_SYS_RESOURCE.
bounding=$(awk '/^CapBnd/ {print $2}' /proc/self/status)
if (( (16#$bounding >> 24 & 1) == 0 )); then
  wrapper=/usr/local/sbin/phalanx-runc
  log "CAP_SYS_RESOURCE is not in this machine's bounding set: runtime wrapper $wrapper"
  install -m 0755 "$(dirname "$0")/../e2e/kind/node/phalanx-runc" "$wrapper"
  mkdir -p /etc/docker
  cat >/etc/docker/daemon.json <<JSON
{
  "runtimes": {"phalanx-runc": {"path": "$wrapper"}},
  "default-runtime": "phalanx-runc"
}
JSON
fi

log "starting dockerd"
nohup dockerd >"${PHALANX_DOCKER_LOG:-/var/log/phalanx-dockerd.log}" 2>&1 &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && { log "dockerd is up"; exit 0; }
  sleep 1
done
log "dockerd did not answer within 60 s; see ${PHALANX_DOCKER_LOG:-/var/log/phalanx-dockerd.log}"
exit 1
