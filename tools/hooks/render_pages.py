"""MkDocs hooks for the pages (the notebooks': tools/hooks/render_notebooks.py): render what was recorded, execute
nothing. Each block of snippet sections gets its code, recorded output and plot, and "Differs from the book" note; a
stale or missing output fails `mkdocs build --strict` (`mkdocs serve` marks the page). Also: the downloads, the "Run
it yourself" box, math as MathML, the search index, the language switch, in each edition's words (tools/words.toml)."""

import itertools
import json
import logging
import os
import re
import sys
import textwrap
from functools import partial
from html import escape
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import latex2mathml.converter
import pygments.formatters
import pygments.lexers
from markdown import markdown as render_markdown
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads this file by path
# `mkdocs serve` loads this file again on every change; import our modules afresh with it.
for name in [name for name in sys.modules if name == "tools" or name.startswith("tools.")]:
    del sys.modules[name]

from tools import BOOK, ROOT, book, checker, claims, ddp_numbers, editions, pages, prerequisites, script_diff, tomllib  # noqa: E402
from tools.sections import section_code  # noqa: E402
from tools.store import GPU_OUTPUTS, MANIFEST, output_path, varying_patterns  # noqa: E402

log = logging.getLogger("mkdocs.hooks")
# jieba (the search's Chinese word splitter) prints its dictionary's loading times on every build.
logging.getLogger("jieba").setLevel(logging.WARNING)
SERVING = "APPENDIX_A_SERVING"  # set by on_startup; an environment variable outlives the reloads of this file


def on_startup(*, command: str, dirty: bool) -> None:
    os.environ[SERVING] = "1" if command == "serve" else ""


def serving() -> bool:
    return bool(os.environ.get(SERVING))


def _mathml(display: str):  # pymdownx's formatter of a custom fence or inline code
    return lambda source, *_, **__: latex2mathml.converter.convert(source.strip(), display=display)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The edition's site_url (the Chinese one in zh/), the theme's words Material leaves to the site, and math."""
    edition = editions.of(config)
    words = edition.words
    english_url = config.site_url.removesuffix(edition.prefix)
    config.site_url = urljoin(english_url, edition.prefix)
    # Each edition's root; on each page, partials/alternate.html leads to the same page instead.
    config.extra["alternate"] = [{"name": other.name, "lang": other.language,
                                  "link": urlsplit(english_url).path + other.prefix,
                                  "not_found": other.words["not_found"]}  # for overrides/404.html
                                 for other in editions.EDITIONS.values()]
    for palette, toggle in zip(config.theme["palette"], ("dark_mode", "light_mode")):
        palette["toggle"]["name"] = words[toggle]
    config.extra["words"] = words  # for overrides/*.html
    config.mdx_configs.setdefault("toc", {})["permalink_title"] = words["permalink"]
    for extension, kind, display in (("pymdownx.superfences", "custom_fences", "block"),
                                     ("pymdownx.inlinehilite", "custom_inline", "inline")):
        config.mdx_configs.setdefault(extension, {}).setdefault(kind, []).append(
            {"name": "math", "class": "math", "format": _mathml(display)})
    # The header's repository button: this site's where REPO_URL says where it is, else the book's code.
    site = config.repo_url.rstrip("/") or None
    config.extra["site_repository"] = site  # for the Colab links (tools/pages.py)
    config.repo_url = site or pages.BOOK_REPOSITORY
    name = urlsplit(config.repo_url).path.strip("/")
    config.repo_name = words["site_repository" if site else "book_repository"].format(name=name)
    config.extra["repository_line"] = words["repository_line"].format(url=site, name=name) if site else ""
    return config


def on_files(files: Files, /, *, config: MkDocsConfig) -> Files:
    """The downloads; in the Chinese edition, the English edition's stylesheet and script too."""
    if editions.of(config) is not editions.ENGLISH:
        for path in sorted((editions.ENGLISH.docs / "assets").glob("*.*")):
            if not files.get_file_from_path(f"assets/{path.name}"):
                files.append(File.generated(config, f"assets/{path.name}", abs_src_path=str(path)))
    for pattern in ("scripts/*.py", "scripts/*/*.py", "scripts/*.sbatch"):
        for path in sorted(ROOT.glob(pattern)):
            files.append(File.generated(config, f"downloads/{path.relative_to(ROOT).as_posix()}",
                                        abs_src_path=str(path)))
    scripts = {pages.download_name(page): partial(pages.download_text, page) for page in pages.chapter_pages()}
    scripts[checker.NAME] = checker.generate  # for a reader's machine: every page's download and outputs
    for name, script in scripts.items():
        try:
            files.append(File.generated(config, f"downloads/{name}", content=script()))
        except (KeyError, ValueError):  # a missing or broken section: its page says so
            continue
    return files


def _problem(message: str, title: str = "Output out of date: run make outputs") -> str:  # on the page too, serving
    log.warning(message)
    return f'!!! failure "{title}"\n    {message}\n\n' if serving() else ""


def _missing(module: str, section: str) -> bool:
    try:
        section_code(module, section)
    except (KeyError, ValueError):
        return True
    return False


def _output_block(title: str, outputs: list[Path], note: str = "") -> str:
    # What the outputs depend on, and where they were recorded, is the note under it: the title fits a phone.
    text = "\n".join(line for path in outputs for line in path.read_text().splitlines())
    block = f'```{{.text .recorded title="{title}"}}\n{text}\n```'
    return f"{block}\n\n{note}\n{{: .output-note }}" if note else block


def _sentence(text: str, edition) -> str:
    return edition.spaced(text[:1].upper() + text[1:] + edition.words["full_stop"])


def _title_and_note(cells, varying, environment, edition) -> tuple[str, str]:
    reasons = [varying[cell.key].get(f"reason_{edition.language}", varying[cell.key]["reason"])
               for cell in cells if cell.key in varying]
    if not reasons:
        return edition.words["output"], ""
    note = edition.words["output_note"].format(reasons=edition.words["reasons_joiner"].join(reasons),
                                               recorded=edition.recorded(environment))
    return edition.words["output_varies"], _sentence(note, edition)


def _plot_figure(plot: Path, key: str, edition, source: str) -> str:
    """A recorded plot as an inline SVG (it follows the palette) named by its caption, which says what it shows."""
    if (caption := edition.words.get(f"plot:{key}")) is None:
        return _problem(f"{source}: tools/words.toml has no words 'plot:{key}' (what the plot of {key} shows, "
                        "its caption and alt text); add them.", "Plot without a caption")
    svg = plot.read_text()
    name = f"plot-{key.replace(':', '-').replace('_', '-')}"
    svg = svg[svg.index("<svg"):].replace("<svg ", f'<svg role="img" aria-labelledby="{name}" ', 1)
    return (f'<figure class="plot">\n{svg.strip()}\n'
            f'<figcaption id="{name}">{caption}</figcaption>\n</figure>')


def _indented(text: str, indent: str) -> str:
    return textwrap.indent(text, indent, lambda line: True)  # blank lines too, as pymdownx.snippets does


def _with_outputs(markdown: str, page: str, cells: list[pages.Cell], edition) -> str:
    source, recorded = f"{edition.docs.name}/{page}", json.loads(MANIFEST.read_text())
    entries, varying, notes = recorded["pages"].get(page, {}), varying_patterns(), book.notes_on(page)
    current = dict(zip((cell.key for cell in cells), pages.fingerprints(cells)))
    by_key = {cell.key: cell for cell in cells}

    def add_output(match):
        fence_cells = [by_key[f"{m}:{s}"] for m, s in pages.INCLUDE.findall(match["includes"])]
        printed = [cell for cell in fence_cells if output_path(cell.key, ".txt").exists()]
        # The code it has read in place of its includes; under it, what goes with it, indented as the block is.
        code = pages.block_code(match["includes"], lambda module, section: by_key[f"{module}:{section}"].code)
        after, block = [], match[0].replace(match["includes"], _indented(code + "\n", match["indent"]), 1)
        if printed:
            title, note = _title_and_note(printed, varying, recorded["environment"], edition)
            after.append(_output_block(title, [output_path(c.key, ".txt") for c in printed], note))
            gpu = [output_path(c.key, ".txt", GPU_OUTPUTS) for c in printed if c.key in varying]
            if gpu := [path for path in gpu if path.exists()]:  # recorded by `make gpu-check` on a CUDA machine
                environment = json.loads((GPU_OUTPUTS / "recorded.json").read_text())["environment"]
                after.append(_output_block(edition.words["output_on_gpu"], gpu,
                                           _sentence(edition.recorded(environment), edition)))
        for cell in fence_cells:
            if (plot := output_path(cell.key, ".svg")).exists():
                after.append(_plot_figure(plot, cell.key, edition, source))
        if differences := list(dict.fromkeys(d for cell in fence_cells for d in notes.get(cell.key, []))):
            after.append(f'!!! info book "{edition.words["differs"]}"\n'
                         + "".join(f"\n    {d.reason(edition.language)}\n" for d in differences))
        for cell in fence_cells:
            entry, where = entries.get(cell.key), f"snippets/{cell.module}.py, section '{cell.section}' on {source}"
            if entry is None or entry["code"] != current[cell.key]:
                after.append(_problem(f"{where}: its code (or code before it on the page) changed since its "
                                      "output was recorded; run `make outputs`."))
            elif entry["prints"] and cell not in printed:
                after.append(_problem(f"{where}: its recorded output is missing; run `make outputs`."))
        return block + "".join("\n\n" + _indented(part.rstrip("\n"), match["indent"])
                               for part in after if part)  # _problem writes nothing in a build

    return pages.SNIPPET_FENCE.sub(add_output, markdown)


OURS = re.compile(r'\s*\bours="([^"]*)"')  # in a block's opening line: ```python ours="what it adds"


def _with_labels(markdown: str, page: str, edition) -> str:
    """Title each block with the book's cells it shows (tools/book.py finds them), or with what it adds (ours)."""
    try:
        books = book.labels(page)
    except (KeyError, ValueError):  # a missing section: on_page_markdown reports it
        return markdown
    chapter, blocks = page in pages.chapter_pages(), itertools.count()

    def label(match):
        index, ours, fence = next(blocks), OURS.search(match["attributes"]), match[0]
        where = f"{edition.docs.name}/{page}, code block {index + 1}"
        if index in books and ours:
            log.warning(f"{where} shows the book's {books[index].notebook} cell "
                        f"{', '.join(map(str, books[index].cells))}: it is not ours; remove its ours=\"...\".")
        if index in books:
            title = books[index].text(edition.words)
        elif ours:
            title = edition.words["ours"].format(adds=ours[1])
        else:
            if chapter:
                log.warning(f"{where} shows no cell of the book: say what it adds, ```python ours=\"...\".")
            return fence
        attributes = OURS.sub("", match["attributes"])
        return fence.replace(f"```python{match['attributes']}", f'```python title="{title}"{attributes}', 1)

    return pages.SNIPPET_FENCE.sub(label, markdown)


def _run_it_yourself(src: str, cells: list[pages.Cell], config, edition) -> str:
    words, name = edition.words, pages.download_name(src)
    script = get_relative_url(f"downloads/{name}", src)
    packages = edition.listing(prerequisites.as_code(pages.needs(cells)))
    links = [words["download"].format(script=f'[`{name}`]({script}){{ download="{name}" }}', packages=packages)]
    if notebook := pages.notebook_of(src):
        links.append(words["notebook"].format(
            notebook=f"[{notebook}]({get_relative_url(f'notebooks/{notebook}.ipynb', src)})")
            + pages.colab_link(config, notebook, edition, "colab"))
    return f'!!! tip "{words["run_it_yourself"]}"\n\n    ' + words["or"].join(links) + words["full_stop"] + "\n\n"


def _differences_table(edition) -> str:
    words, language = edition.words, edition.language
    return pages.table([words["book_column"], words["page_column"], words["why_column"]],
                       [[d.book_place(language), f"[{pages.title(d.page, edition.docs)}]({d.page})", d.reason(language)]
                        for d in book.differences()])


def _glossary_table() -> str:
    """The Chinese edition's terms; a variant without its regular expression's lookarounds (笔记本(?!电脑))."""
    rows = []
    for term in tomllib.loads(editions.GLOSSARY.read_text())["term"]:
        avoid = "、".join(re.sub(r"\(\?<?[!=][^)]*\)| \?", "", variant) for variant in term.get("avoid", []))
        rows.append([term["english"], term["chinese"], avoid, term.get("note", "")])
    return pages.table(["English", "中文", "Not", "Note"], rows)


REPOSITORY_MARK = "<!-- site repository -->"  # where Home and Authoring link the site's repository_line (on_config)
# A page that is the other edition's whole (docs-zh/authoring.md): read here, so that its marks are filled in too.
WHOLE_PAGE = re.compile(r'--8<-- "(docs[\w-]*/[\w.-]+\.md)"')


# The DDP scripts on A.9.3 (tools/script_diff.py), as HTML without line anchors (light on a phone): <!-- book's
# DDP-script.py[, folded]: PART, PART --> the book's parts (collapsed); <!-- book's DDP-script-torchrun.py as a diff:
# PART --> its changes to them; <!-- diff of SCRIPT --> ours, each changed part opening its diff. Each shown once.
# <!-- ours, folded: SCRIPT --> a script of ours whole, collapsed (ddp-inside.py).

BOOK_MARK = re.compile(r"<!-- book's (DDP-script\.py|DDP-script-torchrun\.py as a diff)(, folded)?: ([\w, ]+) -->")
DIFF_MARK = re.compile("<!-- diff of (%s) -->" % "|".join(map(re.escape, script_diff.BASES)))
OURS_MARK = re.compile(r"<!-- ours, folded: ([\w.-]+) -->")


# Tokens that Material's theme draws in the code's own colour (names, whitespace): plain text, in fewer elements.
PLAIN_TOKENS = re.compile(r'<span class="[nw]">([^<]*)</span>')


def _code_html(code: str, language: str, title: str) -> str:
    """A code block as Material renders one with a title, without line spans; out of the search index."""
    tokens = PLAIN_TOKENS.sub(r"\1", pygments.highlight(code, pygments.lexers.get_lexer_by_name(language),
                                                        pygments.formatters.HtmlFormatter(nowrap=True)))
    lines = "".join(f'<span class="line">{line}\n</span>' for line in tokens.split("\n")[:-1])  # each line whole
    return (f'<div class="language-{language} highlight" data-search-exclude>'
            f'<span class="filename">{escape(title)}</span><pre><span></span><code>{lines}</code></pre></div>')


def _folded(summary: str, body: str, wide_open: bool = False) -> str:
    """Collapsed (its code is out of the search); `wide_open`: opened on a wide screen (docs/assets/open-wide.js),
    so that a phone shows the book's parts as a list of titles and a desktop shows the code."""
    opens = " data-open-wide" if wide_open else ""
    return f"<details{opens}><summary>{summary}</summary>{body}</details>"


def _scripts_as_html(content: str, page: str, edition) -> str:
    words, shown = edition.words, []
    book_script, torchrun_changes = script_diff.book_scripts()

    def book_parts(match):
        script, names = match[1].split()[0], [name.strip() for name in match[3].split(",")]
        shown.extend((script, name) for name in names)
        listed = words["list"].join(names)
        if script == "DDP-script-torchrun.py":
            lines = [line for name in names for line in script_diff.hunks(torchrun_changes.get(name, []))]
            lines = [line for i, line in enumerate(lines) if not (line == " ..." and lines[i - 1:i] == [line])]
            title = words["book_torchrun_diff"].format(parts=listed)
            block = _code_html("\n".join(lines), "diff", title)
        else:
            title = words["book_script"].format(script=script, parts=listed)
            block = _code_html("\n\n\n".join(book_script.get(name, "") for name in names), "python", title)
        return _folded(escape(title), block, wide_open=not match[2])

    content = BOOK_MARK.sub(book_parts, content)
    if shown:
        wanted = {("DDP-script.py", name) for name in book_script}
        if any(script == "DDP-script-torchrun.py" for script, _ in shown):
            wanted |= {("DDP-script-torchrun.py", name) for name in torchrun_changes}
        if missing := sorted(wanted - set(shown)):
            log.warning(f"{page} leaves out the book's parts {missing}; show each with <!-- book's ... -->")
        if twice := sorted({entry for entry in shown if shown.count(entry) > 1 or entry not in wanted}):
            log.warning(f"{page} shows the book's parts {twice} twice, or parts that do not exist or differ")
    content = OURS_MARK.sub(lambda match: _ours_folded(match[1], page, edition), content)
    return DIFF_MARK.sub(lambda match: _script_diff(match[1], edition), content)


def _ours_folded(script: str, page: str, edition) -> str:
    if not (path := script_diff.SCRIPTS / script).is_file():
        log.warning(f"{page}: <!-- ours, folded: {script} --> names no file in scripts/")
        return ""
    title = edition.words["ours"].format(adds=edition.words["whole_program"].format(script=script))
    return _folded(escape(title), _code_html(path.read_text(), "python", f"scripts/{script}"))


def _script_diff(script: str, edition) -> str:
    """Ours as a list: a line for each changed part, which opens its reason and diff."""
    words, base_file = edition.words, script_diff.BASES[script]
    base = words["the_books"] if base_file.parent == BOOK else base_file.name
    reasons, items, compared = script_diff.reasons().get(script, {}), [], script_diff.compare(script)
    for part in (part for part in compared if part.diff):
        if part.name not in reasons:
            log.warning(f"{script_diff.DECLARED.name}: the part {part.name} of scripts/{script} differs "
                        f"without a reason; declare one as [{script[:-3]}.{part.name}]")
        declared = reasons.get(part.name, {}).get(edition.language, {"summary": "", "reason": ""})
        adds = edition.spaced(words["script_diff"].format(script=script, part=part.name, base=base))
        title = words["ours"].format(adds=adds)
        reason = render_markdown(book.linked(declared["reason"]))
        summary = render_markdown(f"`{part.name}`{words['colon']}{declared['summary']}")[3:-4]  # without <p>
        items.append(_folded(summary, reason + _code_html("\n".join(part.diff), "diff", title)))
    same = words["list"].join(f"<code>{part.name}</code>" for part in compared if not part.diff)
    return (f'<div class="script-changes">{"".join(items)}</div>'
            + (f"<p>{edition.spaced(words['script_same'].format(base=base, parts=same))}</p>" if same else ""))


def on_page_markdown(markdown: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    src, edition = page.file.src_uri, editions.of(config)
    if whole := WHOLE_PAGE.fullmatch(markdown.strip()):
        markdown = (ROOT / whole[1]).read_text()
    markdown = prerequisites.fill(markdown, edition)  # the Pythons and packages a reader needs
    # What the prose says about the recorded outputs (tools/claims.py); serving, a false one shows under the title.
    source = Path(page.file.abs_src_path).read_text() if page.file.abs_src_path else markdown  # its lines
    false = "".join(_problem(problem, "Contradicted by its output")
                    for problem in claims.problems(source, f"{edition.docs.name}/{src}"))
    title, _, rest = claims.without_marks(markdown).partition("\n")
    markdown = f"{title}\n\n{false}{rest}" if false else f"{title}\n{rest}"
    for mark, text in {REPOSITORY_MARK: lambda: config.extra["repository_line"],
                       book.TABLE_MARK: lambda: _differences_table(edition), editions.GLOSSARY_MARK: _glossary_table,
                       # with the pages as they are now: a page changed since says so
                       checker.VERSIONS_MARK: lambda: checker.versions_md(json.loads(checker.VERSIONS.read_text()),
                                                                          edition.language)}.items():
        if mark in markdown:
            markdown = markdown.replace(mark, text())
    markdown, problems = ddp_numbers.fill(markdown, edition)  # before Markdown, which drops a comment in a line
    for problem in problems:
        log.warning(f"{edition.docs.name}/{src}: {problem}")
    markdown = _with_labels(markdown, src, edition)
    if src not in pages.chapter_pages():
        return markdown
    try:
        cells = pages.program(src, markdown)
    except (KeyError, ValueError) as error:  # pymdownx.snippets stops a build on it; serving, show the page
        if serving():
            markdown = pages.INCLUDE.sub(lambda m: "" if _missing(*m.groups()) else m[0], markdown)
        return _problem(f"{edition.docs.name}/{src}: {error.args[0]}", "Missing code") + markdown  # until fixed
    markdown = _with_outputs(markdown, src, cells, edition)
    box = _run_it_yourself(src, cells, config, edition)
    if page.meta.get("run_it_yourself") == "at the end":  # e.g. not above the exercises' solutions
        return f"{markdown.rstrip()}\n\n{box}"
    title, _, rest = markdown.partition("\n")  # after the title, which stays first
    return f"{title}\n\n{box}{rest}"


# Out of the search index (data-search-exclude): a whole script, which would answer every search for a name in
# it, and the collapsed earlier code, which would preview instead of the page's own text. A code block titled
# with a script's path alone is a whole script (a section of one has "path: section").
WHOLE_SCRIPT = re.compile(r'<div class="language-\w+ highlight"(?=><span class="filename">(?:scripts/[\w.-]+|'
                          r'[\w.-]+\.sbatch)</span>)')
EARLIER_CODE = re.compile(r'<details(?= class="example">\s*<summary>(?:%s)</summary>)' % "|".join(
    re.escape(edition.words["earlier_code"]) for edition in editions.EDITIONS.values()))


# On the pages that show the DDP scripts every code block wraps, each line marked where it continues (extra.css).
CODE_BLOCK = re.compile(r'<div class="language-\w+ highlight')


def on_page_content(html: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    edition = editions.of(config)
    if BOOK_MARK.search(html) or DIFF_MARK.search(html):
        html = CODE_BLOCK.sub(r"\g<0> wrapped", _scripts_as_html(html, page.file.src_uri, edition))
    html = WHOLE_SCRIPT.sub(r"\g<0> data-search-exclude", html)
    html = ROW_NAMED_TABLE.sub(_row_headers, html)
    return EARLIER_CODE.sub("<details data-search-exclude", html)


# The search index, written again after Material's search plugin: in UTF-8 (not 6-byte \u escapes), and without
# the zero-width spaces that jieba puts around each word where a space or punctuation parts the words already.
ZERO_WIDTH_SPACE = "\u200b"


def _without_idle_spaces(text: str, separator: re.Pattern) -> str:
    def parts(char: str) -> bool:
        return char != ZERO_WIDTH_SPACE and bool(separator.fullmatch(char))

    lighter = re.sub(ZERO_WIDTH_SPACE, lambda m: "" if parts(text[m.start() - 1:m.start()])
                     or parts(text[m.end():m.end() + 1]) else m[0], text)
    words = [[word for word in separator.split(t) if word] for t in (text, lighter)]
    return lighter if words[0] == words[1] else text  # a "." before a digit parts nothing: kept as it was


def on_post_build(*, config: MkDocsConfig) -> None:
    index_file = Path(config.site_dir) / "search" / "search_index.json"
    if not index_file.exists():
        return
    index = json.loads(index_file.read_text())
    separator = re.compile(index["config"]["separator"])
    for entry in index["docs"]:
        for field in ("title", "text"):
            if ZERO_WIDTH_SPACE in entry[field]:
                entry[field] = _without_idle_spaces(entry[field], separator)
    index_file.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")))


# A table with an empty corner names its rows in its first column: those cells become row headers, the corner
# an empty data cell (screen readers announce an empty header).
ROW_NAMED_TABLE = re.compile(r"<table>\s*<thead>\s*<tr>\s*<th></th>.*?</table>", re.S)
FIRST_CELL = re.compile(r"(<tr>\s*)<td([^>]*)>(.*?)</td>", re.S)


def _row_headers(table: re.Match) -> str:
    head, body = table[0].replace("<th></th>", "<td></td>", 1).split("<tbody>", 1)
    return head + "<tbody>" + FIRST_CELL.sub(r'\1<th scope="row"\2>\3</th>', body)


def on_page_context(context: dict, /, *, page: Page, config: MkDocsConfig, nav: Navigation) -> dict:
    """The language switch (partials/alternate.html): {language: this page in that edition, else its home}."""
    edition, url = editions.of(config), page.url
    if url.endswith(".html"):  # the 404 page, served at any depth: the editions' roots, from site_url
        return context
    to_english_root = "../" * url.count("/") + "../" * edition.prefix.count("/")
    context["counterparts"] = {
        other.language: to_english_root + other.prefix + (url if (other.docs / page.file.src_uri).exists() else "")
        for other in editions.EDITIONS.values()}
    return context
