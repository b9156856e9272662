"""The DDP scripts on A.9.3, in place of the marks that docs/authoring.md lists, as HTML without line anchors (light
on a phone). On these pages every code block wraps, each line marked where it continues (extra.css)."""

import re
import sys
from html import escape
from pathlib import Path

import pygments.formatters
import pygments.lexers
from markdown import markdown as render_markdown

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads a hook by its path
from tools import BOOK, book, editions, script_diff
from tools.hooks.serve import log

BOOK_MARK = re.compile(r"<!-- book's (DDP-script\.py|DDP-script-torchrun\.py as a diff)(, folded)?: ([\w, ]+) -->")
DIFF_MARK = re.compile("<!-- diff of (%s) -->" % "|".join(map(re.escape, script_diff.BASES)))
OURS_MARK = re.compile(r"<!-- ours, folded: ([\w.-]+) -->")
CODE_BLOCK = re.compile(r'<div class="language-\w+ highlight')
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
    """Collapsed, out of the search; `wide_open`: opened on a wide screen (docs/assets/open-wide.js), not on a phone."""
    return f"<details{' data-open-wide' if wide_open else ''}><summary>{summary}</summary>{body}</details>"


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


def on_page_content(html: str, /, *, page, config, files) -> str:
    if BOOK_MARK.search(html) or DIFF_MARK.search(html) or OURS_MARK.search(html):
        html = CODE_BLOCK.sub(r"\g<0> wrapped", _scripts_as_html(html, page.file.src_uri, editions.of(config)))
    return html
