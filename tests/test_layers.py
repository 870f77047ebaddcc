"""The import rule of the repository, checked from the source: no circles, and no arrow back down-up.

Layers, lowest first: `core` < `models` < {`catalog_api`, `serve_app`} < `training` < `deploy` <
`cardcat` < `benchmarks` < `tests`. A module may import its own package and the layers below it;
packages on one tier are siblings and import neither each other (the catalog API and the scanner meet
only in `core`, the typed scan contract, and in `cardcat`, the composition root, which starts both).
No package is exempt: the composition root is simply the top of the product, and `benchmarks` use the
local stack from it, never a module of `tests`. Inside `catalog_api`, the `kit/` imports no room.
Inside each package, its rooms (sub-packages and top modules: `catalog_api.catalog`,
`catalog_api.deps`) import each other without circles either, and the shared rooms (SHARED_ROOMS)
import no sibling room: a circle between rooms hides between modules that are each circle-free (a.x ->
b.y, b.z -> a.w). Every import counts, also those inside functions and under `if TYPE_CHECKING:`: a
deferred import hides a dependency, it does not remove it. Circles are broken by moving the shared
thing down (see docs/architecture.md), never by deferring an import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Each tier's packages; a package imports only its own and lower tiers'.
TIERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("models",),
    ("catalog_api", "serve_app"),
    ("training",),
    ("deploy",),
    ("cardcat",),
    ("benchmarks",),
    ("tests",),
)
LAYERS = tuple(package for tier in TIERS for package in tier)
# Rooms every sibling may lean on, which therefore lean on no sibling.
SHARED_ROOMS = ("catalog_api.kit",)

Graph = Mapping[str, Iterable[str]]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = REPO, packages: Iterable[str] = LAYERS) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports, read with `ast` from every `.py` file under them."""
    files = {module_name(path, root): path for package in packages for path in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(_known(alias.name, files) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, is_package)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in files else _known(base, files))
        graph[name] = {target for target in targets if target and target != name}
    return graph


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = importer.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _known(module: str, files: Mapping[str, Path]) -> str:
    """The deepest module of ours that `module` names (`import a.b.c` runs a.b.c), or "" for a library."""
    parts = module.split(".")
    while parts:
        if ".".join(parts) in files:
            return ".".join(parts)
        parts.pop()
    return ""


def cycles(graph: Graph) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def upward(graph: Graph, tiers: tuple[tuple[str, ...], ...] = TIERS) -> list[str]:
    """Every `importer -> imported` edge that reaches a higher tier or a sibling package of its own tier."""
    rank = {package: position for position, tier in enumerate(tiers) for package in tier}
    bad = []
    for importer, targets in graph.items():
        source = importer.split(".")[0]
        for target in targets:
            goal = target.split(".")[0]
            if goal != source and rank[goal] >= rank[source]:
                bad.append(f"{importer} -> {target}")
    return sorted(bad)


def room_of(module: str) -> str:
    """The room a module lives in: its package's sub-package or top module (`catalog_api.catalog` for
    `catalog_api.catalog.repository`, `catalog_api.deps` for itself); a package's own `__init__` is
    the package."""
    return ".".join(module.split(".")[:2])


def room_graph(graph: Graph) -> dict[str, dict[str, list[str]]]:
    """Room -> each other room of the same package it imports -> the module imports that make the arrow."""
    rooms: dict[str, dict[str, list[str]]] = {}
    for importer, targets in graph.items():
        source = room_of(importer)
        arrows = rooms.setdefault(source, {})
        for target in sorted(targets):
            goal = room_of(target)
            same_package = goal.split(".")[0] == source.split(".")[0]
            if goal != source and same_package and "." in goal and "." in source:
                arrows.setdefault(goal, []).append(f"{importer} -> {target}")
    return {room: {goal: sorted(why) for goal, why in arrows.items()} for room, arrows in rooms.items()}


def room_circles(graph: Graph) -> list[str]:
    """One walk around each circle between rooms, each arrow with the module imports behind it."""
    rooms = room_graph(graph)
    found = []
    for component in cycles(rooms):
        members = set(component)
        walk = [component[0]]
        while True:  # a circle exists inside every strongly connected set: follow arrows until one repeats
            step = min(room for room in rooms[walk[-1]] if room in members)
            if step in walk:
                walk = [*walk[walk.index(step) :], step]
                break
            walk.append(step)
        arrows = [f"{a} -> {b} ({'; '.join(rooms[a][b])})" for a, b in pairwise(walk)]
        tangled = f"rooms {', '.join(component)} reach each other; one circle:" if len(component) > 2 else ""
        found.append("\n".join([tangled, *arrows] if tangled else arrows))
    return found


def test_no_import_circles() -> None:
    assert cycles(import_graph()) == []


def test_no_upward_imports() -> None:
    assert upward(import_graph()) == []


def test_no_circles_between_rooms() -> None:
    """A73d9a9 had three, each made of circle-free modules: catalog -> prices -> events -> catalog
    (bulk_files, snapshot_files, outbox, records), catalog <-> prices (repository -> movers,
    movers_routes -> repository) and deps <-> catalog, scan, ops (the context's types, the routes)."""
    found = room_circles(import_graph())
    assert found == [], "circles between rooms:\n\n" + "\n\n".join(found)


def test_shared_rooms_import_no_sibling() -> None:
    """A shared room (`catalog_api/kit/`) is what every room leans on: it may only lean on itself and
    on lower layers."""
    leaks = sorted(
        f"{importer} -> {target}"
        for importer, targets in import_graph().items()
        if room_of(importer) in SHARED_ROOMS
        for target in targets
        if room_of(target) != room_of(importer) and room_of(target).split(".")[0] == importer.split(".")[0]
    )
    assert leaks == []


def test_the_check_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "a.py").write_text("def f():\n    from . import b\n")
    type_only = "import typing\nif typing.TYPE_CHECKING:\n    import models.a\n"
    (tmp_path / "models" / "b.py").write_text(type_only)
    graph = import_graph(tmp_path, ["models"])
    assert graph["models.a"] == {"models.b"} and graph["models.b"] == {"models.a"}
    assert cycles(graph) == [["models.a", "models.b"]]


def test_the_check_fails_on_a_circle_an_upward_import_and_a_sibling_import() -> None:
    fake = {
        "models.net": {"catalog_api.kit.settings"},  # upward
        "catalog_api.kit.settings": {"core.errors"},
        "core.errors": set(),
        "catalog_api.prices.sync": {"catalog_api.events.outbox"},
        "catalog_api.events.outbox": {"catalog_api.catalog.repository"},
        "catalog_api.catalog.repository": {"catalog_api.prices.sync"},  # closes a circle of three
        "serve_app.indexing": {"catalog_api.scan.card_rows", "models.net"},  # a sibling: not allowed
        "catalog_api.scan.card_rows": set(),
        "cardcat.cli.serve": {"serve_app.local", "training.renders"},  # the top may import what is below
        "serve_app.local": set(),
        "training.renders": set(),
        "benchmarks.faults": {"cardcat.stack", "tests.outages"},  # benchmarks sit under tests
        "cardcat.stack": set(),
        "tests.outages": {"benchmarks.faults"},
    }
    assert cycles(fake) == [
        ["benchmarks.faults", "tests.outages"],
        ["catalog_api.catalog.repository", "catalog_api.events.outbox", "catalog_api.prices.sync"],
    ]
    assert upward(fake) == [
        "benchmarks.faults -> tests.outages",
        "models.net -> catalog_api.kit.settings",
        "serve_app.indexing -> catalog_api.scan.card_rows",
    ]


def test_the_room_check_finds_a_circle_of_circle_free_modules() -> None:
    """No module circle, yet rooms a and b import each other: the room check names it with its imports."""
    fake = {
        "pkg.a.x": {"pkg.b.y"},
        "pkg.b.y": set(),
        "pkg.b.z": {"pkg.a.w"},
        "pkg.a.w": {"pkg.kit.k"},
        "pkg.kit.k": set(),
        "pkg.top": {"pkg.a.x", "other.thing"},
        "other.thing": set(),
    }
    assert cycles(fake) == []
    assert room_circles(fake) == ["pkg.a -> pkg.b (pkg.a.x -> pkg.b.y)\npkg.b -> pkg.a (pkg.b.z -> pkg.a.w)"]
    assert room_circles({**fake, "pkg.b.z": set()}) == []
