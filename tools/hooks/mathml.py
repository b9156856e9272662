"""Math as MathML, made at build time (no script, no network): the pages' ```math fences and `math` inline code,
and the display math of the notebooks' text cells (MathJax in Jupyter and Colab)."""

import html
import re

import latex2mathml.converter

# mkdocs-jupyter 0.26 passes a notebook's `$$…$$` through; 0.27 (Python 3.12 and newer) writes `\[…\]`.
NOTEBOOK_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]", re.S)


def _mathml(display: str):  # pymdownx's formatter of a custom fence or inline code
    return lambda source, *_, **__: latex2mathml.converter.convert(source.strip(), display=display)


def on_config(config):
    for extension, kind, display in (("pymdownx.superfences", "custom_fences", "block"),
                                     ("pymdownx.inlinehilite", "custom_inline", "inline")):
        config.mdx_configs.setdefault(extension, {}).setdefault(kind, []).append(
            {"name": "math", "class": "math", "format": _mathml(display)})
    return config


def on_post_page(output: str, /, *, page, config) -> str:
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    return NOTEBOOK_MATH.sub(
        lambda m: latex2mathml.converter.convert(html.unescape(m[1] or m[2]).strip(), display="block"), output)
