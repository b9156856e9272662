"""MkDocs hook: keep the notebook pages cheap to rebuild.

- Convert a notebook only when it or the converter changed. mkdocs-jupyter already keeps each
  converted notebook in its cache (`cache_dir`, default .cache/mkdocs-jupyter, git-ignored),
  keyed by the notebook's bytes and the plugin's options, but not by the converter: after an
  upgrade of mkdocs-jupyter or nbconvert it would serve what the old versions made. Here every
  set of converter versions gets a cache folder of its own, and the folders of others go. Inside
  it, each edition (docs folder) has its own: a build evicts every entry it did not use, so with
  one shared folder the English and Chinese builds evicted each other's notebooks every time.
- Leave the notebooks out of the search index: their cells are the chapters' code, which the
  chapter pages already index, and parsing their HTML was the largest part of indexing.
"""

import hashlib
import importlib.metadata
import shutil
from pathlib import Path

CONVERTER = ("mkdocs-jupyter", "nbconvert", "mistune", "pygments")  # nbconvert renders with the last two


def converter_key():
    versions = " ".join(f"{name}=={importlib.metadata.version(name)}" for name in CONVERTER)
    return hashlib.sha256(versions.encode()).hexdigest()[:16]


def on_config(config):
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is None or not plugin.config["cache"]:
        return config
    root, folder = Path(plugin.config["cache_dir"]), f"converter-{converter_key()}"
    for old in root.glob("converter-*"):
        if old.name != folder:
            shutil.rmtree(old, ignore_errors=True)
    plugin.config["cache_dir"] = str(root / folder / Path(config.docs_dir).name)
    return config


def on_page_content(html, page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        page.meta["search"] = {"exclude": True}  # read by Material's search plugin
    return html
