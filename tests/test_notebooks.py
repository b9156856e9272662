"""The stored notebooks run on their own: executed again in a fresh Jupyter kernel, cell after cell in
one namespace (not page by page, as they were recorded), they print what they store, and the files are clean.
The Chinese edition's notebooks hold the same code cells, with the same outputs, and Chinese text."""

import re
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest
from nbclient import NotebookClient

from tools import pages, record
from tools.editions import CHINESE, EDITIONS, ENGLISH

NAMES = list(pages.NOTEBOOKS)


def stored(name: str, edition=ENGLISH) -> nbformat.NotebookNode:
    return nbformat.read(edition.notebooks / f"{name}.ipynb", as_version=4)


def stdout_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


@pytest.fixture(scope="session")
def reexecuted(tmp_path_factory):
    """Each stored notebook executed again in a fresh kernel, in an empty folder."""
    def run(name):
        notebook = stored(name)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=False,
                       extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
                       resources={"metadata": {"path": str(tmp_path_factory.mktemp(name))}}).execute()
        return notebook

    with ThreadPoolExecutor(max_workers=len(NAMES)) as pool:
        return dict(zip(NAMES, pool.map(run, NAMES)))


@pytest.mark.parametrize("name", NAMES)
def test_reexecution_reproduces_the_stored_outputs(name, reexecuted):
    patterns = record.varying_patterns()
    for index, (old, new) in enumerate(zip(stored(name).cells, reexecuted[name].cells)):
        if old.cell_type != "code":
            continue
        kinds = [o.output_type for o in new.outputs if not (o.output_type == "stream" and o.name == "stdout")]
        assert kinds == [], f"{name}.ipynb cell {index} writes {kinds} when run in a kernel"  # plots are the recorder's
        section = old.metadata["section"]
        diff = record.compare_text(stdout_of(old), stdout_of(new), patterns.get(section, {}).get("lines", []),
                                   f"{name}.ipynb cell {index} ({section})")
        assert diff is None, f"run as one notebook, {name}.ipynb prints something else in cell {index}:\n{diff}"


@pytest.mark.parametrize("name", NAMES)
def test_the_chinese_notebook_has_the_english_code_and_outputs(name):
    code = {edition.language: [(cell.source, cell.metadata, cell.outputs) for cell in stored(name, edition).cells
                               if cell.cell_type == "code"] for edition in (ENGLISH, CHINESE)}
    assert code["zh"] == code["en"], (
        f"{CHINESE.docs.name}/notebooks/{name}.ipynb has other code cells than the English one: run `make outputs`")
    text = [cell.source for cell in stored(name, CHINESE).cells if cell.cell_type == "markdown"]
    english = [source for source in text if not re.search(r"[\u4e00-\u9fff]", source)]
    assert not english, f"a text cell of the Chinese {name}.ipynb is not Chinese: {english[0][:200]!r}"


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=EDITIONS)
@pytest.mark.parametrize("name", NAMES)
def test_the_stored_notebook_is_clean(name, edition):
    text = (edition.notebooks / f"{name}.ipynb").read_text()
    notebook = nbformat.reads(text, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata == {"kernelspec": record.KERNEL, "language_info": {"name": "python"}}
    for marker in ["/work/", "/home/", "/tmp/", "/root/", "/Users/", "\\\\Users\\\\", "make outputs", "snippets/"]:
        assert marker not in text, f"{name}.ipynb contains {marker!r}: a path of this machine or a maintainer note"
