"""The site reads like the book: every code cell of the book's notebooks (pinned in tests/upstream/)
is on its pages as the book has it, in the book's order, and every output of the book that does not
depend on the machine is shown with the book's value; or the difference is declared in
snippets/book_differences.toml and explained in a note beside the block, in both editions.

"As the book has it" means the same statements in the same order, allowing for comments, spacing,
trailing commas, imports (a page may import earlier) and a bare expression that the page prints.
A book cell may span several blocks of a page, as long as nothing comes between its statements."""

import ast
import html
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from tools import book, pages, store
from tools.editions import EDITIONS, ENGLISH

UPSTREAM = ROOT / "tests" / "upstream"


@dataclass
class Statement:
    dump: str  # the statement's syntax tree, without positions
    section: str  # the snippet section it comes from ("" in the book's notebooks)


@dataclass
class BookCell:
    number: int  # counted from 1, code cells only, as snippets/book_differences.toml counts
    source: str
    statements: list[str] | None  # None: not Python (an IPython magic such as %timeit)
    output: str


def statements(source: str) -> list[str] | None:
    """The cell's statements, normalized: no imports, `print(x)` taken as the bare expression `x`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    dumps = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and not node.value.keywords
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "print"
                and len(node.value.args) == 1):
            node = ast.Expr(node.value.args[0])
        dumps.append(ast.dump(node))
    return dumps


def printed(cell) -> str:
    """What a notebook cell shows as text: its stream output and the value of its last expression."""
    parts = [output.get("text", "") if output.output_type == "stream" else output.get("data", {}).get("text/plain", "")
             for output in cell.get("outputs", []) if output.output_type in ("stream", "execute_result")]
    return "".join(parts)


def same_text(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def book_cells(name: str, folder: Path = UPSTREAM) -> list[BookCell]:
    notebook = nbformat.read(folder / f"{name}.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    return [BookCell(number, cell.source, statements(cell.source), printed(cell))
            for number, cell in enumerate(code, start=1)]


def our_program(name: str) -> tuple[list[Statement], dict[str, str]]:
    """Our notebook of the same name (the pages' code, in page order): its statements, and what each
    section prints."""
    notebook = nbformat.read(ENGLISH.notebooks / f"{name}.ipynb", as_version=4)
    program, output = [], {}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            section = cell.metadata["section"]
            program += [Statement(dump, section) for dump in statements(cell.source)]
            output[section] = printed(cell)
    return program, output


def find(cell: list[str], program: list[Statement], start: int) -> int | None:
    dumps = [statement.dump for statement in program]
    return next((i for i in range(start, len(dumps) - len(cell) + 1) if dumps[i:i + len(cell)] == cell), None)


@dataclass
class Comparison:
    """One notebook of the book against ours."""

    problems: list[str]
    cells: int  # the book's code cells
    unchanged: int  # on the page as the book has it
    outputs: int  # the book's outputs that do not depend on the machine
    same_outputs: int  # shown with the book's value


def compare(name: str, book_cells: list[BookCell], differences) -> Comparison:
    program, output = our_program(name)
    varying = store.varying_patterns()
    declared = {number: d for d in differences if d.notebook == name for number in d.cells}
    result, cursor = Comparison([], len(book_cells), 0, 0, 0), 0
    for cell in book_cells:
        where = f"{name} code cell {cell.number}"
        at = None if cell.statements is None else find(cell.statements, program, cursor)
        if at is not None:
            result.unchanged += 1
            cursor = at + len(cell.statements)
            sections = list(dict.fromkeys(s.section for s in program[at:cursor]))
        elif cell.number in declared:
            sections = list(declared[cell.number].sections)
        elif cell.statements is not None and find(cell.statements, program, 0) is not None:
            result.problems.append(f"{where} is on the pages, but not in the book's order: it comes before "
                                   "cells that the book runs first.\n" + cell.source)
            continue
        else:
            result.problems.append(f"{where} is not on the pages as the book has it, and {book.DECLARED.name} "
                                   f"does not declare it: show it, or declare why not.\n{cell.source}")
            continue
        machine_dependent = any(section in varying for section in sections)
        shown = same_text(cell.output) in same_text("".join(output.get(section, "") for section in sections))
        if cell.output.strip() and not machine_dependent:
            result.outputs += 1
            result.same_outputs += shown
            if not shown and cell.number not in declared:
                result.problems.append(f"{where} prints something the pages do not show (in "
                                       f"{', '.join(sections)}), and {book.DECLARED.name} does not declare it. "
                                       f"The book prints:\n{cell.output}")
        if cell.number in declared and at is not None and (shown or machine_dependent or not cell.output.strip()):
            result.problems.append(f"{where} is declared in {book.DECLARED.name}, but the pages show it as the "
                                   "book has it, output included: remove it from the declaration.")
    return result


def comparisons(differences=None, folder: Path = UPSTREAM) -> dict[str, Comparison]:
    differences = book.differences() if differences is None else differences
    return {name: compare(name, book_cells(name, folder), differences) for name in pages.NOTEBOOKS}


def problems_of(found: dict[str, Comparison]) -> list[str]:
    return [problem for comparison in found.values() for problem in comparison.problems]


def test_the_pages_show_the_books_code_and_outputs():
    found = comparisons()
    assert not problems_of(found), "\n\n".join(problems_of(found))
    print("".join(f"\n{name}: {c.unchanged} of {c.cells} cells unchanged, {c.same_outputs} of {c.outputs} "
                  "outputs the book's" for name, c in found.items()))


@pytest.mark.parametrize(("changes", "reported"), [
    ({10: {"source": "tensor2d.shape[0]"}}, "code-part1 code cell 10 is not on the pages"),
    ({10: {"output": "torch.Size([2, 4])\n"}}, "code-part1 code cell 10 prints something"),
    # The book's cell 12 (`tensor2d.view(3, 2)`) moved before its cell 11 (`tensor2d.reshape(3, 2)`).
    ({11: {"source": "tensor2d.view(3, 2)"}, 12: {"source": "tensor2d.reshape(3, 2)"}},
     "code-part1 code cell 12 is on the pages, but not in the book's order"),
], ids=["changed code", "changed output", "cells swapped"])
def test_a_change_in_the_books_notebook_is_reported(changes, reported, tmp_path):
    for name in pages.NOTEBOOKS:
        shutil.copy(UPSTREAM / f"{name}.ipynb", tmp_path)
    notebook = nbformat.read(tmp_path / "code-part1.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for number, change in changes.items():
        if "source" in change:
            code[number - 1].source = change["source"]
        if "output" in change:
            code[number - 1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=change["output"])]
    nbformat.write(notebook, tmp_path / "code-part1.ipynb")
    problems = problems_of(comparisons(folder=tmp_path))
    assert len(problems) == 1 and problems[0].startswith(reported), problems


def test_an_undeclared_difference_and_a_stale_declaration_are_reported():
    declared = book.differences()
    problems = problems_of(comparisons([d for d in declared if d.cells != (8,)]))
    assert len(problems) == 1 and problems[0].startswith("code-part2 code cell 8 is not on the pages"), problems
    stale = book.Difference("code-part1", (10,), None, ("a2_tensors:shape",), {"en": "", "zh": ""},
                            "a2-understanding-tensors.md")
    problems = problems_of(comparisons([*declared, stale]))
    assert len(problems) == 1 and "code-part1 code cell 10 is declared" in problems[0], problems


@pytest.mark.parametrize(("fields", "refusal"), [
    ('notebook = "code-part3"\ncells = [1]\nsections = ["a"]', "difference 1: notebook must be one of code-part1"),
    ('notebook = "code-part1"\ncells = [1]\nsections = ["a2_tensors:not_there"]',
     "sections must name sections shown on the pages of code-part1"),
], ids=["unknown notebook", "section not shown"])
def test_a_malformed_declaration_is_refused(fields, refusal, tmp_path):
    declared = tmp_path / "book_differences.toml"
    declared.write_text(f'[[difference]]\n{fields}\nreason = "x"\nreason_zh = "x"\n')
    with pytest.raises(ValueError, match=refusal):
        book.differences(declared)


# --- the notes on the built pages ------------------------------------------------------------

def text_of(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def notes_on(page_html: str, title: str) -> list[str]:
    """The texts of the "Differs from the book" notes on a built page."""
    notes = re.findall(r'<div class="admonition info book">\s*<p class="admonition-title">([^<]*)</p>(.*?)</div>',
                       page_html, re.S)
    assert all(found == title for found, _ in notes), notes
    return [text_of(body) for _, body in notes]


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=lambda edition: edition.language)
def test_every_declared_difference_is_explained_beside_its_block(built_site, edition):
    for page in dict.fromkeys(difference.page for difference in book.differences()):
        noted = book.notes_on(page)
        built = (built_site / edition.prefix / Path(page).stem / "index.html").read_text()
        notes = notes_on(built, edition.words["differs"])
        # One note under each block that shows a declared section, none elsewhere.
        blocks = [[f"{m}:{s}" for m, s in pages.INCLUDE.findall(fence["includes"])]
                  for fence in pages.SNIPPET_FENCE.finditer(pages.page_text(page, edition.docs))]
        assert len(notes) == sum(any(key in noted for key in block) for block in blocks), notes
        for difference in dict.fromkeys(d for ds in noted.values() for d in ds):
            reason = text_of(difference.reasons[edition.language].replace("`", ""))
            assert any(reason in note for note in notes), f"{edition.prefix}{page} has no note saying: {reason}"
    summary = (built_site / edition.prefix / "summary" / "index.html").read_text()
    table = summary[summary.index('id="this-site-and-the-book"'):]
    rows = re.findall(r"<tr>(.*?)</tr>", table[:table.index("</table>")], re.S)[1:]
    assert len(rows) == len(book.differences()), "the summary lists every declared difference, once"
    for row, difference in zip(rows, book.differences()):
        assert text_of(difference.reasons[edition.language].replace("`", "")) in text_of(row)
