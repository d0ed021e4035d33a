#!/usr/bin/env bash
# Validates the Kubernetes manifests (deploy/kubernetes/*.yaml) against the Kubernetes API's
# own schemas, strictly (a misspelt or misplaced field fails), with kubernetes-validate
# from PyPI, which carries the schemas of every Kubernetes release: no cluster, no network
# once installed. Installed once into a virtual environment under target/.
#
#   tests/kubernetes/validate.sh [-k VERSION]     (default: the oldest and newest releases
#                                                  the manifests claim, see VERSIONS)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${CARGO_TARGET_DIR:-$ROOT/target}/kubernetes-validate
PIN=kubernetes-validate==1.37.0
# The releases the manifests are written for: DaemonSet, Job, RBAC v1 and the
# securityContext fields they use exist unchanged from 1.27 on.
VERSIONS=(1.27.0 1.37.0)
[[ ${1:-} == -k ]] && VERSIONS=("$2")

if [[ ! -x $VENV/bin/kubernetes-validate ]]; then
    python3 -m venv "$VENV" ||
        { echo "validate: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 2; }
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "$PIN" ||
        { echo "validate: pip could not install $PIN (PyPI unreachable?)" >&2; exit 2; }
fi
for v in "${VERSIONS[@]}"; do
    "$VENV/bin/kubernetes-validate" --strict --quiet -k "$v" "$ROOT"/deploy/kubernetes/*.yaml
    echo "validate: deploy/kubernetes/*.yaml valid against Kubernetes $v (strict)"
done
