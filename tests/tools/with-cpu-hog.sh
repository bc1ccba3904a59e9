#!/usr/bin/env bash
# Run a command with one core kept busy beside it: a CI machine's noisy neighbour, or a build
# sharing the machine. `make test-stress` runs the local and trainer suites this way, so that a
# test that only passes on an idle machine (a timed assertion, a fault that races start-up)
# shows itself here, not in CI. The hog is a shell busy loop pinned to the last core (taskset,
# when there is one) and is killed however the command ends; the command's exit code is kept.
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

last_core=$(( $(nproc) - 1 ))
if command -v taskset >/dev/null; then
  taskset -c "$last_core" sh -c 'while :; do :; done' &
else
  sh -c 'while :; do :; done' &
fi
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT
echo "with-cpu-hog: core $last_core kept busy by pid $hog" >&2
"$@"
