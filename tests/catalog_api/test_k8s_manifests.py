"""deploy/k8s and the Dockerfile, parsed (every document of every file) and held to issue 45's rules.

Issue 17 (rows 5 and 10): secrets come from a Secret, the Ray dashboard is not open. Issue 45:
- item 6: the dashboard requires Ray's token and only the KubeRay operator's pods *in the operator's
  namespace* reach it (a73d9a9 admitted that label from any namespace); Serve's unauthenticated proxy
  takes scans from the API pods only.
- item 7: the metrics port is in no Service and only the monitoring namespace's Prometheus reaches it.
- item 1: the ingress believes X-Forwarded-For from the controller's pod range (a73d9a9 shipped it
  commented out, so every anonymous client shared the controller's buckets), and what uvicorn then does
  with the header cannot be steered by a client (tested over real HTTP below).
- item 12: every pod and container locked down (non-root, read-only root filesystem, no privilege
  escalation, no capabilities, the runtime's seccomp profile), images pinned by digest, memory limits,
  Redis with a password the ingress's URL carries, a NetworkPolicy for the API pods, a multi-stage
  non-root Dockerfile that bakes in neither the weights nor the data dir.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from cardcat.stack import REPO, Service, free_port, unavailable

K8S = REPO / "deploy" / "k8s"
MANIFESTS = sorted(K8S.glob("*.yaml"))
DIGEST = re.compile(r"^[a-z0-9.\-/:]+@sha256:[0-9a-f]{64}$")
OPERATOR = {"app.kubernetes.io/name": "kuberay-operator"}
API = {"app": "cardcat-api"}
SCANNER = {"app": "cardcat-scanner"}


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def every_document() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, doc) for path in MANIFESTS for doc in documents(path.name)]


def pod_specs(node: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec anywhere in a document: Deployment templates, RayService head and worker groups."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield node
        for value in node.values():
            yield from pod_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from pod_specs(value)


def all_pods() -> list[tuple[str, dict[str, Any]]]:
    pods = [
        (f"{name}:{doc['metadata']['name']}", spec)
        for name, doc in every_document()
        for spec in pod_specs(doc)
    ]
    assert len(pods) >= 4, "the API, Redis, and the Ray head and workers"
    return pods


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def policies() -> list[dict[str, Any]]:
    return [doc for _, doc in every_document() if doc["kind"] == "NetworkPolicy"]


def rules_for(labels: dict[str, str], port: int) -> list[list[dict[str, Any]]]:
    """The `from` lists of every rule that admits traffic to `port` of pods with `labels`."""
    found = []
    guarding = [p for p in policies() if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
    assert guarding, f"no NetworkPolicy selects {labels}"
    for policy in guarding:
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        for rule in policy["spec"]["ingress"]:
            ports = {p["port"] for p in rule.get("ports", [])}
            if not ports or port in ports:
                found.append(rule["from"])
    return found


def deployment(name: str) -> dict[str, Any]:
    (found,) = [d for _, d in every_document() if d["kind"] == "Deployment" and d["metadata"]["name"] == name]
    return found


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def api_container() -> dict[str, Any]:
    (container,) = deployment("cardcat-api")["spec"]["template"]["spec"]["containers"]
    return container


def test_the_ingress_takes_both_signing_secrets_from_a_secret() -> None:
    env = env_of(api_container())
    for name in ("CARDCAT_CURSOR_SECRET", "CARDCAT_FILE_SECRET"):
        assert "secretKeyRef" in env[name]["valueFrom"], name


def test_every_pod_and_container_is_locked_down() -> None:
    """Item 12: a73d9a9's pods ran as the image's user (root) with a writable root filesystem."""
    for where, spec in all_pods():
        pod = spec.get("securityContext", {})
        assert spec.get("hostNetwork") is not True and spec.get("hostPID") is not True, where
        for container in containers(spec):
            context = container.get("securityContext", {})
            name = f"{where}/{container['name']}"
            assert context.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, name
            assert context.get("runAsUser", pod.get("runAsUser", 1)) != 0, name
            assert context.get("readOnlyRootFilesystem") is True, name
            assert context.get("allowPrivilegeEscalation") is False, name
            assert context.get("privileged", False) is False, name
            assert context.get("capabilities", {}).get("drop") == ["ALL"], name
            assert not context.get("capabilities", {}).get("add"), name
            seccomp = context.get("seccompProfile", pod.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", name


def test_ray_pods_get_a_writable_tmp() -> None:
    """Ray writes its sessions, logs and sockets under /tmp: with a read-only root it needs a volume."""
    (rayservice,) = documents("rayservice.yaml")
    cluster = rayservice["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        spec = group["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        for container in spec["containers"]:
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert "emptyDir" in volumes[mounts["/tmp"]], container["name"]


def test_the_ray_cluster_never_spills_photos_to_disk() -> None:
    """Issue 45, item 11: on a73d9a9 the RayService left Ray's object spilling on, so photos passed to
    the replicas could be written to the nodes' disks under load."""
    import json

    (rayservice,) = documents("rayservice.yaml")
    params = rayservice["spec"]["rayClusterConfig"]["headGroupSpec"]["rayStartParams"]
    assert json.loads(params["system-config"])["automatic_object_spilling_enabled"] is False


def test_every_image_is_pinned_by_digest() -> None:
    """Item 12: a73d9a9 ran `registry.example/cardcat:latest`, which a push could change under it."""
    for where, spec in all_pods():
        for container in containers(spec):
            image = container["image"]
            assert DIGEST.fullmatch(image), f"{where}/{container['name']}: {image} is not pinned by digest"
            assert ":latest" not in image, image


def test_every_container_has_a_memory_limit() -> None:
    """Item 12: a73d9a9's API pods had requests only, so one could grow until the node ran out."""
    for where, spec in all_pods():
        for container in containers(spec):
            resources = container.get("resources", {})
            assert resources.get("limits", {}).get("memory"), f"{where}/{container['name']}"
            assert resources.get("requests", {}).get("memory"), f"{where}/{container['name']}"


def test_redis_requires_the_password_the_ingress_url_carries() -> None:
    """Item 12: a73d9a9 pointed the ingress at `redis://cardcat-redis:6379/0`, with no password."""
    (redis_container,) = deployment("cardcat-redis")["spec"]["template"]["spec"]["containers"]
    args = [*redis_container.get("command", []), *redis_container.get("args", [])]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    password = env_of(redis_container)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]

    env = list(api_container()["env"])
    names = [e["name"] for e in env]
    assert env[names.index("REDIS_PASSWORD")]["valueFrom"]["secretKeyRef"] == password
    url = env[names.index("CARDCAT_REDIS_URL")]["value"]
    assert url.startswith("redis://:$(REDIS_PASSWORD)@cardcat-redis:6379/"), url
    # Kubernetes expands $(VAR) only from variables listed before the one that uses it.
    assert names.index("REDIS_PASSWORD") < names.index("CARDCAT_REDIS_URL")
    (rule,) = rules_for({"app": "cardcat-redis"}, 6379)
    assert rule == [{"podSelector": {"matchLabels": API}}]


def test_only_the_ingress_controller_and_prometheus_reach_the_api_pods() -> None:
    """Item 12 and item 7: a73d9a9 had no policy for the API pods (any pod could call them, metrics too)."""
    (to_api,) = rules_for(API, 8000)
    assert to_api == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
    ]
    (to_metrics,) = rules_for(API, 9100)
    (source,) = to_metrics
    assert source["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    assert source["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}


def test_the_metrics_port_is_in_no_service() -> None:
    """Item 7: the ingress controller routes to Services; the metrics port must be in none of them."""
    container = api_container()
    metrics = int(env_of(container)["CARDCAT_METRICS_PORT"]["value"])
    names = {p["name"] for p in container["ports"] if p["containerPort"] == metrics}
    assert metrics and names, "the metrics port is declared, on its own port"
    assert metrics != 8000
    for _, doc in every_document():
        if doc["kind"] != "Service" or doc["spec"]["selector"].items() > API.items():
            continue
        for port in doc["spec"]["ports"]:
            assert port["targetPort"] not in names | {metrics} and port["port"] != metrics, doc


def test_only_the_kuberay_operator_in_its_namespace_reaches_the_token_guarded_dashboard() -> None:
    """Item 6: a73d9a9 admitted the operator's label from *any* namespace (`namespaceSelector: {}`) to a
    dashboard without Ray's token authentication."""
    (rayservice,) = documents("rayservice.yaml")
    cluster = rayservice["spec"]["rayClusterConfig"]
    assert cluster["authOptions"]["mode"] == "token"
    head = cluster["headGroupSpec"]
    assert head["template"]["metadata"]["labels"] == SCANNER
    for sources in rules_for(SCANNER, 8265):
        for source in sources:
            if source == {"podSelector": {"matchLabels": SCANNER}}:
                continue  # the Ray cluster's own pods
            assert source["podSelector"] == {"matchLabels": OPERATOR}, source
            namespace = source["namespaceSelector"]["matchLabels"]  # in the same element: both must match
            assert (
                set(namespace) == {"kubernetes.io/metadata.name"} and namespace["kubernetes.io/metadata.name"]
            )
            assert "ipBlock" not in source


def test_only_the_api_pods_reach_serves_unauthenticated_proxy() -> None:
    """Item 6: Serve's HTTP proxy (`POST /scan`) skips keys and rate limits: only the API pods, in this
    namespace (a podSelector alone), may reach it."""
    for sources in rules_for(SCANNER, 8000):
        for source in sources:
            assert source in (
                {"podSelector": {"matchLabels": API}},
                {"podSelector": {"matchLabels": SCANNER}},
            )
    env = env_of(api_container())
    assert env["CARDCAT_SCAN_URL"]["value"] == "http://cardcat-scanner-serve-svc:8000/scan"


def forwarded_allow_ips() -> str:
    value: str = env_of(api_container())["CARDCAT_FORWARDED_ALLOW_IPS"]["value"]
    return value


def test_the_ingress_believes_forwarded_for_from_the_controller_only() -> None:
    """Item 1: a73d9a9 shipped CARDCAT_FORWARDED_ALLOW_IPS commented out, so behind the controller every
    anonymous client shared the controller pods' buckets. "*" would let any client pick its bucket."""
    value = forwarded_allow_ips()
    networks = [ipaddress.ip_network(part.strip()) for part in value.split(",")]
    assert networks and all(n.is_private and n.prefixlen >= 8 for n in networks), value


def anonymous(base_url: str, forwarded_for: str) -> tuple[int, int]:
    """An anonymous request's (remaining, seconds to reset) in the bucket the server counted it in."""
    response = httpx.get(f"{base_url}/v1/series", headers={"X-Forwarded-For": forwarded_for})
    assert response.status_code == 401, response.text
    match = re.fullmatch(r"limit=\d+, remaining=(\d+), reset=(\d+)", response.headers["RateLimit"])
    assert match, response.headers["RateLimit"]
    return int(match.group(1)), int(match.group(2))


def test_a_client_cannot_pick_its_bucket_by_prepending_addresses(fresh: Any, feed_dir: Path) -> None:
    """Item 1, over real HTTP: with the manifest's trusted range (plus 127.0.0.1, this test's stand-in
    for the controller) uvicorn counts each request against the right-most address that is not a trusted
    proxy, the one the controller appended, whatever the client put before it. Fails on a73d9a9's
    manifest (no setting: KeyError). ("*", which the test above refuses, would make uvicorn take the
    left-most address, the client's own choice.)"""
    svc: Service = fresh("sqlite", feed_dir)
    inner_hop = str(next(ipaddress.ip_network(forwarded_allow_ips().split(",")[0].strip()).hosts()))
    base = svc.start(CARDCAT_FORWARDED_ALLOW_IPS=f"127.0.0.1,{forwarded_allow_ips()}")
    for _ in range(3):  # the requests must fall in one rate-limit window (a new one starts afresh)
        # A spoofed address, then the real one the controller appended; then through a second proxy.
        counts = [anonymous(base, f"198.51.100.{i}, 203.0.113.9") for i in range(1, 4)]
        counts.append(anonymous(base, f"198.51.100.77, 203.0.113.9, {inner_hop}"))
        if counts[0][1] >= counts[-1][1]:
            break
    seen = [remaining for remaining, _ in counts]
    assert seen == [seen[0], seen[0] - 1, seen[0] - 2, seen[0] - 3], f"one bucket for 203.0.113.9: {seen}"
    other, _ = anonymous(base, "198.51.100.1, 203.0.113.10")
    assert other > seen[-1], "another real client has a bucket of its own"


@pytest.fixture
def password_redis(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A real redis-server that requires a password, on a free loopback port."""
    server = shutil.which("redis-server")
    if server is None:
        unavailable("redis-server is not installed")
    assert server is not None
    port, password = free_port(), "s3cret-" + "x" * 24
    options = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    command = [server, "--port", str(port), "--requirepass", password, *options]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port, password=password)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield port, password
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_rate_limiter_counts_in_a_redis_that_requires_a_password(
    fresh: Any, feed_dir: Path, password_redis: tuple[int, str]
) -> None:
    """Item 12: the manifests' URL form `redis://:<password>@host:6379/0` authenticates: the server's
    counts land in the password-protected Redis (not in the in-process fallback), and without the
    password that Redis refuses the same client."""
    port, password = password_redis
    svc: Service = fresh("sqlite", feed_dir, CARDCAT_REDIS_URL=f"redis://:{password}@127.0.0.1:{port}/0")
    with svc.client(svc.key) as client:
        for _ in range(3):
            assert client.get("/v1/series", params={"limit": 1}).status_code == 200
    log = (svc.data_dir.parent / f"server-{svc.base_url.rsplit(':', 1)[1]}.log").read_text()
    assert "Redis unavailable" not in log
    keys = redis.Redis(port=port, password=password).keys("*")
    assert keys, "the rate limiter counted in the password-protected Redis"
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=port).keys("*")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the repository's Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_dockerfile_builds_in_two_stages_and_runs_as_a_numeric_non_root_user() -> None:
    """Item 12: a73d9a9 had no Dockerfile for the image its manifests named."""
    instructions = dockerfile_instructions()
    stages = [i for i, (op, _) in enumerate(instructions) if op == "FROM"]
    assert len(stages) >= 2, "a build stage and a runtime stage"
    final = instructions[stages[-1] :]
    users = [args for op, args in final if op == "USER"]
    assert users, "the runtime stage names a user"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, f"runAsNonRoot can only verify a numeric user: {users[-1]}"
    runs = " ".join(args for op, args in instructions if op == "RUN")
    assert "--require-hashes" in runs and "requirements.lock" in runs, "installs what the lock pins"


def test_the_image_bakes_in_neither_the_weights_nor_the_data_dir() -> None:
    """Item 12: the models' weights and the index are mounted at run time (the data volume)."""
    for op, args in dockerfile_instructions():
        if op not in ("COPY", "ADD"):
            continue
        sources = [a for a in args.split() if not a.startswith("--")][:-1]
        for source in sources:
            path = source.strip('"').rstrip("/")
            assert path not in (".", "models", "var") and not path.startswith(("models/weights", "var/")), (
                args
            )
    ignored = {line.strip().rstrip("/") for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {"models/weights", "var", ".venv", ".git"} <= ignored
