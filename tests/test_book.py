"""Each code cell of the book (book/) is a block of the pages, in order, with its text (but trailing spaces, a bare
last expression in print()) and output; or the difference is declared and noted. Titles say whose a block is."""

import hashlib
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from tools import BOOK, book, pages, store
from tools.editions import EDITIONS


def printed(outputs) -> str:
    """What a notebook cell shows as text: its stream output and the value of its last expression."""
    parts = [output.get("text", "") if output["output_type"] == "stream" else output["data"].get("text/plain", "")
             for output in outputs if output["output_type"] in ("stream", "execute_result")]
    return "".join("".join(part) for part in parts)


def same_text(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def problems_of(found: dict[str, book.Comparison], declared: tuple[book.Difference, ...]) -> list[str]:
    """The comparison's problems, and the book's outputs that the pages (their recorded outputs) do not show."""
    varying, problems = store.varying_patterns(), []
    for name, comparison in found.items():
        problems += comparison.problems
        declared_cells = {number for d in declared if d.notebook == name for number in d.cells}
        for number, (_, block) in comparison.shown_at.items():
            where, book_prints = f"{name} code cell {number}", printed(comparison.cells[number - 1].outputs)
            machine_dependent = any(section in varying for section in block.keys)
            shown = same_text(book_prints) in same_text("".join(store.stored_output(s) or "" for s in block.keys))
            as_the_book = shown or machine_dependent or not book_prints.strip()  # its output
            if not as_the_book and number not in declared_cells:
                problems.append(f"{where} prints something the pages do not show (in {', '.join(block.keys)}), and "
                                f"{book.DECLARED.name} does not declare it. The book prints:\n{book_prints}")
            if as_the_book and number in declared_cells and number in comparison.identical:
                problems.append(f"{where} is declared in {book.DECLARED.name}, but the pages show it as the "
                                "book has it, output included: remove it from the declaration.")
    return problems


# --- the pinned files are the book's repository's bytes at the pinned commit

PINNED = re.compile(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", re.M)  # book/README.md's table: file, SHA-256


def unpinned(folder: Path) -> list[str]:  # each file whose SHA-256 is not the one book/README.md records
    pinned = dict(PINNED.findall((folder / "README.md").read_text()))
    files = {path.name for path in folder.iterdir() if path.name != "README.md"}
    return [f"{BOOK.name}/{name} is not the file of rasbt/LLMs-from-scratch at commit {pages.book_commit()} "
            f"(SHA-256 {digest or 'none'}, {BOOK.name}/README.md records {pinned.get(name) or 'none'}): restore it "
            f"(git checkout {BOOK.name}/{name}), or pin again as {BOOK.name}/README.md says: copy the files from the "
            "commit, then write it and each file's SHA-256 (sha256sum book/*) there."
            for name in sorted(files | set(pinned))
            if (digest := (folder / name).is_file() and hashlib.sha256((folder / name).read_bytes()).hexdigest())
            != pinned.get(name)]


@pytest.mark.parametrize("changed", [None, "DDP-script-torchrun.py", "appendix-b.ipynb"],
                         ids=["as pinned", "a byte", "a file added"])
def test_each_pinned_file_is_the_books_at_the_pinned_commit(changed, tmp_path):
    folder = BOOK if changed is None else shutil.copytree(BOOK, tmp_path / "book")
    if changed:  # one character of the book's torchrun script, or a file the book does not have
        path = folder / changed
        path.write_bytes(path.read_bytes().replace(b"rank", b"rAnk", 1) if path.exists() else b"{}")
    problems = unpinned(folder)
    assert len(problems) == (changed is not None), "\n".join(problems)
    assert all(problem.startswith(f"book/{changed} is not the file of") and "sha256sum" in problem
               for problem in problems), problems


def test_the_pages_show_the_books_code_and_outputs():
    found = book.comparisons()
    assert not (problems := problems_of(found, book.differences())), "\n\n".join(problems)
    identical = sum(len(c.identical) for c in found.values())
    assert identical >= 60, f"only {identical} of the book's 67 code cells are on the pages with the book's text"


STALE = book.Difference("code-part1", (10,), None, ("a2_tensors:shape",), {"en": "", "zh": ""},
                        "a2-understanding-tensors.md")  # declared, though the pages show the book's cell


@pytest.mark.parametrize(("changes", "reported"), [
    ({10: ("tensor2d.shape", "tensor2d.shape[0]")}, "code-part1 code cell 10 is not on the pages"),
    ({"output": (10, "torch.Size([2, 4])")}, "code-part1 code cell 10 prints something"),
    # The book's cell 12 (`tensor2d.view(3, 2)`) moved before its cell 11 (`tensor2d.reshape(3, 2)`).
    ({11: ("reshape", "view"), 12: ("view", "reshape")},
     "code-part1 code cell 12 is on the pages, but not in the book's order"),
    # Comments count: the training loop without the book's `### LOGGING`.
    ({38: ("        ### LOGGING\n", "")}, "code-part1 code cell 38 is not on the pages"),
    # Boundaries count: cell 21 (`print(model)`) as one block with cell 20, which builds the model.
    ({21: ("print(model)", "model = NeuralNetwork(50, 3)\nprint(model)")},
     "code-part1 code cell 21 is not on the pages"),
    # Imports count: A.6's dataset class without the import of Dataset before it.
    ({31: ("from torch.utils.data import Dataset\n", "")}, "code-part1 code cell 31 is not on the pages"),
    ({"declared": lambda ds: tuple(d for d in ds if d.cells != (8,))}, "code-part2 code cell 8 is not on the pages"),
    ({"declared": lambda ds: (*ds, STALE)}, "code-part1 code cell 10 is declared"),
], ids=["changed code", "changed output", "cells swapped", "comment", "cell boundary", "import", "undeclared",
        "stale declaration"])
def test_a_change_in_the_books_notebook_or_in_the_declarations_is_reported(changes, reported, tmp_path):
    changes = dict(changes)  # {code cell: (its text, replaced with)}, and "output" or "declared"
    declared = changes.pop("declared", lambda ds: ds)(book.differences())
    shutil.copytree(BOOK, tmp_path, dirs_exist_ok=True)
    notebook = nbformat.read(tmp_path / "code-part1.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if "output" in changes:
        number, text = changes.pop("output")
        code[number - 1].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": text})]
    for number, (old, new) in changes.items():
        assert old in code[number - 1].source
        code[number - 1].source = code[number - 1].source.replace(old, new)
    nbformat.write(notebook, tmp_path / "code-part1.ipynb")
    problems = problems_of(book.comparisons(tmp_path, declared), declared)
    assert len(problems) == 1 and problems[0].startswith(reported), problems


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


# --- the labels and the notes on the built pages --------------------------------------------

def text_of(text: str) -> str:  # a reason (Markdown) or a built note, as a reader reads it
    return " ".join(text.replace("`", "").split())


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=lambda edition: edition.language)
def test_every_block_says_whose_it_is_and_every_difference_is_explained_beside_it(built_site, edition):
    """A Python block is titled with the book's cells it shows, or those of its declared difference, or as ours and
    what it adds; a note under each block that shows a declared difference, and a row in the summary."""
    words, ours, wrong = edition.words, edition.words["ours"].format(adds=""), []
    for page in pages.chapter_pages():
        cells, labels = book.book_cells(pages.notebook_of(page)), book.labels(page)
        built = BeautifulSoup((built_site / edition.prefix / Path(page).stem / "index.html").read_text(), "html.parser")
        python = built.select(".md-content div.highlight.language-python")
        blocks = pages.read(page, edition.docs).blocks
        assert len(python) == len(blocks), f"{edition.prefix}{page}: a block is not of snippet sections"
        for number, (html_block, block) in enumerate(zip(python, blocks), start=1):
            title = "".join(filename.get_text() for filename in html_block.select(".filename"))
            assert html_block.select_one("pre > code").get_text().rstrip("\n") == block.code
            if label := labels.get(block.keys):  # unchanged, each of its cells is the block's code
                right = title == label.text(words) and (
                    label.changed or all(cells[n - 1].shown == block.code for n in label.cells))
            else:  # ours, and what it adds
                right = title.startswith(ours) and bool(title[len(ours):].strip())
            if not right:
                wrong.append(f"{edition.prefix}{page}, block {number} ({', '.join(block.keys)}) is titled {title!r}, "
                             "not the book's cell it shows, or ours and what it adds")
        # One note under each block that shows a declared section, none elsewhere; each says its reason.
        noted, notes = book.notes_on(page), built.select("div.admonition.info.book")  # "Differs from the book"
        assert all(note.select_one(".admonition-title").get_text() == words["differs"] for note in notes), notes
        notes = [text_of(note.get_text()) for note in notes]
        assert len(notes) == sum(any(key in noted for key in block.keys) for block in blocks), notes
        for difference in dict.fromkeys(d for ds in noted.values() for d in ds):
            reason = text_of(difference.reasons[edition.language])
            assert any(reason in note for note in notes), f"{edition.prefix}{page} has no note saying: {reason}"
    assert not wrong, "\n".join(wrong)
    summary = BeautifulSoup((built_site / edition.prefix / "summary" / "index.html").read_text(), "html.parser")
    rows = summary.find(id="this-site-and-the-book").find_next("table").select("tr")[1:]
    assert len(rows) == len(book.differences()), "the summary lists every declared difference, once"
    for row, difference in zip(rows, book.differences()):
        assert text_of(difference.reasons[edition.language]) in text_of(row.get_text())
