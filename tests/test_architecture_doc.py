"""docs/architecture.md held to the code, so the page a newcomer opens first cannot go stale.

Reproduces #46 item 5: at a73d9a9 the page said `training/synth.py` was ~630 lines (it was 1,118),
`serve_app/app.py` ~460 (416) and that no service module but that one passed ~400 lines
(`serve_app/fusion.py` had 531), and its scanner table left `serve_app/ingress.py` out. The checks read
the page's tables and its "Module size" section and compare them with the files:

- every room of `catalog_api/` (a sub-package) has a row in the rooms table, every module of the room
  (`catalog_api/<room>/*.py` but `__init__.py`) is listed in its row, and every file listed exists;
- the top-level modules of `catalog_api/` are named under the table;
- the scanner's table lists every module of `models/` and `serve_app/`, and only modules that exist;
- the Layers section names every module of `core/` and of the composition root, `cardcat/`;
- every module of `catalog_api/`, `serve_app/` and `models/` above the section's threshold is named in
  it, and every size it states (`path` (~N ...) is within 20% of the file's line count.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
TOLERANCE = 0.20
SERVICE_PACKAGES = ("catalog_api", "serve_app", "models")
SPAN = re.compile(r"`([^`]+)`")


def section(doc: str, heading: str) -> str:
    """The text under `heading` (a whole heading line) up to the next heading of its level or higher."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = doc.splitlines()
    start = lines.index(heading)
    end = next(
        (i for i in range(start + 1, len(lines)) if re.match(rf"#{{1,{level}}} ", lines[i])),
        len(lines),
    )
    return "\n".join(lines[start + 1 : end])


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the markdown tables in `text`, as lists of cells (each table's header and rule
    left out)."""
    rows: list[list[str]] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
            continue
        rows += [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in block[2:]]
        block = []
    return rows


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def room_problems(doc: str, root: Path = REPO) -> list[str]:
    package = root / "catalog_api"
    problems: list[str] = []
    text = section(doc, "## Rooms of `catalog_api/`")
    listed_rooms: set[str] = set()
    for row in table_rows(text):
        room = SPAN.findall(row[0])[0].rstrip("/")
        listed_rooms.add(room)
        files = {
            span
            for span in SPAN.findall(row[-1])
            if re.fullmatch(r"[\w./-]+", span) and ("." in span or span.endswith("/"))
        }
        for name in sorted(files):
            if not (package / room / name).exists():
                problems.append(f"catalog_api/{room}/{name} is listed but does not exist")
        for path in sorted((package / room).glob("*.py")):
            if path.name != "__init__.py" and path.name not in files:
                problems.append(f"catalog_api/{room}/{path.name} is not listed in the row of `{room}/`")
    for path in sorted(package.iterdir()):
        if (path / "__init__.py").exists() and path.name not in listed_rooms:
            problems.append(f"catalog_api/{path.name}/ has no row in the rooms table")
    top = next((p for p in text.split("\n\n") if p.startswith("At the top of `catalog_api/`")), "")
    named = {span for span in SPAN.findall(top) if span.endswith(".py")}
    for name in sorted(named):
        if not (package / name).exists():
            problems.append(f"catalog_api/{name} is named at the top but does not exist")
    for path in sorted(package.glob("*.py")):
        if path.name != "__init__.py" and path.name not in named:
            problems.append(f"catalog_api/{path.name} is not named among the top-level modules")
    return problems


def scanner_problems(doc: str, root: Path = REPO) -> list[str]:
    problems: list[str] = []
    listed: set[str] = set()
    for row in table_rows(section(doc, "## The scanner's side: `models/`, `serve_app/`, `training/`")):
        folder = ""
        for span in SPAN.findall(row[0]):
            path = span if "/" in span else f"{folder}/{span}"
            folder = path.rsplit("/", 1)[0]
            listed.add(path)
            if not (root / path).exists():
                problems.append(f"{path} is listed but does not exist")
    for package in ("models", "serve_app"):
        for path in sorted((root / package).glob("*.py")):
            name = f"{package}/{path.name}"
            if path.name != "__init__.py" and name not in listed:
                problems.append(f"{name} is not listed in the scanner's table")
    return problems


def layer_problems(doc: str, root: Path = REPO) -> list[str]:
    """Every module of `core/` and `cardcat/` named in the Layers section (as `core/x.py`, or inside
    `cardcat/cli/` as its bare file name), and every one named there exists."""
    text = re.sub(r"```.*?```", "", section(doc, "## Layers"), flags=re.DOTALL)  # the fence is not a span
    spans = set(SPAN.findall(text))
    problems = [
        f"{span} is named in Layers but does not exist"
        for span in sorted(spans)
        if span.startswith(("core/", "cardcat/")) and span.endswith(".py") and not (root / span).exists()
    ]
    for package in ("core", "cardcat"):
        for path in sorted((root / package).rglob("*.py")):
            name = str(path.relative_to(root))
            if path.name == "__init__.py" and path.parent.name == package:
                continue
            in_cli = path.parent.name == "cli" and path.name in spans
            if name not in spans and not in_cli:
                problems.append(f"{name} is not named in the Layers section")
    return problems


def resolve(span: str, root: Path) -> Path | None:
    for base in (root, root / "catalog_api"):
        if (base / span).is_file():
            return base / span
    return None


def size_problems(doc: str, root: Path = REPO) -> list[str]:
    text = section(doc, "### Module size")
    problems: list[str] = []
    threshold = re.search(r"above (\d+) lines", text)
    if threshold is None:
        return ["the Module size section states no threshold ('above N lines')"]
    stated = re.findall(r"`([\w/]+\.py)`\s*\(~([\d,]+)", " ".join(text.split()))
    for span, size in stated:
        path = resolve(span, root)
        if path is None:
            problems.append(f"{span} is sized but does not exist")
            continue
        actual, claimed = line_count(path), int(size.replace(",", ""))
        if abs(claimed - actual) > TOLERANCE * actual:
            problems.append(f"{span} is said to be ~{claimed} lines; it has {actual}")
    named = {path for span in SPAN.findall(text) if (path := resolve(span, root)) is not None}
    for package in SERVICE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            if line_count(path) > int(threshold.group(1)) and path not in named:
                problems.append(
                    f"{path.relative_to(root)} has {line_count(path)} lines, above {threshold.group(1)},"
                    " and the Module size section does not name it"
                )
    return problems


def all_problems(doc: str) -> list[str]:
    return room_problems(doc) + scanner_problems(doc) + layer_problems(doc) + size_problems(doc)


def test_architecture_doc_matches_the_code() -> None:
    """Today's page: its rooms, its scanner table and its sizes agree with the files (the largest
    modules are printed, to update the page by when it fails)."""
    sizes = sorted(
        (
            (line_count(p), str(p.relative_to(REPO)))
            for pkg in SERVICE_PACKAGES
            for p in (REPO / pkg).rglob("*.py")
        ),
        reverse=True,
    )
    print("largest modules:", sizes[:8])
    assert all_problems(DOC.read_text(encoding="utf-8")) == []


def test_a_stale_page_is_caught() -> None:
    """The checks can fail: the page as a73d9a9 sized synth.py, a room's module left out, a module that
    is gone, a top-level module not named, a scanner module left out and a large module not named."""
    doc = DOC.read_text(encoding="utf-8")
    stale = (
        doc.replace("`training/synth.py` (~1,400", "`training/synth.py` (~630")
        .replace("`unknown_keys.py`, ", "")
        .replace("`outbox.py`, ", "`outbox.py`, `ghost.py`, ")
        .replace("`deps.py` (the", "the (the")
        .replace("| `serve_app/ingress.py` |", "| ingress |")
        .replace("above 450 lines", "above 350 lines")
        .replace("`core/devices.py` (what", "devices (what")
    )
    problems = all_problems(stale)
    expected = [
        "training/synth.py is said to be ~630 lines",
        "catalog_api/access/unknown_keys.py is not listed",
        "catalog_api/events/ghost.py is listed but does not exist",
        "catalog_api/deps.py is not named among the top-level modules",
        "serve_app/ingress.py is not listed in the scanner's table",
        "above 350, and the Module size section does not name it",
        "core/devices.py is not named in the Layers section",
    ]
    for words in expected:
        assert any(words in problem for problem in problems), (words, problems)
