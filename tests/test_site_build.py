"""The site builds strictly, shows every recorded output under its code, and fails on a missing section."""

import html
import re
import shutil
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT, mkdocs_build
from tools.sections import OUTPUTS, read_chunks, section_code

DOCS = ROOT / "docs"
INCLUDE = re.compile(r'--8<-- "snippets/(\w+)\.py:([\w-]+)"')


def code_blocks(page_html: str) -> list[tuple[str, str]]:
    """(title, text) of every code block on a built page, in page order."""
    soup = BeautifulSoup(page_html, "html.parser")
    blocks = []
    for block in soup.select("div.highlight"):
        title = block.select_one(".filename")
        code = block.select_one("pre > code")
        blocks.append((title.get_text() if title else "", code.get_text() if code else ""))
    return blocks


def test_the_site_builds_strictly(built_site):
    assert (built_site / "index.html").exists()
    assert (built_site / "notebooks" / "code-part1" / "index.html").exists()


def test_the_a2_page_shows_each_recorded_output_under_its_code(built_site):
    blocks = code_blocks((built_site / "a2-understanding-tensors" / "index.html").read_text())
    checked = 0
    for chunk in read_chunks(ROOT / "snippets" / "a2_tensors.py"):
        output = OUTPUTS / "a2_tensors" / f"{chunk.name}.txt"
        if not chunk.name or not output.exists():
            continue
        code = section_code("a2_tensors", chunk.name)
        position = next(i for i, (_, text) in enumerate(blocks) if text.strip() == code.strip())
        title, text = blocks[position + 1]
        assert title.startswith("Output"), f"no Output block under section '{chunk.name}'"
        assert text == output.read_text(), f"the Output under '{chunk.name}' is not the recorded one"
        checked += 1
    assert checked >= 10


def test_every_recorded_output_is_shown_on_a_page():
    included = {f"{m}:{s}" for page in DOCS.rglob("*.md") for m, s in INCLUDE.findall(page.read_text())}
    recorded = {f"{p.parent.name}:{p.stem}" for p in OUTPUTS.glob("*/*.txt")}
    assert recorded - included == set(), "recorded outputs that no page includes"


def test_no_python_is_typed_into_a_page():
    fence = re.compile(r"^[ \t]*```(?:python|py)\b[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)
    for page in DOCS.rglob("*.md"):
        for body in fence.findall(page.read_text()):
            typed = [line for line in body.splitlines() if line.strip() and "--8<--" not in line]
            assert not typed, f"{page.relative_to(ROOT)} types Python instead of including a snippet: {typed[0]!r}"


def test_each_page_offers_its_module_for_download(built_site):
    page = (built_site / "a7-typical-training-loop" / "index.html").read_text()
    assert 'href="../downloads/snippets/a7_training_loop.py"' in page
    assert 'href="../notebooks/code-part1/"' in page
    served = built_site / "downloads" / "snippets" / "a7_training_loop.py"
    assert served.read_text() == (ROOT / "snippets" / "a7_training_loop.py").read_text()


def test_math_is_rendered_to_mathml_at_build_time(built_site):
    page = (built_site / "a4-automatic-differentiation" / "index.html").read_text()
    assert len(re.findall(r'<math [^>]*display="block"', page)) == 2
    assert "\\frac" not in html.unescape(page)


def _site_copy(tmp_path: Path) -> Path:
    """A copy of everything the build reads, to break on purpose without touching the repository."""
    copy = tmp_path / "repo"
    for name in ["docs", "snippets", "scripts", "tools", "overrides"]:
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    return copy


@pytest.mark.parametrize("page, addition, named", [
    ("a2-understanding-tensors.md", '```python\n--8<-- "snippets/a2_tensors.py:no_such_section"\n```', "no_such_section"),
    ("a3-computation-graphs.md", "See [the missing anchor](a4-automatic-differentiation.md#nowhere).", "#nowhere"),
])
def test_a_missing_section_or_a_broken_link_stops_the_build(page, addition, named, tmp_path):
    copy = _site_copy(tmp_path)
    path = copy / "docs" / page
    path.write_text(path.read_text() + f"\n{addition}\n")

    result = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")

    assert result.returncode != 0
    assert named in result.stderr
