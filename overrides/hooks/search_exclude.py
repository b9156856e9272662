"""Keep what is not prose out of the search index, so that search previews show text.

- A page that embeds a whole script (scripts/DDP-script.py) would otherwise answer every search
  for a name in it with a preview of 200 lines of code. The names stay findable: the sections
  that explain them are indexed, prose and code.
- A page that builds on earlier ones opens with their code again, collapsed ("Code from earlier
  sections"): indexed, every search would preview that code instead of the page's own text.
- A notebook page repeats each cell's code in a hidden copy for its copy button, and each cell
  has an "In [3]:" prompt and a "Copied!" notice: all of it would show in previews.

Material skips any element marked data-search-exclude.
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads this file by path
from tools.editions import EDITIONS

# A code block titled with a script's path alone; a section of a script has "path: section".
WHOLE_SCRIPT = re.compile(r'<div class="language-\w+ highlight"(?=><span class="filename">scripts/[\w.-]+</span>)')


EARLIER_CODE = re.compile(r'<details(?= class="example">\s*<summary>(?:%s)</summary>)'
                          % "|".join(re.escape(edition.words["earlier_code"]) for edition in EDITIONS.values()))

# mkdocs-jupyter's prompts, copy buttons and the hidden text those buttons copy.
NOTEBOOK_CHROME = re.compile(r'<div(?= class="(?:jp-InputPrompt|zeroclipboard-container|clipboard-copy-txt)\b)')


def on_page_content(html, page, config, files):
    html = WHOLE_SCRIPT.sub(r"\g<0> data-search-exclude", html)
    html = EARLIER_CODE.sub("<details data-search-exclude", html)
    if page.file.src_uri.endswith(".ipynb"):
        html = NOTEBOOK_CHROME.sub("<div data-search-exclude", html)
    return html
