"""The notebook pages, as mkdocs-jupyter renders them: a cache per converter version, no search entries (the chapter
pages index the same code), its chapter page's anchors, a "Read along" box, code cells as Material code blocks, and
light pages: only the CSS rules that can match (~50 KB of ~590 KB), in a stylesheet; no markup that shows nothing."""

import hashlib
import html as html_module
import importlib.metadata
import itertools
import re
import shutil
import sys
from pathlib import Path

from mkdocs.utils import get_relative_url, write_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads this file by path
from tools import editions, pages
from tools.notebooks import unwrapped

CONVERTER = ("mkdocs-jupyter", "nbconvert", "mistune", "pygments")  # nbconvert renders with the last two


def converter_key():
    versions = " ".join(f"{name}=={importlib.metadata.version(name)}" for name in CONVERTER)
    return hashlib.sha256(versions.encode()).hexdigest()[:16]


def on_config(config):
    """A cache folder per converter version (not in mkdocs-jupyter's key) and edition (a build evicts the rest)."""
    plugin = config.plugins["mkdocs-jupyter"]  # what this hook renders the pages of
    root, folder = Path(plugin.config["cache_dir"]), f"converter-{converter_key()}"
    for old in (old for old in root.glob("converter-*") if old.name != folder):
        shutil.rmtree(old, ignore_errors=True)
    plugin.config["cache_dir"] = str(root / folder / Path(config.docs_dir).name)
    return config


# A heading's id (in the page and its TOC): its chapter page's, from the <a id> that tools/notebooks.py writes.
HEADING = re.compile(r'<h([1-6]) id="[^"]*">(.*?) <a id="([\w-]+)"></a><a class="anchor-link" href="#[^"]*"', re.S)


def on_page_content(html: str, /, *, page, config, files) -> str:
    if not page.file.src_uri.endswith(".ipynb"):
        return html
    page.meta["search"] = {"exclude": True}  # read by Material's search plugin
    anchors = {}  # heading -> its anchor

    def heading(match: re.Match) -> str:
        anchors[re.sub(r"<[^>]+>", "", html_module.unescape(match[2]))] = match[3]
        return f'<h{match[1]} id="{match[3]}">{match[2]}<a class="anchor-link" href="#{match[3]}"'

    html = HEADING.sub(heading, html)
    links = list(page.toc)
    for link in links:  # the list grows as it is walked: every heading, nested ones too
        link.id = anchors.get(link.title.strip(), link.id)
        links += link.children
    return html


STYLE = re.compile(r"<style[^>]*>(.*?)</style>\s*", re.S)
# A code cell's code, made a Material code block (<pre><code>): it gets the copy button of every other page (with its
# announced "Copied") and a Tab stop when it scrolls sideways; mkdocs-jupyter's faint copy button and scripts go.
CELL_CODE = re.compile(r'(<div class="highlight-ipynb[^"]*">)<pre>(.*?)</pre>', re.S)
# mkdocs-jupyter makes every cell and output a Tab stop: reading is not something to do with the keyboard.
CELL_TAB_STOP = re.compile(r'(<div class="jp-[^"]*"[^>]*?) tabindex="0"')
JUPYTER_COPY = re.compile(r'<div class="zeroclipboard-container">.*?</clipboard-copy>\s*</div>\s*'
                          r'|<div class="clipboard-copy-txt" id="[^"]*">.*?</div>\s*'
                          r"|<script>(?:(?!</script>).)*?clipboard-copy(?:(?!</script>).)*?</script>\s*", re.S)
# Empty collapser handles, two per cell, that mkdocs-jupyter's own CSS hides (display: none).
COLLAPSER = re.compile(r'<div class="jp-Collapser [^"]*">\s*</div>\s*')
# mkdocs-jupyter's Mermaid loader imports the library from a CDN; the notebooks have no diagrams.
CDN_MERMAID = re.compile(r'<script type="module">(?:(?!</script>).)*?cdnjs\.(?:(?!</script>).)*?</script>', re.S)

# Nine tenths of mkdocs-jupyter's CSS styles JupyterLab's own interface, which a rendered notebook lacks.
COMMENT = re.compile(r"/\*.*?\*/", re.S)
CLASSES = re.compile(r'(?<=[\s"])class="([^"]*)"')
# In a selector: what may hold a dot or a class that need not be on the page (:not(.x), [type="a.b"]).
NOT_A_CLASS = re.compile(r"\([^()]*\)|\[[^\]]*\]")
# mkdocs-jupyter scopes every selector to .jupyter-wrapper, its page-wide ones too, which then match nothing.
INSIDE_THE_PAGE = re.compile(r"\S\s+(?::root|html|body)\b")
# A statement (@charset "UTF-8";), or a rule: its prelude and its block, which may hold rules (of an @media).
RULE = re.compile(r"\s*([^{};]*;)|([^{};]*)\{((?:[^{}]|\{[^{}]*\})*)\}")


def used_rules(css: str, classes: set[str]) -> str:
    """The rules of `css` whose selectors can match on a page with these classes (other at-rules are kept)."""
    kept = []
    for statement, prelude, body in RULE.findall(css):
        prelude = prelude.strip()
        if prelude.startswith(("@media", "@supports")):
            if inner := used_rules(body, classes):
                kept.append(f"{prelude}{{{inner}}}")
        elif statement or prelude.startswith("@"):
            kept.append(statement or f"{prelude}{{{body}}}")
        elif selectors := [selector for selector in re.split(r",(?![^()]*\))", prelude)
                           if set(re.findall(r"\.(-?[_a-zA-Z][\w-]*)", NOT_A_CLASS.sub("", selector))) <= classes
                           and not INSIDE_THE_PAGE.search(selector)]:
            kept.append(f"{','.join(selectors)}{{{body}}}")
    return "\n".join(kept)


CHAPTERS = {}  # src_uri -> (title, url), filled from the nav


def on_nav(nav, /, *, config, files):
    CHAPTERS.update({page.file.src_uri: (page.title, page.url) for page in nav.pages})
    return nav


def _read_along(page, config) -> str:
    """A box on a notebook page: the chapters its cells come from, and Open in Colab."""
    name, edition = Path(page.file.src_uri).stem, editions.of(config)
    links = " · ".join(f'<a href="{get_relative_url(CHAPTERS[p][1], page.url)}">{CHAPTERS[p][0]}</a>'
                       for p in pages.NOTEBOOKS[name])
    colab = pages.colab_link(config, name, edition, "read_along_colab")
    return (f'<div class="admonition info"><p class="admonition-title">{edition.words["read_along"]}</p>'
            f"<p>{edition.words['read_along_text'].format(chapters=links)}{colab}</p></div>\n")


# A light page (at most 3,000 elements, tests/test_site_build.py), code-part1's eight chapters too: what shows
# nothing goes (a plot's, in tools/notebooks.py). mkdocs-jupyter's second cell around each code cell (5 px of
# padding), the one-child flex row around each cell, and a text cell's prompt, which its CSS hides.
TEXT_CELL_PROMPT = re.compile(r'<div class="jp-InputPrompt jp-InputArea-prompt">\s*</div>'
                              r'(?=<div class="jp-RenderedHTML)')
NO_BOX = re.compile(r'<div class="(?:jp-Cell jp-CodeCell jp-Notebook-cell(?: jp-mod-noOutputs)?'
                    r'|jp-Cell-inputWrapper)">')
# A code cell keeps the spans of keywords, strings, numbers and comments (Pygments' k*, s*, m*, c*, ow): the others
# take the code's colour in mkdocs-jupyter's CSS anyway (about 2,000 of code-part1's elements).
PLAIN_TOKEN = re.compile(r'<span(?: class="(?![kscm]|ow")[\w-]*")?>([^<]*)</span>')


def on_post_page(output: str, /, *, page, config) -> str:
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    if Path(page.file.src_uri).stem in pages.NOTEBOOKS:  # under the title, the first heading inside it
        title_end = output.find("</h1>", output.find('<div class="jupyter-wrapper">')) + len("</h1>")
        output = output[:title_end] + _read_along(page, config) + output[title_end:]
    head, body = output.split("<body", 1)
    body = CELL_TAB_STOP.sub(r"\1", JUPYTER_COPY.sub("", body))
    # Material names a code block after the nearest id, and a cell's (cell-id=cell-002) is no CSS selector.
    number = itertools.count(1)
    body = unwrapped(TEXT_CELL_PROMPT.sub("", body), "div", lambda tag: bool(NO_BOX.fullmatch(tag)))
    body = CELL_CODE.sub(lambda m: f'{m[1]}<pre id="cell-{next(number)}"><code>'
                                   f'{PLAIN_TOKEN.sub(lambda token: token[1], m[2])}</code></pre>', body)
    classes = {name for names in CLASSES.findall(body) for name in names.split()}
    css = used_rules(COMMENT.sub("", "\n".join(STYLE.findall(body))), classes)
    name = f"assets/stylesheets/jupyter-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
    write_file(css.encode(), str(Path(config.site_dir) / name))
    link = f'<link rel="stylesheet" href="{get_relative_url(name, page.url)}">\n'
    body = STYLE.sub("", STYLE.sub(lambda first: link, body, count=1))  # the first <style> becomes the link
    return head + "<body" + COLLAPSER.sub("", CDN_MERMAID.sub("", body))


