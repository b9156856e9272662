"""MkDocs hooks: render what was recorded, never execute anything.

- After every code block that includes a snippet section, add that section's recorded
  output (an "Output" block), so a page cannot forget one or show a stale one.
- Offer each page's snippet module (front matter `module:`) and notebook (`notebook:`)
  for download, and serve the snippet modules and the DDP scripts under downloads/.
- Render math to MathML at build time, so formulas need no script and no network.
- Move the ~590 KB of CSS that mkdocs-jupyter inlines into every notebook page into one
  shared stylesheet, and drop the markup its own CSS hides, so a notebook page weighs what
  a page weighs and the CSS is cached.
"""

import hashlib
import json
import re
import sys
from pathlib import Path
from urllib.parse import quote

import latex2mathml.converter
from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # mkdocs loads this file by path

from tools.notebooks import NOTEBOOKS  # noqa: E402
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
        # The .ipynb itself is copied next to the notebook's page; raw HTML, since it is not a doc file.
        ipynb = get_relative_url(f"notebooks/{notebook}/{notebook}.ipynb", page.url)
        download = f'<a href="{ipynb}" download>download</a>'
        links.append(f"the executed notebook [`{notebook}`]({depth}notebooks/{notebook}.ipynb) ({download})")
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


STYLE = re.compile(r"<style[^>]*>(.*?)</style>\s*", re.S)
# mkdocs-jupyter repeats this 800-byte icon in every cell's copy button; CSS draws it once instead.
COPY_ICON = re.compile(r'<svg aria-hidden="true" class="clipboard-copy-icon"[^>]*>(.*?)</svg>', re.S)
# Empty collapser handles, two per cell, that mkdocs-jupyter's own CSS hides (display: none).
COLLAPSER = re.compile(r'<div class="jp-Collapser [^"]*">\s*</div>\s*')
# mkdocs-jupyter's Mermaid loader imports the library from a CDN; the notebooks have no diagrams.
CDN_MERMAID = re.compile(r'<script type="module">(?:(?!</script>).)*?cdnjs\.(?:(?!</script>).)*?</script>', re.S)


CHAPTERS = {}  # src_uri -> (title, url), filled from the nav


def on_nav(nav, config, files):
    CHAPTERS.update({page.file.src_uri: (page.title, page.url) for page in nav.pages})
    return nav


def _chapter_links(page) -> str:
    """A box on a notebook page that links back to the chapters its cells come from."""
    _, pages, _ = NOTEBOOKS[Path(page.file.src_uri).stem]
    links = " · ".join(f'<a href="{get_relative_url(CHAPTERS[p][1], page.url)}">{CHAPTERS[p][0]}</a>'
                       for p in pages)
    return ('<div class="admonition info"><p class="admonition-title">Read along</p>'
            f"<p>The cells below are the code of {links}, where the text explains each one.</p></div>\n")


def on_post_page(output, page, config):
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    # Under the notebook's title, the first heading inside the notebook.
    title_end = output.find("</h1>", output.find('<div class="jupyter-wrapper">')) + len("</h1>")
    output = output[:title_end] + _chapter_links(page) + output[title_end:]
    head, body = output.split("<body", 1)
    css = "\n".join(STYLE.findall(body))
    if icon := COPY_ICON.search(body):
        svg = f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">{icon[1]}</svg>'
        mask = f'url("data:image/svg+xml,{quote(svg)}") center / 16px no-repeat'
        css += (f"\n.jupyter-wrapper .clipboard-copy-icon{{display:inline-block;width:20px;height:20px;"
                f"background-color:currentColor;-webkit-mask:{mask};mask:{mask}}}")
        body = COPY_ICON.sub('<span aria-hidden="true" class="clipboard-copy-icon"></span>', body)
    name = f"assets/stylesheets/jupyter-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
    target = Path(config.site_dir) / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(css)
    link = f'<link rel="stylesheet" href="{get_relative_url(name, page.url)}">\n'
    first = STYLE.search(body).start()
    body = body[:first] + link + STYLE.sub("", body[first:])
    return head + "<body" + COLLAPSER.sub("", CDN_MERMAID.sub("", body))
