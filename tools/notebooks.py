"""The notebooks (code-part1, code-part2, exercise-solutions), made of the pages' text and code and
of the outputs of the pages' runs, in each edition: docs/notebooks/ and docs-zh/notebooks/."""

import html
import re

import nbformat
from markdown.extensions.toc import slugify

from tools import claims, pages, prerequisites, store
from tools.editions import ENGLISH, Edition
from tools.sections import Section

KERNEL = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
ADMONITION = re.compile(r'^(?:!!!|\?\?\?\+?|===) ?(\w*)(?: *"([^"]*)")?\s*$')
FENCE = re.compile(r"^(`{3,})(\w*)")  # of text, math or a shell: the code blocks are the page's pages.Block
# A heading, and its English anchor: a Chinese heading's `{ #anchor }`, else the toc extension's (of a page's title, the
# English one), kept in an <a id> for its page (tools/hooks/render_notebooks.py), since mkdocs-jupyter makes ids of
# the ASCII letters only (and Jupyter shows `{ #anchor }` as text).
HEADING = re.compile(r"^(#{1,5}) (.*?)(?: \{ *#([\w-]+) *\})?$")
LOCAL_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://)[^)]*\)")
# What only the page has: its text between these marks (an output's title, the box at its end), and a figure, but
# for one the text leads into (data-notebook="caption"), whose caption then says in words what it shows.
PAGE_ONLY = re.compile(r"<!-- page only -->.*?<!-- /page only -->", re.S)
FIGURE = re.compile(r"<figure([^>]*)>.*?(?:<figcaption>(.*?)</figcaption>.*?)?</figure>\n?", re.S)
SVG_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)


def page_parts(page: str, edition: Edition) -> list[str | tuple[Section, bool]]:
    """The page in `edition` as lines of text (as a notebook's text cell shows them) and its sections, each with
    whether it is in the page's "Code from earlier sections" block, in order."""
    text = re.sub(r"\A---\n.*?\n---\n", "", pages.page_text(page, edition.docs), flags=re.S)
    text = FIGURE.sub(lambda m: re.sub(r"</?code>", "`", m[2]) + "\n" if 'data-notebook="caption"' in m[1] else "",
                      PAGE_ONLY.sub("", claims.without_marks(prerequisites.fill(text, edition))))
    blocks = {text.count("\n", 0, block.fence.start()): block for block in pages.read(page, text=text).blocks}
    parts, fence, language, earlier, after = [], None, "", False, 0
    for number, line in enumerate(text.splitlines()):
        if block := blocks.get(number):
            parts += [(section, earlier) for section in block.sections]
            earlier, after = False, number + block.fence[0].count("\n") + 1
        if number < after:
            continue
        line = re.sub(r"^(?: {4})+", "", line)  # bodies of admonitions and tabs become plain text
        if fence and not line.startswith(fence):
            parts.append(line)
        elif match := FENCE.match(line):  # a fence closes, or opens
            fence, language = (None, language) if fence else (match[1], match[2])
            parts.append("$$" if language == "math" else line)
        elif match := ADMONITION.match(line):
            heading = match[2] if match[2] is not None else match[1].capitalize()
            earlier = heading == edition.words["earlier_code"]
            if heading and not earlier:
                parts.append(f"**{heading}**\n")
        elif not (earlier or line.startswith("<") or "--8<--" in line):
            line = LOCAL_LINK.sub(r"\1", line)
            if heading := HEADING.match(line):  # one level down, without code marks (the TOC), with an anchor
                heading_text = heading[2].replace("`", "")
                anchor = heading[3] or slugify(pages.title(page) if heading[1] == "#" else heading_text, "-")
                line = f'#{heading[1]} {heading_text} <a id="{anchor}"></a>'
            parts.append(line)
    return parts


def unwrapped(markup: str, tag: str, drop) -> str:
    """`markup` without the <tag> elements whose opening tag `drop` picks; what they held stays."""
    dropped = []  # for each element open at this point, whether it goes

    def kept(match: re.Match) -> str:
        if match[0].startswith("</"):
            return "" if dropped.pop() else match[0]
        dropped.append(drop(match[0]))
        return "" if dropped[-1] else match[0]

    return re.sub(rf"<{tag}\b[^>]*>|</{tag}>", kept, markup)


def plot_html(svg: str, caption: str) -> str:
    """A recorded plot, inline (so that it follows the palette: nbconvert shows text/html as it is), named by its
    caption; without matplotlib's <metadata> and its <g>s without attributes (lighter)."""
    svg = unwrapped(SVG_METADATA.sub("", svg[svg.index("<svg"):]), "g", lambda tag: tag == "<g>")
    svg = "\n".join(line for line in svg.splitlines() if line.strip())  # the lines of the <g>s
    style = "max-width: 100%; height: auto"  # as wide as the column at most, on a phone too
    return svg.replace("<svg ", f'<svg role="img" aria-label="{html.escape(caption, quote=True)}" style="{style}" ', 1)


def _markdown_cell(lines: list[str]):
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return [nbformat.v4.new_markdown_cell(text)] if text else []


def notebook_text(name: str, recording: store.Recording, edition: Edition) -> str:
    """The notebook `name` as stored: its pages' text in `edition`, their sections with what they printed and drew."""
    notebook_pages, words = pages.NOTEBOOKS[name], edition.words
    first, last = (pages.title(page, edition.docs).split(" ")[0] for page in (notebook_pages[0], notebook_pages[-1]))
    chapters = first if first == last else words["chapter_range"].format(first=first, last=last)
    packages = pages.needs([section for page in notebook_pages for section in pages.program(page)])
    intro = edition.spaced(words["notebook_intro"].format(chapters=chapters, packages=edition.listing(packages)))
    title = f'# {words[name]} <a id="{slugify(ENGLISH.words[name], "-")}"></a>'
    cells, seen = [nbformat.v4.new_markdown_cell(f"{title}\n\n{intro}")], set()
    for page in notebook_pages:
        markdown, noted = [], False
        for part in page_parts(page, edition):
            if isinstance(part, str):
                markdown.append(part)
                continue
            section, earlier = part
            if section.key in seen:
                continue  # an earlier page of this notebook defined it already
            if earlier and not noted:
                markdown.append(f"\n{words['earlier_code_cell']}")
                noted = True
            cells += _markdown_cell(markdown)
            markdown = []
            seen.add(section.key)
            code = nbformat.v4.new_code_cell(section.code, metadata={"section": section.key}, execution_count=len(seen))
            if section.key in recording.outputs:
                code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=recording.outputs[section.key])]
            if plot := recording.plots.get(section.key):
                caption = words[f"plot:{section.key}"]
                code.outputs.append(nbformat.v4.new_output(
                    "display_data", data={"text/html": plot_html(plot["svg"], caption), "text/plain": caption}))
            cells.append(code)
        cells += _markdown_cell(markdown)
    for number, cell in enumerate(cells):
        cell.id = f"cell-{number:03d}"  # stable ids: re-recording changes no byte
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNEL,
                                                               "language_info": {"name": "python"}})
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"


