"""MkDocs hooks for the pages: render what was recorded, never execute anything.

- Under every code block that includes snippet sections, add what they printed when recorded
  (an "Output" block), and refuse an output whose code has changed since it was recorded, or
  one that is missing: `mkdocs build --strict` fails naming the section; `mkdocs serve` shows
  the page with a visible mark instead, so the live preview never stops.
- Serve each chapter page's code as one script that runs alone (downloads/PAGE.py), the DDP
  scripts, and a "Run it yourself" box with the script, the notebook and an Open in Colab link.
- Render math to MathML at build time, so formulas need no script and no network.
- Leave out of the search index what is not prose: a whole embedded script (search previews
  would show 200 lines of code) and the collapsed "Code from earlier sections" block.
- Serve both editions (mkdocs.yml, mkdocs.zh.yml): what these hooks write is in the edition's
  language (tools/editions.py), and the language switch leads to the same page in the other one.

The notebook pages have hooks of their own, beside this file (notebooks.py).
"""

import json
import logging
import os
import re
import sys
import textwrap
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import latex2mathml.converter
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads this file by path
# `mkdocs serve` loads this file again on every change; import our modules afresh with it.
for name in [name for name in sys.modules if name == "tools" or name.startswith("tools.")]:
    del sys.modules[name]

from tools import book, checker, editions, pages, plots  # noqa: E402
from tools.sections import OUTPUTS, ROOT, section_code  # noqa: E402
from tools.store import GPU_OUTPUTS, MANIFEST, output_path, tomllib, varying_patterns  # noqa: E402

log = logging.getLogger("mkdocs.hooks")
# jieba (the search's Chinese word splitter) prints its dictionary's loading times on every build.
logging.getLogger("jieba").setLevel(logging.WARNING)
DOWNLOADS = ["scripts/*.py", "scripts/*.sbatch"]
SERVING = "APPENDIX_A_SERVING"  # set by on_startup; an environment variable outlives the reloads of this file

def on_startup(*, command: str, dirty: bool) -> None:
    os.environ[SERVING] = "1" if command == "serve" else ""


RECORDED = {}  # snippets/outputs/recorded.json, read once per build (on_pre_build)


def on_pre_build(*, config: MkDocsConfig) -> None:
    RECORDED.clear()
    RECORDED.update(json.loads(MANIFEST.read_text()))


def serving() -> bool:
    return bool(os.environ.get(SERVING))


def math_block(source, language, css_class, options, md, **kwargs):
    return latex2mathml.converter.convert(source.strip(), display="block")


def math_inline(source, language, css_class, md):
    return latex2mathml.converter.convert(source.strip())


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The edition's own site_url (the Chinese one is published under the English site, in zh/), its
    language switch, and the math renderers."""
    edition = editions.of(config)
    english_url = config.site_url.removesuffix(edition.prefix)
    config.site_url = urljoin(english_url, edition.prefix)
    root = urlsplit(english_url).path
    # Material's language switch, with each edition's root; on each page, partials/alternate.html
    # leads to the same page in the other language instead.
    config.extra["alternate"] = [{"name": other.name, "lang": other.language, "link": root + other.prefix,
                                  "not_found": other.words["not_found"]}  # for overrides/404.html
                                 for other in editions.EDITIONS.values()]
    # The theme's words that Material leaves to the site: the palette toggle, overrides/*.html.
    for palette, toggle in zip(config.theme["palette"], ("dark_mode", "light_mode")):
        palette["toggle"]["name"] = edition.words[toggle]
    config.extra["words"] = {key: edition.words[key] for key in (
        "download_notebook", "page_not_found", "page_not_found_text", "search_the_site", "go_home", "contents")}
    config.mdx_configs.setdefault("toc", {})["permalink_title"] = edition.words["permalink"]
    fences = config.mdx_configs.setdefault("pymdownx.superfences", {}).setdefault("custom_fences", [])
    fences.append({"name": "math", "class": "math", "format": math_block})
    inline = config.mdx_configs.setdefault("pymdownx.inlinehilite", {}).setdefault("custom_inline", [])
    inline.append({"name": "math", "class": "math", "format": math_inline})
    return config


def on_files(files: Files, /, *, config: MkDocsConfig) -> Files:
    edition = editions.of(config)
    if edition is not editions.ENGLISH:  # the stylesheet and script are the English edition's
        for path in sorted((editions.ENGLISH.docs / "assets").glob("*.*")):
            if not files.get_file_from_path(f"assets/{path.name}"):
                files.append(File.generated(config, f"assets/{path.name}", abs_src_path=str(path)))
    for pattern in DOWNLOADS:
        for path in sorted(ROOT.glob(pattern)):
            files.append(File.generated(config, f"downloads/{path.relative_to(ROOT).as_posix()}",
                                        abs_src_path=str(path)))
    for page in pages.chapter_pages():
        try:
            script = pages.download_text(page)
        except (KeyError, ValueError):  # a missing or broken section: the page itself says so
            continue
        files.append(File.generated(config, f"downloads/{pages.download_name(page)}", content=script))
    try:  # the checker of a reader's machine: every page's download and recorded outputs, in one file
        files.append(File.generated(config, f"downloads/{checker.NAME}", content=checker.generate()))
    except (KeyError, ValueError):  # a missing or broken section: its page says so
        pass
    for plot in sorted(OUTPUTS.glob("*/*.svg")):
        files.append(File.generated(config, f"plots/{plot.parent.name}/{plot.name}", abs_src_path=str(plot)))
    return files


# ---------------------------------------------------------------------------------------------
# Recorded outputs under the code

def _problem(message: str, title: str = "Output out of date: run make outputs") -> str:
    """Report a problem: in a build it fails `--strict`; while serving, the page shows it too."""
    log.warning(message)
    return f'!!! failure "{title}"\n    {message}\n\n' if serving() else ""


def _missing(module: str, section: str) -> bool:
    try:
        section_code(module, section)
    except (KeyError, ValueError):
        return True
    return False


def _output_block(title: str, outputs: list[Path]) -> str:
    """A text block of recorded outputs, each included by its line range: pymdownx.snippets adds an
    empty line after a whole file that ends with a newline, which would part two outputs."""
    includes = "".join(f'--8<-- "{path.relative_to(ROOT).as_posix()}:1:{len(path.read_text().splitlines())}"\n'
                       for path in outputs)
    return f'```text title="{title}"\n{includes}```'


def _title(cells, varying, environment, edition) -> str:
    words = edition.words
    reasons = [varying[cell.key].get(f"reason_{edition.language}", varying[cell.key]["reason"])
               for cell in cells if cell.key in varying]
    if not reasons:
        return words["output"]
    return f"{words['output']} · {edition.recorded(environment)} · {words['and'].join(reasons)}"


def _with_outputs(markdown: str, page: str, edition) -> str:
    source = f"{edition.docs.name}/{page}"
    try:
        cells = pages.program(page, markdown)
    except (KeyError, ValueError) as error:  # pymdownx.snippets stops a build on it; serving, show the page
        if serving():
            markdown = pages.INCLUDE.sub(lambda m: "" if _missing(*m.groups()) else m[0], markdown)
        return _problem(f"{source}: {error.args[0]}", "Missing code") + markdown  # no outputs until fixed
    recorded = RECORDED
    entries = recorded["pages"].get(page, {})
    current = dict(zip((cell.key for cell in cells), pages.fingerprints(cells)))
    varying = varying_patterns()
    by_key = {cell.key: cell for cell in cells}
    notes = book.notes_on(page)

    def add_output(match):
        marks = ""
        fence_cells = [by_key[f"{m}:{s}"] for m, s in pages.INCLUDE.findall(match["includes"])]
        for cell in fence_cells:
            entry = entries.get(cell.key)
            where = f"snippets/{cell.module}.py, section '{cell.section}' on {source}"
            if entry is None or entry["code"] != current[cell.key]:
                marks += _problem(f"{where}: its code (or code before it on the page) changed since its "
                                  "output was recorded; run `make outputs`.")
            elif entry["prints"] and not output_path(cell.key, ".txt").exists():
                marks += _problem(f"{where}: its recorded output is missing; run `make outputs`.")
        printed = [cell for cell in fence_cells if output_path(cell.key, ".txt").exists()]
        after = []  # what goes under the block, before it is indented as the block is
        if printed:
            title = _title(printed, varying, recorded["environment"], edition)
            after.append(_output_block(title, [output_path(c.key, ".txt") for c in printed]))
            gpu = [output_path(c.key, ".txt", GPU_OUTPUTS) for c in printed if c.key in varying]
            if gpu := [path for path in gpu if path.exists()]:  # recorded by `make gpu-check` on a CUDA machine
                environment = json.loads((GPU_OUTPUTS / "recorded.json").read_text())["environment"]
                after.append(_output_block(f'{edition.words["output_on_gpu"]} · {edition.recorded(environment)}', gpu))
        for cell in fence_cells:  # a plot drawn at record time from what the code computed
            plot = output_path(cell.key, ".plot.json")
            if (page, cell.key) in plots.PLOTS and plot.exists():
                alt = json.loads(plot.read_text())["title"]
                alt = edition.words.get(alt, alt)
                after.append(f'<figure class="plot" markdown="span">\n'
                             f'![{alt}](plots/{cell.module}/{cell.section}{edition.plot_suffix})\n'
                             f"<figcaption>{alt}</figcaption>\n</figure>")
        if differences := list(dict.fromkeys(d for cell in fence_cells for d in notes.get(cell.key, []))):
            after.append(f'!!! info book "{edition.words["differs"]}"\n'
                         + "".join(f"\n    {d.reason(edition.language)}\n" for d in differences))
        if marks:
            after.append(marks)
        return match[0] + "".join("\n\n" + textwrap.indent(part.rstrip("\n"), match["indent"]) for part in after)

    return pages.SNIPPET_FENCE.sub(add_output, markdown)


# ---------------------------------------------------------------------------------------------
# "Run it yourself"

def _run_it_yourself(page, config, edition) -> str:
    src, words = page.file.src_uri, edition.words
    name = pages.download_name(src)
    script = get_relative_url(f"downloads/{name}", src)
    links = [words["download"].format(script=f'[`{name}`]({script}){{ download="{name}" }}')]
    if notebook := pages.notebook_of(src):
        colab = pages.colab_url(config, notebook, edition)
        links.append(words["notebook"].format(
            notebook=f"[{notebook}]({get_relative_url(f'notebooks/{notebook}.ipynb', src)})")
            + (words["colab"].format(url=colab) if colab else ""))
    return f'!!! tip "{words["run_it_yourself"]}"\n\n    ' + words["or"].join(links) + words["full_stop"] + "\n\n"


def _differences_table(edition) -> str:
    """Every declared difference from the book, as a table (on the summary page)."""
    words = edition.words
    rows = [f"| {words['book_column']} | {words['page_column']} | {words['why_column']} |", "| --- | --- | --- |"]
    for difference in book.differences():
        page_link = f"[{pages.title(difference.page, edition.docs)}]({difference.page})"
        rows.append(f"| {difference.book_place(edition.language)} | {page_link} "
                    f"| {difference.reason(edition.language)} |")
    return "\n".join(rows)


def _glossary_table() -> str:
    """The Chinese edition's terms (tools/glossary.zh.toml), as a table; a variant is shown without
    its regular expression's lookarounds (笔记本, not 笔记本(?!电脑))."""
    rows = ["| English | 中文 | Not | Note |", "| --- | --- | --- | --- |"]
    for term in tomllib.loads(editions.GLOSSARY.read_text())["term"]:
        avoid = "、".join(re.sub(r"\(\?<?[!=][^)]*\)| \?", "", variant) for variant in term.get("avoid", []))
        rows.append(f"| {term['english']} | {term['chinese']} | {avoid} | {term.get('note', '')} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    src, edition = page.file.src_uri, editions.of(config)
    if book.TABLE_MARK in markdown:
        markdown = markdown.replace(book.TABLE_MARK, _differences_table(edition))
    if editions.GLOSSARY_MARK in markdown:
        markdown = markdown.replace(editions.GLOSSARY_MARK, _glossary_table())
    if src not in pages.chapter_pages():
        return markdown
    markdown = _with_outputs(markdown, src, edition)
    box = _run_it_yourself(page, config, edition)
    if page.meta.get("run_it_yourself") == "at the end":  # e.g. not above the exercises' solutions
        return f"{markdown.rstrip()}\n\n{box}"
    title, _, rest = markdown.partition("\n")  # after the title, which stays first
    return f"{title}\n\n{box}{rest}"


# ---------------------------------------------------------------------------------------------
# Out of the search index: what is not prose (Material skips anything marked data-search-exclude)

# A code block titled with a script's path alone (a section of a script has "path: section").
WHOLE_SCRIPT = re.compile(r'<div class="language-\w+ highlight"(?=><span class="filename">scripts/[\w.-]+</span>)')
EARLIER_CODE = re.compile(r'<details(?= class="example">\s*<summary>(?:%s)</summary>)' % "|".join(
    re.escape(edition.words["earlier_code"]) for edition in editions.EDITIONS.values()))


def on_page_content(html: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """A page that embeds a whole script would answer every search for a name in it with a preview of
    200 lines of code, and the collapsed earlier code would preview instead of the page's own text:
    the sections that explain the names stay indexed."""
    html = WHOLE_SCRIPT.sub(r"\g<0> data-search-exclude", html)
    return EARLIER_CODE.sub("<details data-search-exclude", html)


# ---------------------------------------------------------------------------------------------
# The language switch: to the same page in the other edition

def on_page_context(context: dict, /, *, page: Page, config: MkDocsConfig, nav: Navigation) -> dict:
    """{language: link} for partials/alternate.html: this page in each edition, where it has one,
    else that edition's home page. Relative links, so they work wherever the site is published."""
    edition, url = editions.of(config), page.url
    if url.endswith(".html"):  # the 404 page, served at any depth: the editions' roots, from site_url
        return context
    to_english_root = "../" * url.count("/") + "../" * edition.prefix.count("/")
    context["counterparts"] = {
        other.language: to_english_root + other.prefix + (url if (other.docs / page.file.src_uri).exists() else "")
        for other in editions.EDITIONS.values()}
    return context
