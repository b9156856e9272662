"""The marks of a page's Markdown, filled in (in its edition's words) or checked before the other hooks read it; a
false claim of the prose about the outputs (tools/claims.py) fails the build."""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads a hook by its path
from tools import ROOT, book, checker, claims, ddp_numbers, editions, pages, prerequisites, tomllib
from tools.hooks.serve import log, problem

REPOSITORY_MARK = "<!-- site repository -->"  # where Home and Authoring link the site's repository_line (edition.py)
# A page that is the other edition's whole (docs-zh/authoring.md): read here, so that its marks are filled in too.
WHOLE_PAGE = re.compile(r'--8<-- "(docs[\w-]*/[\w.-]+\.md)"')


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


def on_page_markdown(markdown: str, /, *, page, config, files) -> str:
    src, edition = page.file.src_uri, editions.of(config)
    if whole := WHOLE_PAGE.fullmatch(markdown.strip()):
        markdown = (ROOT / whole[1]).read_text()
    markdown = prerequisites.fill(markdown, edition)  # the Pythons and packages a reader needs
    # What the prose says about the recorded outputs; serving, a false one shows under the title.
    source = Path(page.file.abs_src_path).read_text() if page.file.abs_src_path else markdown  # its lines
    false = "".join(problem(found, "Contradicted by its output")
                    for found in claims.problems(source, f"{edition.docs.name}/{src}"))
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
    for found in problems:
        log.warning(f"{edition.docs.name}/{src}: {found}")
    return markdown
