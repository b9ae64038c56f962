#!/usr/bin/env bash
# The driver of `make run`: builds the manager and the local-cluster runner, then
# starts a control plane, the manager and node agents for three simulated nodes
# with the examples until Ctrl-C.
# The control-plane binaries come from `make controlplane`.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUTPUT:-$PWD/_output}"
go build -o "$out/bin/" ./cmd/manager ./hack/runlocal
exec "$out/bin/runlocal" --manager="$out/bin/manager" --data-dir="$out/run" "$@"
