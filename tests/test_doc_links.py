"""Every relative link of the Markdown docs points at a file of the checkout (and a heading)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "cluster" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
EXTERNAL = re.compile(r"^([a-z][a-z0-9+.-]*:|//)", re.I)


def links(text: str) -> list[str]:
    """Link targets of a Markdown text, outside code blocks and inline code."""
    prose = INLINE_CODE.sub("", FENCE.sub("", text))
    return INLINE_LINK.findall(prose) + REFERENCE.findall(prose)


def heading_anchors(markdown: Path) -> set[str]:
    """GitHub's anchors of the headings of ``markdown``."""
    anchors = set()
    for line in FENCE.sub("", markdown.read_text()).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def broken_links(markdown: Path) -> list[str]:
    broken = []
    for target in links(markdown.read_text()):
        if EXTERNAL.match(target):
            continue
        path, _, fragment = target.partition("#")
        resolved = (markdown.parent / path).resolve() if path else markdown
        if not resolved.exists():
            broken.append(f"{target} (no file {resolved})")
        elif fragment and resolved.suffix == ".md" and fragment not in heading_anchors(resolved):
            broken.append(f"{target} (no heading #{fragment} in {resolved.name})")
    return broken


def test_the_link_finder_sees_inline_image_and_reference_links_but_not_code(tmp_path):
    (tmp_path / "there.md").write_text("# A heading: `x.yaml`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading-xyaml) ![pic](missing.png) [far](https://example.org/x)\n"
        "`[not](a-link.md)`\n```\n[nor](this.md)\n```\n[ref]: gone.md\n[bad](there.md#nope)\n"
    )
    assert broken_links(page) == [
        f"missing.png (no file {tmp_path / 'missing.png'})",
        "there.md#nope (no heading #nope in there.md)",
        f"gone.md (no file {tmp_path / 'gone.md'})",
    ]


@pytest.mark.parametrize("markdown", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(markdown):
    assert broken_links(markdown) == []


def test_the_docs_have_relative_links_to_check():
    relative = [t for p in DOCS for t in links(p.read_text()) if not EXTERNAL.match(t)]
    assert len(relative) >= 10, relative
    assert "docs/cluster.md" in relative, relative
