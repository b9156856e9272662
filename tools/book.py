"""The book's cells on the pages, and where the pages differ from the book. Each code cell of the book's notebooks
(pinned in book/) is one block of its pages, with the book's text, or snippets/book_differences.toml declares the
difference: a "Differs from the book" note under its section's block, on the first page that shows it."""

import ast
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tools import BOOK, pages, tomllib
from tools.editions import EDITIONS
from tools.sections import SNIPPETS

DECLARED = SNIPPETS / "book_differences.toml"
ISSUES = "https://github.com/rasbt/LLMs-from-scratch/issues/"
ISSUE = re.compile(r"rasbt/LLMs-from-scratch#(\d+)")
TABLE_MARK = "<!-- book differences -->"  # where a page lists them all


def linked(markdown: str) -> str:  # rasbt/LLMs-from-scratch#N as a link to the issue
    return ISSUE.sub(lambda m: f"[{m[0]}]({ISSUES}{m[1]})", markdown)


@dataclass(frozen=True, eq=False)  # each declaration is one note: compared by identity
class Difference:
    notebook: str  # the book's notebook, e.g. "code-part2"
    cells: tuple[int, ...]  # its code cells that the page changes, counted from 1
    fix: int | None  # or: the repository's fix after printing that the page follows
    sections: tuple[str, ...]  # "module:section", under whose block the note stands
    reasons: dict[str, str]  # language -> reason
    page: str  # where the note stands: the first page of the notebook that shows a section

    def reason(self, language: str) -> str:
        return linked(self.reasons[language])

    def book_place(self, language: str) -> str:  # for the summary's table
        words = EDITIONS[language].words
        if self.fix is not None:
            return words["book_fix"].format(link=f"[#{self.fix}]({ISSUES}{self.fix})")
        return words["book_code_cells" if len(self.cells) > 1 else "book_code_cell"].format(
            notebook=self.notebook, numbers=", ".join(map(str, self.cells)))


@cache
def differences(path: Path = DECLARED) -> tuple[Difference, ...]:
    """Every declaration; ValueError naming the entry if one is malformed."""
    found = []
    for number, entry in enumerate(tomllib.loads(path.read_text())["difference"], start=1):
        where = f"{path.name}, difference {number}"
        if entry.get("notebook") not in pages.NOTEBOOKS:
            raise ValueError(f"{where}: notebook must be one of {', '.join(pages.NOTEBOOKS)}")
        if ("cells" in entry) == ("fix" in entry):
            raise ValueError(f"{where}: give either cells (the book's code cells) or fix (an issue number)")
        shown = {page: [section.key for section in pages.program(page)] for page in pages.NOTEBOOKS[entry["notebook"]]}
        if not entry.get("sections") or not set(entry["sections"]) <= {key for keys in shown.values() for key in keys}:
            raise ValueError(f"{where}: sections must name sections shown on the pages of {entry['notebook']}")
        if not (entry.get("reason") and entry.get("reason_zh")):
            raise ValueError(f"{where}: give the reason in English (reason) and Chinese (reason_zh)")
        found.append(Difference(entry["notebook"], tuple(entry.get("cells", ())), entry.get("fix"),
                                tuple(entry["sections"]), {"en": entry["reason"], "zh": entry["reason_zh"]},
                                next(page for page, keys in shown.items() if set(entry["sections"]) & set(keys))))
    return tuple(found)


def notes_on(page: str) -> dict[str, list[Difference]]:
    """{"module:section": the differences whose note stands under that section's block on `page`}."""
    notes = {}
    for difference in (d for d in differences() if d.page == page):
        for key in difference.sections:
            notes.setdefault(key, []).append(difference)
    return notes


@dataclass(frozen=True)
class BookCell:  # a code cell of the book's notebook: what one block of ours shows, or a declared difference does
    number: int  # counted from 1, code cells only, as snippets/book_differences.toml counts
    source: str
    outputs: tuple[dict, ...]  # as the notebook stores them

    @property
    def shown(self) -> str:
        """As a page shows it: no trailing spaces, a bare last expression printed (a script prints nothing)."""
        lines = [line.rstrip() for line in self.source.splitlines()]
        try:
            last = ast.parse(self.source).body[-1]
        except (SyntaxError, IndexError):  # not Python (an IPython magic such as %timeit), or no code
            last = None
        if isinstance(last, ast.Expr) and any(output["output_type"] == "execute_result" for output in self.outputs):
            end, start = last.end_lineno - 1, last.lineno - 1
            lines[end] = f"{lines[end][:last.end_col_offset]}){lines[end][last.end_col_offset:]}"
            lines[start] = f"{lines[start][:last.col_offset]}print({lines[start][last.col_offset:]}"
        return "\n".join(lines).strip("\n")


def book_cells(name: str, folder: Path = BOOK) -> list[BookCell]:
    code = [cell for cell in json.loads((folder / f"{name}.ipynb").read_text())["cells"] if cell["cell_type"] == "code"]
    return [BookCell(number, "".join(cell["source"]), tuple(cell.get("outputs", ())))
            for number, cell in enumerate(code, start=1)]


@dataclass
class Comparison:  # one notebook of the book against the blocks of its pages
    cells: list[BookCell]
    identical: list[int]  # the cells that a block shows with the book's text
    shown_at: dict[int, tuple[str, pages.Block]]  # cell -> the page and block that show it, declared ones too
    problems: list[str]


def compare(name: str, cells: list[BookCell], declared: tuple[Difference, ...]) -> Comparison:
    """Find each cell of the book's notebook `name`, in the book's order, in the blocks of its pages."""
    placed = [(page, block) for page in pages.NOTEBOOKS[name] for block in pages.read(page).blocks]
    declared = {number: set(d.sections) for d in declared if d.notebook == name for number in d.cells}
    result, cursor = Comparison(cells, [], {}, []), 0
    for cell in cells:
        where, text = f"{name} code cell {cell.number}", cell.shown
        at = next((i for i in range(cursor, len(placed)) if placed[i][1].code == text), None)
        if at is not None:
            result.identical.append(cell.number)
        elif cell.number in declared:
            showing = [i for i, (_, block) in enumerate(placed) if declared[cell.number] & set(block.keys)]
            at = next((i for i in showing if i >= cursor), showing[0])
        elif any(block.code == text for _, block in placed):
            result.problems.append(f"{where} is on the pages, but not in the book's order: it comes before "
                                   f"cells that the book runs first.\n{text}")
        else:
            result.problems.append(f"{where} is not on the pages as the book has it (one block with its text, "
                                   f"comments included), and {DECLARED.name} does not declare it: show it, or "
                                   f"declare why not.\n{text}")
        if at is not None:  # shown, as the book has it or as declared
            result.shown_at[cell.number] = placed[at]
            cursor = max(cursor, at + 1)
    return result


@cache
def comparisons(folder: Path = BOOK, declared: tuple[Difference, ...] | None = None) -> dict[str, Comparison]:
    declared = differences() if declared is None else declared
    return {name: compare(name, book_cells(name, folder), declared) for name in pages.NOTEBOOKS}


@dataclass(frozen=True)
class Label:  # of a block that shows cells of the book's notebook
    notebook: str
    cells: tuple[int, ...]
    changed: bool  # a declared difference: its note stands under the block

    def text(self, words: dict[str, str]) -> str:
        first, last, many = self.cells[0], self.cells[-1], len(self.cells) > 1
        numbers = f"{first}–{last}" if self.cells == tuple(range(first, last + 1)) and many else ", ".join(
            map(str, self.cells))
        title = words["book_cells" if many else "book_cell"].format(notebook=self.notebook, cells=numbers)
        return title + (words["changed"] if self.changed else "")


def labels(page: str) -> dict[tuple[str, ...], Label]:
    """{the keys of a block on `page` (in either edition): the book's cells it shows}; blocks not in it are ours."""
    name = pages.notebook_of(page)  # a chapter page: every one is a notebook's
    declared, cells = {n for d in differences() if d.notebook == name for n in d.cells}, {}
    for number, (where, block) in comparisons()[name].shown_at.items():
        if where == page:
            cells.setdefault(block.keys, []).append(number)
    return {keys: Label(name, tuple(numbers), bool(declared & set(numbers))) for keys, numbers in cells.items()}
