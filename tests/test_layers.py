"""The import rule of the repository, checked from the source: no circles, and no upward imports.

Layers, lowest first: `models` < `catalog_api` < `serve_app` < `training` < `deploy`. A module may import
its own layer and the ones below; only the composition root, `catalog_api/cli/`, may import every layer
(it starts the scanner, the ingress and the deliverer). Inside `catalog_api`, the `kit/` imports no
room. Every import counts, also those inside functions and under `if TYPE_CHECKING:`: a deferred import
hides a dependency, it does not remove it. Circles are broken by moving the shared thing down (see
docs/architecture.md), never by deferring an import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("models", "catalog_api", "serve_app", "training", "deploy")
COMPOSITION_ROOT = "catalog_api.cli"

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


def upward(graph: Graph, layers: tuple[str, ...] = LAYERS, root: str = COMPOSITION_ROOT) -> list[str]:
    """Every `importer -> imported` edge that reaches a higher layer, outside the composition root."""
    rank = {layer: position for position, layer in enumerate(layers)}
    bad = []
    for importer, targets in graph.items():
        if importer == root or importer.startswith(root + "."):
            continue
        for target in targets:
            if rank[target.split(".")[0]] > rank[importer.split(".")[0]]:
                bad.append(f"{importer} -> {target}")
    return sorted(bad)


def test_no_import_circles() -> None:
    assert cycles(import_graph()) == []


def test_no_upward_imports() -> None:
    assert upward(import_graph()) == []


def test_the_kit_imports_no_room() -> None:
    """`catalog_api/kit/` is what every room shares: it may only lean on itself and `models`."""
    leaks = sorted(
        f"{importer} -> {target}"
        for importer, targets in import_graph().items()
        if importer.startswith("catalog_api.kit")
        for target in targets
        if not target.startswith(("catalog_api.kit", "models"))
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


def test_the_check_fails_on_a_circle_and_an_upward_import() -> None:
    fake = {
        "models.net": {"catalog_api.kit.settings"},  # upward
        "catalog_api.kit.settings": set(),
        "catalog_api.prices.sync": {"catalog_api.events.outbox"},
        "catalog_api.events.outbox": {"catalog_api.catalog.repository"},
        "catalog_api.catalog.repository": {"catalog_api.prices.sync"},  # closes a circle of three
        "catalog_api.cli.serve": {"serve_app.local", "training.renders"},  # the composition root may
        "serve_app.local": set(),
        "training.renders": set(),
    }
    assert cycles(fake) == [
        ["catalog_api.catalog.repository", "catalog_api.events.outbox", "catalog_api.prices.sync"]
    ]
    assert upward(fake) == ["models.net -> catalog_api.kit.settings"]
