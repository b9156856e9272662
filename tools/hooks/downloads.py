"""The downloads (under downloads/): the files of scripts/, each chapter page's code as one script, and the checker."""

import contextlib
import sys
from functools import partial
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads a hook by its path
from tools import ROOT, checker, pages


def on_files(files, /, *, config):
    for path in sorted(path for path in (ROOT / "scripts").rglob("*") if path.suffix in (".py", ".sbatch")):
        files.append(File.generated(config, f"downloads/{path.relative_to(ROOT).as_posix()}", abs_src_path=str(path)))
    scripts = {pages.download_name(page): partial(pages.download_text, page) for page in pages.chapter_pages()}
    scripts[checker.NAME] = checker.generate  # for a reader's machine: every page's download and outputs
    for name, script in scripts.items():
        with contextlib.suppress(KeyError, ValueError):  # a missing or broken section: its page says so
            files.append(File.generated(config, f"downloads/{name}", content=script()))
    return files
