"""What every training script shares: layered config (defaults -> YAML -> `key.sub=value` overrides)
and the git SHA recorded beside a run's outputs."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: nested dicts merge, everything else replaces."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = (
            merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def resolve_config(defaults: dict[str, Any], path: Path | None, overrides: list[str]) -> dict[str, Any]:
    """defaults -> YAML -> `key.sub=value` overrides (values parsed as YAML, so numbers and lists work)."""
    config = merge(defaults, (yaml.safe_load(path.read_text()) or {}) if path else {})
    for item in overrides:
        key, _, raw = item.partition("=")
        node = config
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(raw)
    return config


def git_sha() -> str:
    """HEAD, marked dirty when the tree has changes (the weights may come from uncommitted code)."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True
        ).stdout
        if not sha:  # a copied tree without .git (a rented GPU box): the caller may say which commit
            return os.environ.get("CARDCAT_GIT_SHA", "unknown")
        return sha + ("-dirty" if dirty.strip() else "")
    except OSError:
        return "unknown"
