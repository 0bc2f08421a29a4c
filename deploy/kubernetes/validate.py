"""Validates deploy/kubernetes/*.yaml offline (no cluster): core objects against Kubernetes'
own schemas (kubernetes-validate, strict: unknown fields fail), the Gateway API Inference
Extension and Gateway API objects against the JSON schemas in schemas/, then the wiring that
no schema sees: selectors match the pod labels, ports and probe paths are ferrite's, the
drain fits in the termination grace period, every flag is one `ferrite serve` knows."""

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
KUBERNETES_VERSION = "1.33.0"
SCHEMAS = {
    ("inference.networking.k8s.io/v1", "InferencePool"): "inferencepool-v1.json",
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"): "inferenceobjective-v1alpha2.json",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "httproute-v1.json",
}


def fail(message):
    print(f"FAIL {message}")
    sys.exit(1)


def validate_schema(doc, where):
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in SCHEMAS:
        schema = json.loads((HERE / "schemas" / SCHEMAS[key]).read_text())
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(doc))
        if errors:
            fail(f"{where}: " + "; ".join(f"{list(e.path)}: {e.message}" for e in errors))
        return
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        fail(f"{where}: {list(e.path)}: {e.message}")
    except Exception as e:  # an unknown kind: no schema to check it against is a failure
        fail(f"{where}: {e}")


def check_wiring(docs, ferrite_bin):
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    deployment = by_kind["Deployment"][0]
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    def selects(selector, what):
        if not all(labels.get(k) == v for k, v in selector.items()):
            fail(f"{what} selector {selector} does not match the pod labels {labels}")

    selects(deployment["spec"]["selector"]["matchLabels"], "Deployment")
    for svc in by_kind["Service"]:
        selects(svc["spec"]["selector"], f"Service {svc['metadata']['name']}")
    pool = by_kind["InferencePool"][0]
    selects(pool["spec"]["selector"]["matchLabels"], "InferencePool")
    if pool["spec"]["targetPorts"][0]["number"] != ports["http"]:
        fail("the InferencePool's target port is not the container's http port")
    for obj in by_kind["InferenceObjective"]:
        if obj["spec"]["poolRef"]["name"] != pool["metadata"]["name"]:
            fail(f"InferenceObjective {obj['metadata']['name']} names another pool")
    for route in by_kind["HTTPRoute"]:
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                if ref.get("kind") == "InferencePool" and ref["name"] != pool["metadata"]["name"]:
                    fail("the HTTPRoute routes to another pool")
    probes = {k: container[k]["httpGet"]["path"] for k in ["startupProbe", "livenessProbe", "readinessProbe"]}
    if probes != {"startupProbe": "/health", "livenessProbe": "/health", "readinessProbe": "/ready"}:
        fail(f"probes: {probes}")
    args = container["args"]
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    if float(flags.get("shutdown-timeout", 30)) >= grace:
        fail("--shutdown-timeout must be below terminationGracePeriodSeconds")
    if "kv-events-config" in flags:
        config = json.loads(flags["kv-events-config"])
        port = int(config["endpoint"].rsplit(":", 1)[1])
        if port != ports.get("kv-events"):
            fail("the KV-events endpoint port is not the container's kv-events port")
        if not config["topic"].startswith("kv@$(POD_IP)@"):
            fail("llm-d reads the pod from the topic kv@<pod>@<model>")
    if ferrite_bin:
        help_text = subprocess.run([ferrite_bin, "serve", "--help"], capture_output=True,
                                   text=True, check=True).stdout
        known = set(re.findall(r"--([a-z0-9-]+)", help_text))
        unknown = sorted(set(flags) - known)
        if unknown:
            fail(f"flags `ferrite serve` does not know: {unknown}")


def main():
    ferrite_bin = sys.argv[1] if len(sys.argv) > 1 else None
    files = sorted(HERE.glob("*.yaml"))
    if not files:
        fail("no manifests")
    count = 0
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for i, doc in enumerate(docs):
            validate_schema(doc, f"{path.name}#{i} {doc.get('kind')}")
            count += 1
        check_wiring(docs, ferrite_bin)
    print(f"{count} passed, 0 failed: Kubernetes manifests ({', '.join(p.name for p in files)})")


if __name__ == "__main__":
    main()
