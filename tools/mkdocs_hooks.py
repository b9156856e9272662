"""MkDocs hooks: render what was recorded, never execute anything.

- After every code block that includes a snippet section, add that section's recorded
  output (an "Output" block), so a page cannot forget one or show a stale one.
- Offer each page's snippet module (front matter `module:`) and notebook (`notebook:`)
  for download, and serve the snippet modules and the DDP scripts under downloads/.
- Render math to MathML at build time, so formulas need no script and no network.
"""

import json
import re
import sys
from pathlib import Path

import latex2mathml.converter
from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mkdocs loads this file by path

from tools.record_outputs import RECORDED_ON, varying_patterns  # noqa: E402
from tools.sections import OUTPUTS, ROOT  # noqa: E402

DOWNLOADS = ["snippets/*.py", "scripts/*.py", "scripts/*.sbatch"]

# A python fence whose body is one or more snippet-section includes, at any indentation.
SNIPPET_FENCE = re.compile(
    r'^(?P<indent>[ \t]*)```python[^\n]*\n'
    r'(?P<includes>(?:(?P=indent)--8<-- "snippets/\w+\.py:[\w-]+"\n)+)'
    r'(?P=indent)```[ \t]*$',
    re.M,
)
INCLUDE = re.compile(r'"snippets/(\w+)\.py:([\w-]+)"')


def math_block(source, language, css_class, options, md, **kwargs):
    return latex2mathml.converter.convert(source.strip(), display="block")


def math_inline(source, language, css_class, md):
    return latex2mathml.converter.convert(source.strip())


def on_config(config):
    fences = config.mdx_configs.setdefault("pymdownx.superfences", {}).setdefault("custom_fences", [])
    fences.append({"name": "math", "class": "math", "format": math_block})
    inline = config.mdx_configs.setdefault("pymdownx.inlinehilite", {}).setdefault("custom_inline", [])
    inline.append({"name": "math", "class": "math", "format": math_inline})
    return config


def on_files(files, config):
    for pattern in DOWNLOADS:
        for path in sorted(ROOT.glob(pattern)):
            relative = path.relative_to(ROOT).as_posix()
            files.append(File.generated(config, f"downloads/{relative}", abs_src_path=str(path)))
    return files


def _output_block(match):
    """The fence, followed by an Output block with what its sections printed (if anything)."""
    indent = match["indent"]
    printed = [(m, sec) for m, sec in INCLUDE.findall(match["includes"])
               if (OUTPUTS / m / f"{sec}.txt").exists()]
    if not printed:
        return match[0]
    title = "Output"
    reasons = [spec["reason"] for m, sec in printed if (spec := varying_patterns().get(f"{m}:{sec}"))]
    if reasons:
        env = json.loads(RECORDED_ON.read_text())
        title += f" (recorded with torch {env['torch']} on {env['device']}; {'; '.join(reasons)})"
    lines = "".join(f'{indent}--8<-- "snippets/outputs/{m}/{sec}.txt"\n' for m, sec in printed)
    return f'{match[0]}\n\n{indent}```text title="{title}"\n{lines}{indent}```'


def _download_box(page):
    depth = "../" * page.file.src_uri.count("/")
    links = []
    if module := page.meta.get("module"):
        links.append(f"the code of this page as one script, [`{module}.py`]({depth}downloads/snippets/{module}.py)")
    if notebook := page.meta.get("notebook"):
        links.append(f"the executed notebook [`{notebook}.ipynb`]({depth}notebooks/{notebook}.ipynb)")
    if not links:
        return ""
    return '!!! tip "Run it yourself"\n\n    Download ' + " or ".join(links) + ".\n\n"


def on_page_markdown(markdown, page, config, files):
    markdown = SNIPPET_FENCE.sub(_output_block, markdown)
    box = _download_box(page)
    if box:
        # After the page's title, so that the title stays the first thing on the page.
        title, _, rest = markdown.partition("\n")
        markdown = f"{title}\n\n{box}{rest}" if title.startswith("# ") else box + markdown
    return markdown
