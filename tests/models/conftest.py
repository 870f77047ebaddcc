"""Fixtures for the networks' contract tests: the shipped weights and the fixed reference inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.models.reference import REFERENCE, render_faces
from training.renders import SHARED

WEIGHTS = Path(__file__).resolve().parents[2] / "models" / "weights"


def require_weights(*names: str) -> None:
    missing = [n for n in names if not (WEIGHTS / n).exists()]
    if missing:
        pytest.skip(f"shipped weights absent: {missing}")


@pytest.fixture(scope="session")
def faces(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, np.ndarray]]:
    """The reference faces, rendered from ../shared's catalog (as the reference was)."""
    if not (SHARED / "catalog").exists():
        pytest.skip(f"{SHARED}/catalog absent: no real card faces")
    return render_faces(tmp_path_factory.mktemp("reference-faces"))


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text())
