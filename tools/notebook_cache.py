"""MkDocs hook: convert a notebook only when it or the converter changed.

mkdocs-jupyter already keeps each converted notebook in its cache (`cache_dir`, default
.cache/mkdocs-jupyter, git-ignored), keyed by the notebook's bytes and the plugin's options.
Its key leaves out the converter, so after an upgrade of mkdocs-jupyter or nbconvert it would
serve HTML that the old versions made. This hook gives every pair of versions a cache folder
of its own and removes the folders of other versions.
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
    plugin.config["cache_dir"] = str(root / folder)
    return config
