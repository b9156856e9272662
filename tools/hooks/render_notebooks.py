"""MkDocs hooks for the notebook pages (mkdocs-jupyter renders them): a cache per converter version, no search
entries (the chapter pages index the same code), the English notebook's heading anchors, plots inline, math as
MathML, a "Read along" box, code cells as Material code blocks, and light pages: only the CSS rules that can match
(~50 KB of ~590 KB), in a stylesheet, and no markup that shows nothing."""

import hashlib
import html
import importlib.metadata
import itertools
import json
import logging
import re
import shutil
import sys
from pathlib import Path

import latex2mathml.converter
import markdown.extensions.toc
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads this file by path
from tools import ROOT, editions, pages
from tools.store import output_path

log = logging.getLogger("mkdocs.hooks")

CONVERTER = ("mkdocs-jupyter", "nbconvert", "mistune", "pygments")  # nbconvert renders with the last two


def converter_key():
    versions = " ".join(f"{name}=={importlib.metadata.version(name)}" for name in CONVERTER)
    return hashlib.sha256(versions.encode()).hexdigest()[:16]


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """A cache folder per converter version (not in mkdocs-jupyter's key) and edition (a build evicts the rest)."""
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is None or not plugin.config["cache"]:
        return config
    root, folder = Path(plugin.config["cache_dir"]), f"converter-{converter_key()}"
    for old in (old for old in root.glob("converter-*") if old.name != folder):
        shutil.rmtree(old, ignore_errors=True)
    plugin.config["cache_dir"] = str(root / folder / Path(config.docs_dir).name)
    return config


# A heading's id, in the page and its table of contents: mkdocs-jupyter makes it from ASCII letters only (a Chinese
# heading got id=""), so each takes the anchor of its place in the English notebook, as the Chinese pages do.
HEADING = re.compile(r'(<h[1-6] id=")[^"]*(">(?:(?!</h).)*?<a class="anchor-link" href="#)[^"]*(")', re.S)
MARKDOWN_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def _english_anchors(name: str, config: MkDocsConfig) -> list[str]:
    """The anchors of the headings of the English notebook `name`, in order, as the toc extension makes them."""
    toc = config.mdx_configs.get("toc", {})
    slugify, used, anchors = toc.get("slugify", markdown.extensions.toc.slugify), set(), []
    for cell in json.loads((editions.ENGLISH.notebooks / f"{name}.ipynb").read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            text = re.sub(r"^(`{3,}|\$\$).*?^\1", "", "".join(cell["source"]), flags=re.S | re.M)
            for heading in MARKDOWN_HEADING.findall(text):
                anchors.append(markdown.extensions.toc.unique(slugify(heading, toc.get("separator", "-")), used))
    return anchors


def _toc_links(links):
    for link in links:
        yield link
        yield from _toc_links(link.children)


def on_page_content(html: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    if not page.file.src_uri.endswith(".ipynb"):
        return html
    page.meta["search"] = {"exclude": True}  # read by Material's search plugin
    if (name := Path(page.file.src_uri).stem) not in pages.NOTEBOOKS:
        return html
    anchors, links, headings = _english_anchors(name, config), list(_toc_links(page.toc)), HEADING.findall(html)
    if not len(links) == len(headings) == len(anchors):
        log.warning(f"{page.file.src_uri} has {len(headings)} headings ({len(links)} in its table of contents), "
                    f"its English notebook {len(anchors)}: run `make outputs`")
        return html
    for link, anchor in zip(links, anchors):
        link.id = anchor
    anchor = iter(anchors)
    return HEADING.sub(lambda h: f"{h[1]}{(a := next(anchor))}{h[2]}{a}{h[3]}", html)


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


def used_rules(css: str, classes: set[str]) -> str:
    """The rules of `css` whose selectors can match on a page with these classes (other at-rules are kept)."""
    kept, start = [], 0
    while (brace := css.find("{", start)) >= 0:
        end, depth = brace + 1, 1
        while depth:
            depth += {"{": 1, "}": -1}.get(css[end], 0)
            end += 1
        prelude, body = css[start:brace].strip(), css[brace + 1:end - 1]
        if ";" in prelude:  # an @import or @charset before it, which has no block
            statements, prelude = prelude.rsplit(";", 1)
            kept.append(statements + ";")
            prelude = prelude.strip()
        if prelude.startswith(("@media", "@supports")):
            if inner := used_rules(body, classes):
                kept.append(f"{prelude}{{{inner}}}")
        elif prelude.startswith("@"):
            kept.append(f"{prelude}{{{body}}}")
        elif selectors := [selector for selector in re.split(r",(?![^()]*\))", prelude)
                           if set(re.findall(r"\.(-?[_a-zA-Z][\w-]*)", NOT_A_CLASS.sub("", selector))) <= classes
                           and not INSIDE_THE_PAGE.search(selector)]:
            kept.append(f"{','.join(selectors)}{{{body}}}")
        start = end
    return "\n".join(kept)


CHAPTERS = {}  # src_uri -> (title, url), filled from the nav


def on_nav(nav: Navigation, /, *, config: MkDocsConfig, files: Files) -> Navigation:
    CHAPTERS.update({page.file.src_uri: (page.title, page.url) for page in nav.pages})
    return nav


def _read_along(page, config) -> str:
    """A box on a notebook page: the chapters its cells come from, and Open in Colab."""
    name, edition = Path(page.file.src_uri).stem, editions.of(config)
    words = edition.words
    links = " · ".join(f'<a href="{get_relative_url(CHAPTERS[p][1], page.url)}">{CHAPTERS[p][0]}</a>'
                       for p in pages.NOTEBOOKS[name])
    colab = pages.colab_link(config, name, edition, "read_along_colab")
    return (f'<div class="admonition info"><p class="admonition-title">{words["read_along"]}</p>'
            f"<p>{words['read_along_text'].format(chapters=links)}{colab}</p></div>\n")


# Display math in the text cells (MathJax in Jupyter and Colab) as MathML, as on the chapter pages: no script, no
# network. mkdocs-jupyter 0.26 passes `$$…$$` through; 0.27 (Python 3.12 and newer) writes `\[…\]`.
NOTEBOOK_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]", re.S)


# A plot, which nbconvert shows as an <img> of its SVG in base64: the notebook's own SVG and text (what the plot
# shows), read from the .ipynb, take its place unread; inline, it follows the palette as on the chapter pages.
NOTEBOOK_PLOT = re.compile(r'<img [^>]*?src="data:image/svg\+xml;base64,[^"]*"[^>]*>')


def _plots(page: Page) -> list[str]:
    plots = []  # in page order, each an inline SVG named by what it shows
    for cell in json.loads(Path(page.file.abs_src_path).read_text())["cells"]:
        for data in (output.get("data", {}) for output in cell.get("outputs", [])):
            if "image/svg+xml" in data:
                svg, recorded = "".join(data["image/svg+xml"]), output_path(cell["metadata"]["section"], ".svg")
                if not recorded.exists() or recorded.read_text() != svg:
                    log.warning(f"{page.file.src_uri}: a plot differs from {recorded.relative_to(ROOT)}; "
                                "run `make outputs`")
                caption = html.escape("".join(data["text/plain"]), quote=True)
                svg = _unwrapped(SVG_METADATA.sub("", svg[svg.index("<svg"):]), "g", lambda tag: tag == "<g>")
                plots.append(svg.replace("<svg ", f'<svg role="img" aria-label="{caption}" ', 1))
    return plots


# A light page (at most 3,000 elements, tests/test_site_build.py), code-part1's eight chapters too: what shows
# nothing goes. Matplotlib's <g>s without attributes and its <metadata>; mkdocs-jupyter's second cell around each
# code cell (5 px of padding), the one-child flex row around each cell, and a text cell's prompt, which its CSS hides.
SVG_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
TEXT_CELL_PROMPT = re.compile(r'<div class="jp-InputPrompt jp-InputArea-prompt">\s*</div>'
                              r'(?=<div class="jp-RenderedHTML)')
NO_BOX = re.compile(r'<div class="(?:jp-Cell jp-CodeCell jp-Notebook-cell(?: jp-mod-noOutputs)?'
                    r'|jp-Cell-inputWrapper)">')
# A code cell keeps the spans of keywords, strings, numbers and comments (Pygments' k*, s*, m*, c*, ow): the others
# take the code's colour in mkdocs-jupyter's CSS anyway (about 2,000 of code-part1's elements).
PLAIN_TOKEN = re.compile(r'<span(?: class="(?![kscm]|ow")[\w-]*")?>([^<]*)</span>')


def _colours(code: str) -> str:
    return PLAIN_TOKEN.sub(r"\1", code)


def _unwrapped(markup: str, tag: str, drop) -> str:
    """`markup` without the <tag> elements whose opening tag `drop` picks; what they held stays."""
    kept, dropped, start = [], [], 0
    for match in re.finditer(rf"<{tag}\b[^>]*>|</{tag}>", markup):
        if match[0].startswith("</"):
            gone = dropped.pop()
        else:
            dropped.append(gone := drop(match[0]))
        if gone:
            kept.append(markup[start:match.start()])
            start = match.end()
    return "".join(kept) + markup[start:]


def on_post_page(output: str, /, *, page: Page, config: MkDocsConfig) -> str:
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    output = NOTEBOOK_MATH.sub(
        lambda m: latex2mathml.converter.convert(html.unescape(m[1] or m[2]).strip(), display="block"), output)
    plots = iter(_plots(page))
    output = NOTEBOOK_PLOT.sub(lambda match: next(plots, match[0]), output)
    if Path(page.file.src_uri).stem in pages.NOTEBOOKS:  # under the title, the first heading inside it
        title_end = output.find("</h1>", output.find('<div class="jupyter-wrapper">')) + len("</h1>")
        output = output[:title_end] + _read_along(page, config) + output[title_end:]
    head, body = output.split("<body", 1)
    body = CELL_TAB_STOP.sub(r"\1", JUPYTER_COPY.sub("", body))
    # Material names a code block after the nearest id, and a cell's (cell-id=cell-002) is no CSS selector.
    number = itertools.count(1)
    body = _unwrapped(TEXT_CELL_PROMPT.sub("", body), "div", lambda tag: bool(NO_BOX.fullmatch(tag)))
    body = CELL_CODE.sub(lambda m: f'{m[1]}<pre id="cell-{next(number)}"><code>{_colours(m[2])}</code></pre>', body)
    classes = {name for names in CLASSES.findall(body) for name in names.split()}
    css = used_rules(COMMENT.sub("", "\n".join(STYLE.findall(body))), classes)
    name = f"assets/stylesheets/jupyter-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
    target = Path(config.site_dir) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(css)
    link = f'<link rel="stylesheet" href="{get_relative_url(name, page.url)}">\n'
    body = STYLE.sub("", STYLE.sub(lambda first: link, body, count=1))  # the first <style> becomes the link
    return head + "<body" + COLLAPSER.sub("", CDN_MERMAID.sub("", body))


