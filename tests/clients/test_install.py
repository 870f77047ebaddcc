"""`pip install ./clients/python` into a fresh venv brings httpx and pydantic, and never the server's
heavy stack (torch, ray): installed for real from the package index (pip's `--report` lists what it
resolved), then imported by the venv's own Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cardcat.stack import REPO, unavailable

CLIENT = REPO / "clients" / "python"
FORBIDDEN = {"torch", "torchvision", "ray", "numpy", "faiss-cpu", "fastapi", "sqlalchemy", "cardcat"}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def test_installing_the_client_brings_neither_torch_nor_ray(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what the venv holds
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    report = tmp_path / "report.json"
    result = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--report",
            str(report),
            str(CLIENT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
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
    probe = "import cardcat_client, importlib.util as u, pathlib as p, sys; " + (
        "print(p.Path(cardcat_client.__file__).with_name('py.typed').exists(), "
        "[m for m in ('torch', 'ray', 'catalog_api') if u.find_spec(m)])"
    )
    imported = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert imported.stdout.strip() == "True []", imported.stdout + imported.stderr


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
