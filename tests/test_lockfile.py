"""requirements.lock agrees with pyproject.toml and clients/python/pyproject.toml (issue 45, item 13).

`.ci/setup` installs exactly what the lock pins (`pip install --require-hashes -r requirements.lock`) and
then the two projects without their dependencies, so a dependency added to or changed in a pyproject.toml
without `bash .ci/lock` would silently not be installed (or installed at a version its range refuses).
a73d9a9 had no lock at all: `pip install -e '.[dev]'` took whatever PyPI served that day, unchecked.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cardcat.stack import REPO

LOCK = REPO / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def lockfile_module() -> ModuleType:
    """.ci/lockfile.py, the one place the stamp is computed (it runs before any venv exists)."""
    spec = importlib.util.spec_from_file_location("ci_lockfile", REPO / ".ci" / "lockfile.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pins(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        match = PIN.match(line)
        if match:
            found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def requirements(pyproject: Path) -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text())["project"]
    listed = [*project.get("dependencies", []), *project.get("optional-dependencies", {}).get("dev", [])]
    return [Requirement(line) for line in listed]


def test_the_lock_was_compiled_from_these_dependency_lists() -> None:
    """The stamp in the lock's header is the sha256 of both pyproject.toml's dependency lists: any
    change to them (a new package, a new range, a new extra) fails here until `bash .ci/lock` runs."""
    lockfile = lockfile_module()
    assert lockfile.stamped(LOCK) == lockfile.digest(REPO), (
        "pyproject.toml's dependencies changed since requirements.lock was written: run `bash .ci/lock`"
    )


def test_every_dependency_is_pinned_in_range_with_hashes() -> None:
    text = LOCK.read_text()
    pinned = pins(text)
    for name in lockfile_module().INPUTS:
        for requirement in requirements(REPO / name):
            key = canonicalize_name(requirement.name)
            assert key in pinned, f"{requirement} ({name}) is not in requirements.lock: run `bash .ci/lock`"
            assert requirement.specifier.contains(pinned[key], prereleases=True), (
                f"requirements.lock pins {key}=={pinned[key]}, outside {requirement} ({name})"
            )
    # Every pin carries its hashes (pip's --require-hashes refuses the whole file otherwise).
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        if PIN.match(entry):
            assert "--hash=sha256:" in entry, entry.splitlines()[0]


def test_the_stamp_changes_with_a_dependency(tmp_path: Path) -> None:
    """The check above can fail: a copy of the inputs with one range changed stamps differently."""
    lockfile = lockfile_module()
    for name in lockfile.INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((REPO / name).read_text())
    before = lockfile.digest(tmp_path)
    pyproject = tmp_path / "pyproject.toml"
    original = pyproject.read_text()
    assert original.count("dependencies = [\n") == 1
    pyproject.write_text(original.replace("dependencies = [\n", 'dependencies = [\n    "six>=1",\n'))
    assert lockfile.digest(tmp_path) != before
    # Comments and layout do not count: only the lists themselves.
    pyproject.write_text(original.replace("dependencies = [\n", "dependencies = [  # a note\n") + "\n")
    assert lockfile.digest(tmp_path) == before


def test_ci_setup_installs_from_the_lock_with_hashes() -> None:
    setup = (REPO / ".ci" / "setup").read_text()
    assert re.search(r"pip install .*--require-hashes -r requirements\.lock", setup)
    assert re.search(r"pip install .*--no-deps -e \.", setup)
    assert "-e '.[dev]'" not in setup, "the dev extra's packages come from the lock"
