"""Keep the whole scripts out of the search index.

A page that embeds a whole script (scripts/DDP-script.py) would otherwise answer every search for
a name in it with a preview of 200 lines of code. The names stay findable: the sections that
explain them are indexed, prose and code. Material skips any element marked data-search-exclude.
"""

import re

# A code block titled with a script's path alone; a section of a script has "path: section".
WHOLE_SCRIPT = re.compile(r'<div class="language-\w+ highlight"(?=><span class="filename">scripts/[\w.-]+</span>)')


def on_page_content(html, page, config, files):
    return WHOLE_SCRIPT.sub(r"\g<0> data-search-exclude", html)
