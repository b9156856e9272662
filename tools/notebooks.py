"""The notebooks (code-part1, code-part2, exercise-solutions), made of the pages' text and code and
of the outputs of the pages' runs, in each edition: docs/notebooks/ and docs-zh/notebooks/."""

import re
from dataclasses import dataclass

import nbformat

from tools import claims, pages, prerequisites
from tools.editions import Edition

KERNEL = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
ADMONITION = re.compile(r'^(?:!!!|\?\?\?\+?|===) ?(\w*)(?: *"([^"]*)")?\s*$')
FENCE = re.compile(r"^(`{3,})(\w*)")
LOCAL_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://)[^)]*\)")
# What only the page has: its text between these marks (an output's title, the box at its end), and a figure, but
# for one the text leads into (data-notebook="caption"), whose caption then says in words what it shows.
PAGE_ONLY = re.compile(r"<!-- page only -->.*?<!-- /page only -->", re.S)
FIGURE = re.compile(r"<figure([^>]*)>.*?(?:<figcaption>(.*?)</figcaption>.*?)?</figure>\n?", re.S)


def _figure(match: re.Match) -> str:
    return re.sub(r"</?code>", "`", match[2]) + "\n" if 'data-notebook="caption"' in match[1] else ""


@dataclass(frozen=True)
class Code:  # an include of a snippet section: the `index`th cell of the page's program
    index: int
    earlier: bool  # inside the page's "Code from earlier sections" block


def page_parts(page: str, edition: Edition) -> list[str | Code]:
    """The page in `edition` as lines of text (as a notebook's text cell shows them) and code cells, in order."""
    text = re.sub(r"\A---\n.*?\n---\n", "", pages.page_text(page, edition.docs), flags=re.S)
    text = FIGURE.sub(_figure, PAGE_ONLY.sub("", claims.without_marks(prerequisites.fill(text, edition))))
    parts, fence, language, include, earlier = [], None, "", 0, False  # None in parts: a line left out
    for line in text.splitlines():
        line = re.sub(r"^(?: {4})+", "", line)  # bodies of admonitions and tabs become plain text
        if fence and not line.startswith(fence):
            if pages.INCLUDE.match(line):
                parts.append(Code(include, earlier))
                include += 1
            elif language != "python":
                parts.append(line)
        elif match := FENCE.match(line):  # a fence closes, or opens
            fence, language, earlier = (None, language, False) if fence else (match[1], match[2], earlier)
            parts.append({"math": "$$", "python": None}.get(language, line))
        elif match := ADMONITION.match(line):
            heading = match[2] if match[2] is not None else match[1].capitalize()
            earlier = heading == edition.words["earlier_code"]
            parts.append(None if earlier or not heading else f"**{heading}**\n")
        elif not (earlier or line.startswith("<") or "--8<--" in line):
            if heading := re.match(r"^(#{1,5}) (.*?)(?: \{ *#[\w-]+ *\})?$", line):
                # one level down; no code marks (the TOC) and no `{ #anchor }`, which Jupyter shows as text
                line = f"#{heading[1]} {heading[2].replace('`', '')}"
            parts.append(LOCAL_LINK.sub(r"\1", line))
    return [part for part in parts if part is not None]


def _markdown_cell(lines: list[str]):
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return [nbformat.v4.new_markdown_cell(text)] if text else []


def notebook_text(name: str, runs: dict[str, dict], outputs: dict[str, str], edition: Edition) -> str:
    """The notebook `name` as it is stored: text cells from its pages in `edition`, code cells with outputs."""
    notebook_pages, words = pages.NOTEBOOKS[name], edition.words
    first, last = (pages.title(page, edition.docs).split(" ")[0] for page in (notebook_pages[0], notebook_pages[-1]))
    chapters = first if first == last else words["chapter_range"].format(first=first, last=last)
    packages = pages.needs([cell for page in notebook_pages for cell in runs[page]["cells"]])
    intro = edition.spaced(words["notebook_intro"].format(chapters=chapters, packages=edition.listing(packages)))
    cells = [nbformat.v4.new_markdown_cell(f"# {words[name]}\n\n{intro}")]
    seen = set()
    for page in notebook_pages:
        program, markdown, noted = runs[page]["cells"], [], False
        for part in page_parts(page, edition):
            if isinstance(part, str):
                markdown.append(part)
                continue
            cell = program[part.index]
            if cell.key in seen:
                continue  # an earlier page of this notebook defined it already
            if part.earlier and not noted:
                markdown.append(f"\n{words['earlier_code_cell']}")
                noted = True
            cells += _markdown_cell(markdown)
            markdown = []
            seen.add(cell.key)
            code = nbformat.v4.new_code_cell(cell.code, metadata={"section": cell.key}, execution_count=len(seen))
            if cell.key in outputs:
                code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=outputs[cell.key])]
            if plot := runs[page]["plots"].get(cell.key):
                code.outputs.append(nbformat.v4.new_output(
                    "display_data", data={"image/svg+xml": plot["svg"], "text/plain": words[f"plot:{cell.key}"]}))
            cells.append(code)
        cells += _markdown_cell(markdown)
    for number, cell in enumerate(cells):
        cell.id = f"cell-{number:03d}"  # stable ids: re-recording changes no byte
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNEL,
                                                               "language_info": {"name": "python"}})
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"


