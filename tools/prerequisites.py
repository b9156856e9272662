"""What a reader needs, said once for every page: the Pythons (pyproject.toml's requires-python) and the packages
that each chapter page's code imports (requirements.txt pins them), as marks the hooks and notebooks fill in."""

import re

from tools import ROOT, pages, tomllib


def pythons() -> tuple[str, str]:
    """The oldest and the newest supported Python, from requires-python (">=3.10,<3.15": 3.10 and 3.14)."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    oldest, after = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", spec).groups()
    return f"3.{oldest}", f"3.{int(after) - 1}"


def as_code(packages: list[str]) -> list[str]:
    return [f"`{package}`" for package in packages]


def _needs_table(edition) -> str:
    rows = [[f"[{pages.title(page, edition.docs)}]({page})", edition.listing(as_code(pages.needs(pages.program(page))))]
            for page in pages.chapter_pages()]
    return pages.table([edition.words["checker_page"], edition.words["needs_column"]], rows)


MARKS = {  # mark -> what it becomes, in an edition's words
    "<!-- supported pythons -->": lambda edition: edition.words["python_range"].format(
        oldest=pythons()[0], newest=pythons()[1]),
    "<!-- oldest python -->": lambda edition: pythons()[0],
    "<!-- packages -->": lambda edition: edition.listing(as_code(pages.all_needs())),
    "<!-- pip install -->": lambda edition: f"`pip install {' '.join(pages.all_needs())}`",
    "<!-- packages by page -->": _needs_table,
}


def fill(markdown: str, edition) -> str:
    for mark, text in MARKS.items():
        try:
            markdown = markdown.replace(mark, text(edition)) if mark in markdown else markdown
        except (KeyError, ValueError):  # a missing or broken section: its own page reports it
            continue
    return markdown
