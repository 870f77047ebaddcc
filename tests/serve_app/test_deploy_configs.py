"""The Ray Serve configs in deploy/ as Ray would schedule them: every replica fits the node it is meant for,
every batch can fill, the application arguments are ones `build_app` takes, and Ray's own config path
(`serve deploy`, `serve run CONFIG`) builds the application and finds every deployment the config
tunes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from serve_app.config import ScanConfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BATCHED = {"Detector", "Embedder", "Reader"}


def rayservice() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "k8s" / "rayservice.yaml").read_text())


def serve_configs() -> dict[str, tuple[dict[str, Any], dict[str, float]]]:
    """name -> (Serve config, the smallest node it must fit: CPUs and GPUs)."""
    cluster = rayservice()["spec"]
    worker = cluster["rayClusterConfig"]["workerGroupSpecs"][0]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    return {
        "cpu.yaml": (yaml.safe_load((DEPLOY / "serve" / "cpu.yaml").read_text()), {"cpu": 2, "gpu": 0}),
        "gpu.yaml": (yaml.safe_load((DEPLOY / "serve" / "gpu.yaml").read_text()), {"cpu": 16, "gpu": 1}),
        "rayservice.yaml": (
            yaml.safe_load(cluster["serveConfigV2"]),
            {"cpu": float(limits["cpu"]) * worker["minReplicas"], "gpu": worker["minReplicas"]},
        ),
    }


@pytest.mark.parametrize("name", ["cpu.yaml", "gpu.yaml", "rayservice.yaml"])
def test_serve_config_fits_its_node_and_fills_its_batches(name: str) -> None:
    config, node = serve_configs()[name]
    (app,) = config["applications"]
    assert app["import_path"] == "serve_app.app:build_app"
    ScanConfig(**app["args"])  # only fields build_app knows
    used = {"cpu": 0.0, "gpu": 0.0}
    for deployment in app["deployments"]:
        replicas = deployment.get("num_replicas") or deployment["autoscaling_config"]["min_replicas"]
        options = deployment["ray_actor_options"]
        used["cpu"] += replicas * options.get("num_cpus", 1)
        used["gpu"] += replicas * options.get("num_gpus", 0)
        if deployment["name"] in BATCHED:
            batch = deployment["user_config"]["max_batch_size"]
            assert deployment["max_ongoing_requests"] >= batch, f"{deployment['name']} never fills a batch"
    assert used["cpu"] <= node["cpu"] and used["gpu"] <= node["gpu"], (name, used, node)


@pytest.mark.parametrize("name", ["cpu.yaml", "gpu.yaml", "rayservice.yaml"])
def test_ray_builds_the_configs_application_and_finds_its_deployments(name: str) -> None:
    """What Ray's controller does with a config before any replica starts: parse it, call the import
    path's builder with the args (Ray refuses a builder of more than one parameter), and match the
    config's deployments by name. Until 2026-12-07 `build_app` took two, and `serve deploy` of every
    config here failed with "Application builder functions should take exactly one parameter"."""
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve._private.build_app import build_app as ray_build_app
    from ray.serve.handle import DeploymentHandle
    from ray.serve.schema import ServeDeploySchema

    from serve_app.app import build_app

    config, _ = serve_configs()[name]
    schema = ServeDeploySchema(**config)
    (app,) = schema.applications
    application = call_user_app_builder_with_args_if_necessary(build_app, app.args)
    built = ray_build_app(
        application, name=app.name, make_deployment_handle=lambda d, a: DeploymentHandle(d.name, a)
    )
    names = {d.name for d in built.deployments}
    assert {d.name for d in app.deployments} <= names, (names, [d.name for d in app.deployments])
    assert built.ingress_deployment_name == "ScanService"


LOOPBACK = {"127.0.0.1", "::1", "localhost"}


@pytest.mark.parametrize("name", ["cpu.yaml", "gpu.yaml"])
def test_serves_unauthenticated_proxy_is_on_loopback_or_off(name: str) -> None:
    """Issue 45, item 6: Serve's HTTP proxy has no authentication, so `POST /scan` there skips the API's
    keys and rate limits. a73d9a9's gpu.yaml put it on 0.0.0.0 of every node (proxy_location EveryNode);
    a config for `serve deploy` keeps it on loopback (one proxy, on the head) or runs none (the ingress
    calls the app by handle). On KubeRay (rayservice.yaml) the proxy must be on the pod network for its
    Service; there networkpolicy.yaml admits only the API pods (tests/catalog_api/test_k8s_manifests.py)."""
    config, _ = serve_configs()[name]
    location = config.get("proxy_location", "EveryNode")
    if location == "Disabled":
        return
    assert location == "HeadOnly", f"{name}: one proxy, on the head's loopback, not one on every node"
    assert config.get("http_options", {}).get("host", "127.0.0.1") in LOOPBACK, name
