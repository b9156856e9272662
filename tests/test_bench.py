"""`make bench` and the figures it writes; the notebook cache that keeps rebuilds fast. No timing is asserted."""

import json
import shutil
import sys

import yaml

from tools.bench import MEASURES, README_END, README_START, ROOT, render, version
from tools.hooks.render_notebooks import converter_key
from tools.page_runner import run

NOTEBOOK_TEXT = "A sentence that only this notebook holds."


def test_documented_make_command_writes_the_figures_and_the_readme_table(tmp_path):
    status, _, stderr = run(["make", "bench", f"ARGS=--only matmul --out {tmp_path}"], 300, cwd=ROOT)
    assert status == 0, stderr
    matmul = json.loads((tmp_path / "measured" / "bench.json").read_text())["matmul"]
    assert matmul["command"] == 'make bench ARGS="--only matmul"'
    assert matmul["cpu_us"] > 0 and matmul["cpu_1_thread_us"] > 0
    page = (tmp_path / "measured" / "matmul.md").read_text()
    assert f"{matmul['cpu_us']:.0f} µs" in page and matmul["date"] in page and matmul["machine"]["cpu"] in page
    # Only the marked region of README changes, and it holds the new figure.
    ours, theirs = (ROOT / "README.md").read_text(), (tmp_path / "README.md").read_text()
    assert ours.split(README_START)[0] == theirs.split(README_START)[0]
    assert ours.split(README_END)[1] == theirs.split(README_END)[1]
    assert f"| Exercise A.4's 100×200 @ 200×300 on the CPU | {matmul['cpu_us']:.0f} µs |" in theirs


RENDER_AGAIN = ("is not what measured/bench.json renders now: if what a figure measured changed since, "
                "`make bench ARGS=--render` marks it as measured on an earlier version (or measure it again)")


def test_committed_figures_are_those_bench_json_renders(tmp_path):
    """The pages and README show what `make bench` measured, never a figure typed by hand, nor one older than what
    it measured without saying so."""
    render(json.loads((ROOT / "measured" / "bench.json").read_text()), tmp_path)  # README from the repository
    for suffix, docs in [(".md", "docs"), (".zh.md", "docs-zh")]:  # the two editions
        for page, figures in {"a9-gpu-training.md": "matmul", "a9-ddp-in-practice.md": "ddp"}.items():
            rendered = f"measured/{figures}{suffix}"
            assert (tmp_path / rendered).read_text() == (ROOT / rendered).read_text(), f"{rendered} {RENDER_AGAIN}"
            assert f'--8<-- "{rendered}"' in (ROOT / docs / page).read_text()
    assert (ROOT / "README.md").read_text() == (tmp_path / "README.md").read_text(), f"README.md {RENDER_AGAIN}"


def test_a_figure_measured_before_what_it_measures_changed_says_so(tmp_path):
    results = json.loads((ROOT / "measured" / "bench.json").read_text())
    for section in MEASURES:  # as if measured now, but the tests
        results[section]["version"] = version(section) if section != "tests" else "an-older-one"
    render(results, tmp_path)
    table = (tmp_path / "README.md").read_text().split(README_START)[1].split(README_END)[0]
    assert [row.split(" | ")[0] for row in table.splitlines() if "earlier version" in row] == ["| `make test`"]
    assert ", measured on an earlier version of the tests |" in table
    assert "earlier version" not in (tmp_path / "measured" / "ddp.md").read_text()
    # A version is of the files measured: one byte of a test changes it.
    shutil.copytree(ROOT / "tests", tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    assert version("tests", tmp_path) == version("tests")
    (tmp_path / "tests" / "test_bench.py").write_text((ROOT / "tests" / "test_bench.py").read_text() + " ")
    assert version("tests", tmp_path) != version("tests")


def notebook(text):
    return json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": [f"# Title\n\n{text}"]}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def build(site, config="mkdocs.yml"):
    status, _, stderr = run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config], 300, cwd=site)
    assert status == 0, stderr
    return (site / "site" / "nb" / "index.html").read_text()


def test_notebook_cache_reconverts_a_changed_notebook_and_search_leaves_notebooks_out(tmp_path):
    """A site with one page and one notebook, built with mkdocs-jupyter, search and our notebook hook."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nA page that search finds.\n")
    (tmp_path / "docs" / "nb.ipynb").write_text(notebook(NOTEBOOK_TEXT))
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump({
        "site_name": "notebook pages test", "theme": "material", "plugins": ["search", "mkdocs-jupyter"],
        "hooks": [str(ROOT / "tools" / "hooks" / "render_notebooks.py")]}))
    stale = tmp_path / ".cache" / "mkdocs-jupyter" / "converter-0000"  # made by other versions
    stale.mkdir(parents=True)
    assert NOTEBOOK_TEXT in build(tmp_path)
    index = (tmp_path / "site" / "search" / "search_index.json").read_text()
    assert "A page that search finds." in index and NOTEBOOK_TEXT not in index, "a notebook in the search index"
    [entry] = (tmp_path / ".cache" / "mkdocs-jupyter" / f"converter-{converter_key()}" / "docs").glob("*.json")
    assert not stale.exists()
    # Another edition's build (another docs folder, as mkdocs.zh.yml has) keeps this edition's entry.
    shutil.copytree(tmp_path / "docs", tmp_path / "docs-other")
    (tmp_path / "docs-other" / "nb.ipynb").write_text(notebook("The same notebook, translated."))
    (tmp_path / "mkdocs.other.yml").write_text("INHERIT: mkdocs.yml\ndocs_dir: docs-other\nsite_dir: other\n")
    build(tmp_path, "mkdocs.other.yml")
    assert entry.exists(), "the other edition's build evicted this edition's notebook from the cache"
    # An unchanged notebook comes from the cache: a marker planted in the entry shows up.
    entry.write_text(entry.read_text().replace(NOTEBOOK_TEXT, "Served from the cache."))
    assert "Served from the cache." in build(tmp_path)
    # A changed notebook is converted again, never served stale.
    (tmp_path / "docs" / "nb.ipynb").write_text(notebook("The notebook changed."))
    html = build(tmp_path)
    assert "The notebook changed." in html and "Served from the cache." not in html
