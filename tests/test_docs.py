"""The user's pages kept honest: every setting documented, every link followed, the README short.

Reproduces #46 item 5: at a73d9a9 the README was 516 lines (210 of them dated benchmark runs), and
links between the pages pointed at anchors that did not exist
(`docs/scanner.md` -> `scanner-performance.md#reading-only-where-the-print-can-matter-...`, a bold
paragraph, not a heading). Moving the history to `docs/lab/` moved anchors too; these checks keep the
README and `docs/` consistent with each other and with `Settings`.
"""

from __future__ import annotations

import re
from pathlib import Path

from catalog_api.kit.settings import Settings

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 300
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return [
        REPO / "README.md",
        REPO / "clients" / "python" / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
    ]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """Numbered lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().replace("`", "").lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            name = slug(heading.group(1))
            found.add(name if name not in seen else f"{name}-{seen[name]}")
            seen[name] = seen.get(name, 0) + 1
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            where = f"{path.relative_to(REPO)}:{number}: {target}"
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where} (no such heading)")
    return broken


def test_every_link_between_the_pages_resolves() -> None:
    """Every relative link in the READMEs and docs/ names a file that exists and, with `#anchor`, a
    heading of that page (as GitHub makes its anchors)."""
    assert [problem for page in pages() for problem in broken_links(page)] == []


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(
        "# Top\n\n## The `floor`: what it costs\n\n[ok](#the-floor-what-it-costs)\n"
    )
    (tmp_path / "b.md").write_text("[gone](a.md#the-floor) [missing](c.md) [fine](a.md#top)\n")
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        assert broken_links(tmp_path / "a.md") == []
        assert broken_links(tmp_path / "b.md") == [
            "b.md:1: a.md#the-floor (no such heading)",
            "b.md:1: c.md (no such file)",
        ]
    finally:
        REPO = saved


def documented_settings() -> str:
    return (REPO / "docs" / "configuration.md").read_text(encoding="utf-8") + (REPO / "README.md").read_text(
        encoding="utf-8"
    )


def test_every_setting_is_documented() -> None:
    """Each field of `Settings` appears as `CARDCAT_<FIELD>` in docs/configuration.md or the README, so a
    new setting cannot ship unexplained."""
    text = documented_settings()
    missing = [
        f"CARDCAT_{name.upper()}" for name in Settings.model_fields if f"`CARDCAT_{name.upper()}`" not in text
    ]
    assert missing == []


def test_the_readme_is_a_page_for_users() -> None:
    """README.md stays short: what it is, the two commands, a tour and one table of today's figures; the
    dated runs live in docs/lab/."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
