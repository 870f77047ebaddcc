"""deploy/k8s (issue 17, rows 5 and 10): secrets come from a Secret, the Ray dashboard is not open.

The dashboard can run arbitrary code (its Jobs API). KubeRay needs it on the head service (it deploys
serveConfigV2 through the dashboard's REST API on port 8265), so it cannot listen on 127.0.0.1 only;
networkpolicy.yaml admits only the KubeRay operator to that port and only the ingress to Serve's.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.harness import REPO

K8S = REPO / "deploy" / "k8s"


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def test_the_ingress_takes_both_signing_secrets_from_a_secret() -> None:
    (deployment,) = [d for d in documents("ingress.yaml") if d["kind"] == "Deployment"]
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        env = {e["name"]: e for e in container.get("env", [])}
        for name in ("CARDCAT_CURSOR_SECRET", "CARDCAT_FILE_SECRET"):
            assert "secretKeyRef" in env[name]["valueFrom"], name
        assert "CARDCAT_FORWARDED_ALLOW_IPS" not in env or env["CARDCAT_FORWARDED_ALLOW_IPS"]["value"] != "*"


def test_only_the_kuberay_operator_reaches_the_ray_dashboard() -> None:
    (rayservice,) = documents("rayservice.yaml")
    head = rayservice["spec"]["rayClusterConfig"]["headGroupSpec"]
    labels = head["template"]["metadata"]["labels"]
    if head["rayStartParams"].get("dashboard-host", "127.0.0.1") == "127.0.0.1":
        return  # not reachable from outside the pod at all
    policies = [d for d in documents("networkpolicy.yaml") if d["kind"] == "NetworkPolicy"]
    guarding = [p for p in policies if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
    assert guarding, "a NetworkPolicy must select the Ray head pod"
    for policy in guarding:
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        for rule in policy["spec"]["ingress"]:
            ports = {p["port"] for p in rule.get("ports", [])}
            sources = rule["from"]
            if not ports:  # all ports: only the Ray cluster's own pods
                assert all(s.get("podSelector", {}).get("matchLabels") == labels for s in sources), rule
                assert not any("namespaceSelector" in s or "ipBlock" in s for s in sources), rule
            elif 8265 in ports:
                operator = {"app.kubernetes.io/name": "kuberay-operator"}
                assert all(s["podSelector"]["matchLabels"] == operator for s in sources), rule
