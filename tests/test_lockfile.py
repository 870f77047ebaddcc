"""The locks agree with pyproject.toml and clients/python/pyproject.toml (issue 45, item 13; #46 item 6).

`.ci/setup` installs exactly what requirements.lock pins (`pip install --require-hashes`) and then the two
projects without their dependencies; `.ci/test-tools` adds requirements-dev.lock (the same pins and the
dev extra). A dependency added to or changed in a pyproject.toml without `bash .ci/lock` would silently
not be installed (or installed at a version its range refuses). a73d9a9 had no lock at all:
`pip install -e '.[dev]'` took whatever PyPI served that day, unchecked. Until #46 the one lock held the
dev extra too, so a user's set-up installed the test tooling.
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
DEV_LOCK = REPO / "requirements-dev.lock"
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


def requirements(pyproject: Path, *, dev: bool) -> list[Requirement]:
    """The project's dependencies, with its dev extra when `dev`."""
    project = tomllib.loads(pyproject.read_text())["project"]
    listed = project.get("dependencies", [])
    if dev:
        listed = [*listed, *project.get("optional-dependencies", {}).get("dev", [])]
    return [Requirement(line) for line in listed]


def test_both_locks_were_compiled_from_these_dependency_lists() -> None:
    """The stamp in each lock's header is the sha256 of both pyproject.toml's dependency lists: any
    change to them (a new package, a new range, a new extra) fails here until `bash .ci/lock` runs."""
    lockfile = lockfile_module()
    for lock in (LOCK, DEV_LOCK):
        assert lockfile.stamped(lock) == lockfile.digest(REPO), (
            f"pyproject.toml's dependencies changed since {lock.name} was written: run `bash .ci/lock`"
        )


def test_every_dependency_is_pinned_in_range_with_hashes() -> None:
    for lock, dev in ((LOCK, False), (DEV_LOCK, True)):
        text = lock.read_text()
        pinned = pins(text)
        for name in lockfile_module().INPUTS:
            for requirement in requirements(REPO / name, dev=dev):
                key = canonicalize_name(requirement.name)
                assert key in pinned, f"{requirement} ({name}) is not in {lock.name}: run `bash .ci/lock`"
                assert requirement.specifier.contains(pinned[key], prereleases=True), (
                    f"{lock.name} pins {key}=={pinned[key]}, outside {requirement} ({name})"
                )
        # Every pin carries its hashes (pip's --require-hashes refuses the whole file otherwise).
        for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
            if PIN.match(entry):
                assert "--hash=sha256:" in entry, f"{lock.name}: {entry.splitlines()[0]}"


def test_the_dev_lock_adds_packages_and_moves_none() -> None:
    """test-tools installs the dev lock over setup's .venv: a pin that differed would replace a package
    the service was set up with, and the tests would run on something a user never gets."""
    service, dev = pins(LOCK.read_text()), pins(DEV_LOCK.read_text())
    moved = {name: (pin, dev.get(name)) for name, pin in service.items() if dev.get(name) != pin}
    assert not moved, f"requirements-dev.lock disagrees with requirements.lock: {moved}"


def test_the_service_lock_holds_no_test_tooling() -> None:
    """A user's set-up (and the image) installs requirements.lock alone: no pytest, mypy or browser driver."""
    service = pins(LOCK.read_text())
    runtime = {
        canonicalize_name(r.name)
        for name in lockfile_module().INPUTS
        for r in requirements(REPO / name, dev=False)
    }
    tooling = {canonicalize_name(r.name) for r in requirements(REPO / "pyproject.toml", dev=True)} - runtime
    assert tooling and not tooling & set(service), (
        f"test tooling in requirements.lock: {sorted(tooling & set(service))}"
    )


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


def test_setup_installs_the_service_lock_and_test_tools_the_dev_lock_with_hashes() -> None:
    setup = (REPO / ".ci" / "setup").read_text()
    assert re.search(r"pip install .*--require-hashes -r requirements\.lock", setup)
    assert re.search(r"pip install .*--no-deps -e \.", setup)
    assert "-e '.[dev]'" not in setup
    assert not re.search(r"pip install .*requirements-dev\.lock", setup), (
        "a user's set-up installs no test tooling"
    )
    tools = (REPO / ".ci" / "test-tools").read_text()
    assert re.search(r"pip install .*--require-hashes -r requirements-dev\.lock", tools)
