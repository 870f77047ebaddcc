"""The locks' stamp: the sha256 of the dependency lists they were compiled from.

`bash .ci/lock` compiles requirements.lock (the service) and requirements-dev.lock (the service and the
dev extra) from pyproject.toml and clients/python/pyproject.toml and then runs
`python3 .ci/lockfile.py stamp <lock>` on each, which writes this digest into the lock's header;
`.ci/test` runs `python3 .ci/lockfile.py check <lock>` on both first, and tests/test_lockfile.py
recomputes it too, so a dependency changed in either pyproject.toml without a new lock fails at once
instead of installing something other than what was reviewed. Standard library only (Python 3.11+): it
runs before any virtual environment exists.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What the lock is compiled from (`uv pip compile` inputs, in this order), relative to the checkout.
INPUTS = ("pyproject.toml", "clients/python/pyproject.toml")
STAMP = "# pyproject-sha256: "


def dependency_lists(pyproject: Path) -> dict[str, object]:
    """The parts of one pyproject.toml that decide what gets installed."""
    project = tomllib.loads(pyproject.read_text())["project"]
    return {
        "requires-python": project.get("requires-python", ""),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
    }


def digest(repo: Path = REPO) -> str:
    """sha256 of every input's dependency lists (comments and formatting do not count)."""
    lists = {name: dependency_lists(repo / name) for name in INPUTS}
    return hashlib.sha256(json.dumps(lists, sort_keys=True).encode()).hexdigest()


def stamped(lock: Path) -> str:
    """The digest the lock's header carries ("" when none)."""
    for line in lock.read_text().splitlines():
        if line.startswith(STAMP):
            return line.removeprefix(STAMP).split()[0]
        if not line.startswith("#"):
            break
    return ""


def stamp(lock: Path, repo: Path = REPO) -> None:
    """Writes (or replaces) the digest line at the end of the lock's leading comment block."""
    lines = [line for line in lock.read_text().splitlines() if not line.startswith(STAMP)]
    header = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    lines.insert(header, f"{STAMP}{digest(repo)}  (.ci/lockfile.py: {', '.join(INPUTS)})")
    lock.write_text("\n".join(lines) + "\n")


def check(lock: Path, repo: Path = REPO) -> None:
    """Exits non-zero, saying what to run, when the lock was not compiled from these lists."""
    if stamped(lock) != digest(repo):
        sys.exit(f"{lock.name} was not compiled from this pyproject.toml's dependencies: run `bash .ci/lock`")


if __name__ == "__main__":
    commands = {"stamp": stamp, "check": check}
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        sys.exit("usage: python3 .ci/lockfile.py stamp|check requirements.lock|requirements-dev.lock")
    commands[sys.argv[1]](Path(sys.argv[2]))
