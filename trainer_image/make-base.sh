#!/usr/bin/env bash
# Make a minimal Debian bookworm base image without a registry: debootstrap into a folder, then
# `docker import` it. Needs root and a running Docker engine; installs debootstrap if missing.
set -euo pipefail
TAG=${1:-phalanx/debian:bookworm}
# The machine's own Debian mirror (one-line or deb822 sources), unless DEBIAN_MIRROR says otherwise.
MIRROR=${DEBIAN_MIRROR:-$( (awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null;
  awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null) | head -n1)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
if ! command -v debootstrap >/dev/null; then  # a fresh machine (CI's) has none
  echo "[make-base] installing Debian's debootstrap" >&2
  SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" "$MIRROR"
tar -C "$root" -c . | docker import - "$TAG"
echo "$TAG"
