#!/usr/bin/env bash
# Validates the Kubernetes manifests offline: kubernetes-validate (Kubernetes' schemas, bundled
# in the package) and jsonschema (schemas/ for the Inference Extension objects), in a venv
# cached outside the repository. Usage: deploy/kubernetes/validate.sh [path/to/ferrite]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/ferrite/venv-manifests"
if ! "$venv/bin/python" -c "import kubernetes_validate, jsonschema, yaml" 2>/dev/null; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q "kubernetes-validate==1.33.*" jsonschema pyyaml
fi
exec "$venv/bin/python" "$here/validate.py" "$@"
