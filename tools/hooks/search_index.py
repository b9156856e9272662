"""The search index: out of it (data-search-exclude), a whole script, which would answer every search for a name in
it, and the collapsed earlier code, which would preview instead of the page's own text; the index written again after
Material's search plugin, in UTF-8 (not 6-byte \\u escapes), and without the zero-width spaces that jieba puts around
each word where a space or punctuation parts the words already."""

import json
import logging
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads a hook by its path
from tools import editions

# jieba (the search's Chinese word splitter) prints its dictionary's loading times on every build.
logging.getLogger("jieba").setLevel(logging.WARNING)

# A code block titled with a script's path alone is a whole script (a section of one has "path: section").
WHOLE_SCRIPT = re.compile(r'<div class="language-\w+ highlight(?: wrapped)?"(?=><span class="filename">(?:scripts/'
                          r'[\w.-]+|[\w.-]+\.sbatch)</span>)')  # wrapped: on A.9.3's pages (ddp_scripts.py)
EARLIER_CODE = re.compile(r'<details(?= class="example">\s*<summary>(?:%s)</summary>)' % "|".join(
    re.escape(edition.words["earlier_code"]) for edition in editions.EDITIONS.values()))
ZERO_WIDTH_SPACE = "\u200b"


def on_page_content(html: str, /, *, page, config, files) -> str:
    return EARLIER_CODE.sub("<details data-search-exclude", WHOLE_SCRIPT.sub(r"\g<0> data-search-exclude", html))


def _without_idle_spaces(text: str, separator: re.Pattern) -> str:
    def parts(char: str) -> bool:
        return char != ZERO_WIDTH_SPACE and bool(separator.fullmatch(char))

    lighter = re.sub(ZERO_WIDTH_SPACE, lambda m: "" if parts(text[m.start() - 1:m.start()])
                     or parts(text[m.end():m.end() + 1]) else m[0], text)
    words = [[word for word in separator.split(t) if word] for t in (text, lighter)]
    return lighter if words[0] == words[1] else text  # a "." before a digit parts nothing: kept as it was


def on_post_build(*, config) -> None:
    index_file = Path(config.site_dir) / "search" / "search_index.json"
    index = json.loads(index_file.read_text())
    separator = re.compile(index["config"]["separator"])
    for entry in index["docs"]:
        for field in ("title", "text"):
            entry[field] = _without_idle_spaces(entry[field], separator)
    index_file.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")))
