"""`pip install ./clients/python` into a fresh venv brings httpx and pydantic, and never the server's
heavy stack (torch, ray): resolved for real by pip against the package index (`--dry-run --report`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.harness import REPO, unavailable

CLIENT = REPO / "clients" / "python"
FORBIDDEN = {"torch", "torchvision", "ray", "numpy", "faiss-cpu", "fastapi", "sqlalchemy", "cardcat"}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def test_installing_the_client_resolves_without_torch_or_ray(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "--dry-run",
            "--quiet",
            "--disable-pip-version-check",
            "--report",
            str(report),
            str(CLIENT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0 and (
        "connection" in result.stderr.lower() or "network" in result.stderr.lower()
    ):
        unavailable(f"the package index is not reachable: {result.stderr[-500:]}")
    assert result.returncode == 0, result.stderr
    installs = json.loads(report.read_text())["install"]
    names = {_norm(item["metadata"]["name"]) for item in installs}
    client = next(
        item["metadata"] for item in installs if _norm(item["metadata"]["name"]) == "cardcat-client"
    )
    assert sorted(_norm(req.split(">")[0].split("=")[0]) for req in client["requires_dist"]) == [
        "httpx",
        "pydantic",
    ]
    assert {"httpx", "pydantic"} <= names
    assert not names & FORBIDDEN, f"installing the client would pull in {sorted(names & FORBIDDEN)}"
    assert len(names) < 20, f"the client's closure grew: {sorted(names)}"


def test_the_client_imports_nothing_of_the_server() -> None:
    """The package is self-contained: no import of catalog_api, serve_app, models or training."""
    import ast

    ours = {"catalog_api", "serve_app", "models", "training", "deploy", "tests"}
    for path in (CLIENT / "cardcat_client").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            roots = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for root in roots:
                assert root.split(".")[0] not in ours, f"{path.name} imports {root}"
    assert (CLIENT / "cardcat_client" / "py.typed").exists()
