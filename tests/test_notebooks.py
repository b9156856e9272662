"""The stored notebooks are what the snippets generate, they re-execute to their stored outputs,
those outputs are the ones shown on the pages, and the files are clean."""

import copy
import json
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from tools import notebooks
from tools.record_outputs import compare_text, varying_patterns
from tools.sections import OUTPUTS

NAMES = list(notebooks.NOTEBOOKS)


def stored(name: str) -> nbformat.NotebookNode:
    return nbformat.read(notebooks.path_of(name), as_version=4)


@pytest.fixture(scope="session")
def reexecuted():
    """Each stored notebook executed again in a fresh kernel (its cells as stored, outputs cleared)."""
    def run(name):
        notebook = copy.deepcopy(stored(name))
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        return notebooks.execute(notebook)

    with ThreadPoolExecutor(max_workers=len(NAMES)) as pool:
        return dict(zip(NAMES, pool.map(run, NAMES)))


@pytest.mark.parametrize("name", NAMES)
def test_cells_are_the_ones_the_pages_and_snippets_generate(name):
    expected, actual = notebooks.generate(name).cells, stored(name).cells
    for index, (want, have) in enumerate(zip(expected, actual)):
        assert (have.cell_type, have.source) == (want.cell_type, want.source), (
            f"{name}.ipynb cell {index} ({want.metadata.get('section', want.cell_type)}) differs from what the "
            "pages and snippets generate; run `make outputs`")
    assert len(actual) == len(expected), f"{name}.ipynb has {len(actual)} cells, expected {len(expected)}; run `make outputs`"


@pytest.mark.parametrize("name", NAMES)
def test_reexecution_reproduces_the_stored_outputs(name, reexecuted):
    patterns = varying_patterns()
    for index, (old, new) in enumerate(zip(stored(name).cells, reexecuted[name].cells)):
        if old.cell_type != "code":
            continue
        assert [o.output_type for o in new.outputs] == [o.output_type for o in old.outputs], (
            f"{name}.ipynb cell {index}: the kinds of output changed")
        section = old.metadata["section"]
        diff = compare_text(notebooks.stdout_of(old), notebooks.stdout_of(new), patterns.get(section, {}).get("lines", []),
                            f"{name}.ipynb cell {index} ({section})")
        assert diff is None, f"re-running {name}.ipynb changes cell {index}; run `make outputs` if intended:\n{diff}"


@pytest.mark.parametrize("name", NAMES)
def test_outputs_agree_with_the_recorded_outputs_on_the_pages(name):
    patterns = varying_patterns()
    for index, cell in enumerate(stored(name).cells):
        if cell.cell_type != "code":
            continue
        module, section = cell.metadata["section"].split(":")
        recorded = OUTPUTS / module / f"{section}.txt"
        expected = recorded.read_text() if recorded.exists() else ""
        diff = compare_text(expected, notebooks.stdout_of(cell), patterns.get(f"{module}:{section}", {}).get("lines", []),
                            f"{name}.ipynb cell {index} against {module}/{section}.txt")
        assert diff is None, diff


@pytest.mark.parametrize("name", NAMES)
def test_the_stored_notebook_is_clean(name):
    text = notebooks.path_of(name).read_text()
    notebook = nbformat.reads(text, as_version=4)
    nbformat.validate(notebook)
    assert notebook.nbformat == 4
    assert notebook.metadata == {"kernelspec": notebooks.KERNEL, "language_info": {"name": "python"}}
    for cell in notebook.cells:
        assert set(cell.metadata) <= {"section"}, f"machine-specific cell metadata: {dict(cell.metadata)}"
        for output in cell.get("outputs", []):
            assert output.output_type != "error"
    for marker in ["/work/", "/home/", "/tmp/", "/root/", "/Users/", "\\\\Users\\\\"]:
        assert marker not in text, f"{name}.ipynb contains an absolute path ({marker})"
    assert text == nbformat.writes(notebook) + "\n", "not written the way `make outputs` writes it"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert json.loads(text)["cells"][0]["cell_type"] == "markdown"


@pytest.mark.parametrize("name", NAMES)
def test_rerecording_changes_no_byte(name, reexecuted):
    """Written as `make outputs` writes it, the re-executed notebook is the stored file, byte for byte,
    apart from machine-dependent lines (a timing), which the test above checks for their shape."""
    fresh = copy.deepcopy(reexecuted[name])
    notebooks.keep_unchanged_varying_outputs(fresh, name)
    assert nbformat.writes(fresh) + "\n" == notebooks.path_of(name).read_text()
