"""Docstrings say why and cite docs/figures.md for how much: every citation names a section that
is there, and every section is cited (a figure nothing cites anymore goes)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs/figures.md"
CITATION = re.compile(r'docs/figures\.md,\s+"([^"]+)"')
PRODUCT = ("api/phalanx", "operator/phalanx", "trainer_image/phalanx")


def _citations() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for title in CITATION.findall(" ".join(path.read_text().split())):
                cited.setdefault(title, set()).add(str(path.relative_to(ROOT)))
    return cited


def test_every_citation_names_a_section_and_every_section_is_cited() -> None:
    sections = set(re.findall(r"^## (.+)$", FIGURES.read_text(), flags=re.MULTILINE))
    cited = _citations()
    assert set(cited) - sections == set(), f"cited, not in docs/figures.md: {set(cited) - sections}"
    assert sections - set(cited) == set(), f"sections nothing cites: {sections - set(cited)}"
