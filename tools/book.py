"""Where the pages differ from the book, declared in snippets/book_differences.toml.

The build shows each declaration as a "Differs from the book" note under the block of its
section, on the first page of the book's notebook that shows it, and lists them all on the
summary page; tests/test_book.py checks the declarations against the book's notebooks.
"""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the backport, pinned for it in requirements-site.in
    import tomli as tomllib

from tools import pages
from tools.sections import SNIPPETS

DECLARED = SNIPPETS / "book_differences.toml"
ISSUES = "https://github.com/rasbt/LLMs-from-scratch/issues/"
ISSUE = re.compile(r"rasbt/LLMs-from-scratch#(\d+)")
TABLE_MARK = "<!-- book differences -->"  # where a page lists them all


@dataclass(frozen=True, eq=False)  # each declaration is one note: compared by identity
class Difference:
    notebook: str  # the book's notebook, e.g. "code-part2"
    cells: tuple[int, ...]  # its code cells that the page changes, counted from 1
    fix: int | None  # or: the repository's fix after printing that the page follows
    sections: tuple[str, ...]  # "module:section", under whose block the note stands
    reasons: dict[str, str]  # language -> reason
    page: str  # where the note stands: the first page of the notebook that shows a section

    def reason(self, language: str) -> str:
        """The reason in Markdown, with the repository's issue numbers as links."""
        return ISSUE.sub(lambda m: f"[{m[0]}]({ISSUES}{m[1]})", self.reasons[language])

    def book_place(self, language: str) -> str:
        """Where in the book, for the summary's table."""
        if self.fix is not None:
            link = f"[#{self.fix}]({ISSUES}{self.fix})"
            return f"印刷版与仓库（{link}）" if language == "zh" else f"printed book and repository ({link})"
        numbers = ", ".join(map(str, self.cells))
        if language == "zh":
            return f"`{self.notebook}` 第 {numbers} 个代码单元格"
        return f"`{self.notebook}`, code cell{'s' if len(self.cells) > 1 else ''} {numbers}"


@cache
def differences(path: Path = DECLARED) -> tuple[Difference, ...]:
    """Every declaration, checked: ValueError naming the entry if one is malformed."""
    found = []
    for number, entry in enumerate(tomllib.loads(path.read_text())["difference"], start=1):
        where = f"{path.name}, difference {number}"
        if entry.get("notebook") not in pages.NOTEBOOKS:
            raise ValueError(f"{where}: notebook must be one of {', '.join(pages.NOTEBOOKS)}")
        if ("cells" in entry) == ("fix" in entry):
            raise ValueError(f"{where}: give either cells (the book's code cells) or fix (an issue number)")
        shown = {page: pages.section_keys(page) for page in pages.NOTEBOOKS[entry["notebook"]]}
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
    for difference in differences():
        if difference.page == page:
            for key in difference.sections:
                notes.setdefault(key, []).append(difference)
    return notes
