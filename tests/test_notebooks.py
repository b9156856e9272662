"""The stored notebooks, run again in a fresh kernel as one namespace (not page by page), print what they store;
the files are clean, and the Chinese ones hold the English code cells and outputs, with Chinese text."""

import re
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest
from conftest import needs_torch
from nbclient import NotebookClient
from traitlets.config import Config

from tools import ROOT, notebooks, pages, store
from tools.editions import CHINESE, EDITIONS, ENGLISH
from tools.page_runner import compare_text

NAMES = list(pages.NOTEBOOKS)
HAN = re.compile(r"[\u4e00-\u9fff]")


def stored(name: str, edition=ENGLISH) -> nbformat.NotebookNode:
    return nbformat.read(edition.notebooks / f"{name}.ipynb", as_version=4)


def stdout_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


@pytest.fixture(scope="session")
def reexecuted(tmp_path_factory):
    """Each stored notebook executed again in a fresh kernel, in an empty folder."""
    needs_torch()
    def run(name):
        notebook, folder = stored(name), tmp_path_factory.mktemp(name)  # the client clears each cell it runs
        # The kernel's sockets are files in its folder: over TCP, another process can take the free port that
        # jupyter_client picked before the kernel binds it ("Address already in use" on a busy machine).
        sockets = Config(KernelManager={"transport": "ipc", "ip": str(folder / "kernel")})
        NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=False, config=sockets,
                       extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
                       resources={"metadata": {"path": str(folder)}}).execute()
        return notebook

    with ThreadPoolExecutor(max_workers=len(NAMES)) as pool:
        return dict(zip(NAMES, pool.map(run, NAMES)))


@pytest.mark.parametrize("name", NAMES)
def test_reexecution_reproduces_the_stored_outputs(name, reexecuted):
    for index, (old, new) in enumerate(zip(stored(name).cells, reexecuted[name].cells)):
        if old.cell_type != "code":
            continue
        # A cell that draws a plot shows it again (matplotlib's inline backend: a PNG); no other writes more.
        kinds = [o.output_type for o in new.outputs if not (o.output_type == "stream" and o.name == "stdout")]
        plots = [o.output_type for o in old.outputs if o.output_type == "display_data"]
        assert kinds == plots, f"{name}.ipynb cell {index} writes {kinds} when run in a kernel, stored: {plots}"
        assert all("image/png" in o.data for o in new.outputs if o.output_type == "display_data")
        section = old.metadata["section"]
        diff = compare_text(stdout_of(old), stdout_of(new), section, store.varying_patterns())
        assert diff is None, f"run as one notebook, {name}.ipynb cell {index} ({section}) prints otherwise:\n{diff}"


# Markdown's attribute list ({ #anchor }) and the page's comments: Jupyter shows them as text.
MARKUP = re.compile(r"\{ *#[\w-]+ *\}|<!--.*?-->")
# A paragraph that ends in a colon leads into what follows it: a heading, a box's title or the end of the
# notebook means that what it introduced (a diagram, say) is on the page only.
LEADS_INTO = re.compile(r"[:：]\s*$")
INTRODUCES_NOTHING = re.compile(r"#|\*\*[^*]+\*\*$|$")
LATIN_COMMA = re.compile(r"[\u4e00-\u9fff\w.]+, +[\u4e00-\u9fffA-Z]")  # "A.1, A.2" inside a Chinese sentence


def text_problems(notebook: nbformat.NotebookNode, edition) -> list[str]:
    """What would read as markup, as English or as English punctuation in a notebook's text cells."""
    problems = []
    for index, cell in [(index, cell) for index, cell in enumerate(notebook.cells) if cell.cell_type == "markdown"]:
        problems += [f"cell {index}: the page's markup {found!r}" for found in MARKUP.findall(cell.source)]
        paragraphs = re.split(r"\n\s*\n", cell.source.strip())
        after_cell = "code" if index + 1 < len(notebook.cells) and notebook.cells[index + 1].cell_type == "code" else ""
        problems += [f"cell {index}: {paragraph[-60:]!r} leads into nothing" for paragraph, following
                     in zip(paragraphs, paragraphs[1:] + [after_cell])
                     if LEADS_INTO.search(paragraph) and INTRODUCES_NOTHING.match(following)]
        if edition is CHINESE:  # Chinese text; the sentences the recorder writes (intro, earlier-code cells) spaced
            problems += [] if HAN.search(cell.source) else [f"cell {index}: not Chinese: {cell.source[:200]!r}"]
            generated = [line for line in cell.source.splitlines()
                         if "本书可执行版" in line or edition.words["earlier_code_cell"] in line]
            problems += [f"cell {index}: {found!r}" for line in generated for found in LATIN_COMMA.findall(line)]
            problems += [f"cell {index}: a space between Chinese characters in {line!r}" for line in generated
                         if re.search(r"[\u4e00-\u9fff] +[\u4e00-\u9fff]", line)]
    return problems


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=EDITIONS)
@pytest.mark.parametrize("name", NAMES)
def test_the_stored_notebook_is_clean(name, edition):
    """Valid, with no machine's paths, text that reads right; the Chinese one has the English one's code cells."""
    text = (edition.notebooks / f"{name}.ipynb").read_text()
    notebook = nbformat.reads(text, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata == {"kernelspec": notebooks.KERNEL, "language_info": {"name": "python"}}
    for marker in ["/work/", "/home/", "/tmp/", "/root/", "/Users/", "\\\\Users\\\\", "make outputs", "snippets/"]:
        assert marker not in text, f"{name}.ipynb contains {marker!r}: a path of this machine or a maintainer note"
    problems = text_problems(notebook, edition)
    assert not problems, f"{edition.notebooks.relative_to(ROOT)}/{name}.ipynb: " + "; ".join(problems)
    if edition is CHINESE:  # the same code, printed output and plots; only a plot's text is in its words
        code = {e.language: [(cell.source, cell.metadata, stdout_of(cell), [o.output_type for o in cell.outputs])
                             for cell in stored(name, e).cells if cell.cell_type == "code"] for e in (ENGLISH, CHINESE)}
        assert code["zh"] == code["en"], (
            f"{CHINESE.docs.name}/notebooks/{name}.ipynb has other code cells than the English one: run `make outputs`")


def test_markup_a_latin_list_and_a_sentence_that_leads_into_nothing_are_reported():
    chinese = stored("code-part1", CHINESE)
    chinese.cells[0].source = "# 附录 A 代码\n\n本书可执行版中 A.1, A.2, A.3 的文字"
    chinese.cells[1].source = "### A.1.1 PyTorch 的三大核心组件 { #a11-the-three-core-components-of-pytorch }"
    chinese.cells[3].source = "The text of A.1, left in English."  # not Chinese
    problems = text_problems(chinese, CHINESE)
    assert {problem.split(":")[0] for problem in problems} == {"cell 0", "cell 1", "cell 3"}, problems
    assert any("{ #a11" in problem for problem in problems) and any("A.1, A" in problem for problem in problems)
    text = nbformat.v4.new_markdown_cell
    notebook = nbformat.v4.new_notebook(cells=[
        text("It runs on a CPU until you switch it:\n\n**Machine-dependent outputs**"),  # a diagram left out
        text("Run this:"), nbformat.v4.new_code_cell("print(1)"),
        text("Three things:\n\n1. one\n\nThe values differ<!-- page only -->.\n\nIt ends with:")])
    problems = text_problems(notebook, ENGLISH)
    assert [problem.split(":")[0] for problem in problems] == ["cell 0", "cell 3", "cell 3"], problems
    assert "leads into nothing" in problems[0] and "<!-- page only -->" in problems[1], problems


def test_a_notebook_leaves_out_what_only_the_page_has(monkeypatch):
    page = ("# A.1 Title\n\nIt runs on a CPU until you switch it:\n\n"
            '<figure class="diagram" markdown="0" data-notebook="caption">\n<svg></svg>\n'
            "<figcaption>Change the <code>runtime</code> type.</figcaption>\n</figure>\n\n"
            '<figure class="diagram" markdown="0">\n<svg></svg>\n<figcaption>A drawing.</figcaption>\n</figure>\n\n'
            "The values vary<!-- page only -->, as the output's\ntitle says<!-- /page only -->.\n")
    monkeypatch.setattr(pages, "page_text", lambda name, docs: page)
    text = [part for part in notebooks.page_parts("a1-what-is-pytorch.md", ENGLISH) if isinstance(part, str)]
    assert text == ['## A.1 Title <a id="a1-title"></a>', "", "It runs on a CPU until you switch it:", "",
                    "Change the `runtime` type.", "", "", "The values vary."], text
