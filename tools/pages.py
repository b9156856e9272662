"""What a chapter page's code is: the snippet sections it includes, in page order.

A page's *program* is what a reader gets by copying every Python block of the page from top to
bottom; it starts with whatever the page needs from earlier pages (its "Code from earlier
sections" block). The recorder runs it, the build turns it into the page's download, and the
notebooks are made from the programs of their pages, so all three show the same code.
"""

import ast
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tools import BOOK, ROOT
from tools.editions import ENGLISH
from tools.sections import section_code

DOCS = ROOT / "docs"
# The one mapping from notebooks to pages: name -> pages in order (the titles are in tools/editions.py).
NOTEBOOKS = {
    "code-part1": [
        "a1-what-is-pytorch.md", "a2-understanding-tensors.md", "a3-computation-graphs.md",
        "a4-automatic-differentiation.md", "a5-multilayer-neural-networks.md",
        "a6-efficient-data-loaders.md", "a7-typical-training-loop.md",
        "a8-saving-and-loading-models.md",
    ],
    "code-part2": ["a9-gpu-training.md"],
    "exercise-solutions": ["exercises.md"],
}

# The pages with device code: their machine-dependent outputs are recorded on a GPU too (make gpu-check).
GPU_PAGES = ["a1-what-is-pytorch.md", "a9-gpu-training.md", "exercises.md"]

# An include of a snippet section on its own line, at any indentation (inside a block or not).
INCLUDE = re.compile(r'^[ \t]*--8<-- "snippets/(\w+)\.py:([\w-]+)"[ \t]*$', re.M)
# A python fence whose body is one or more snippet-section includes (a blank line may part two), at
# any indentation: one block.
SNIPPET_FENCE = re.compile(
    r'^(?P<indent>[ \t]*)```python(?P<attributes>[^\n]*)\n'
    r'(?P<includes>(?:(?P=indent)--8<-- "snippets/\w+\.py:[\w-]+"\n(?:[ \t]*\n(?=[ \t]*--8<--))?)+)'
    r'(?P=indent)```[ \t]*$',
    re.M,
)


@dataclass(frozen=True)
class Cell:
    module: str
    section: str
    code: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.section}"


def chapter_pages() -> list[str]:
    """The pages whose code is recorded: every page of a notebook, in notebook order."""
    return [page for pages in NOTEBOOKS.values() for page in pages]


def notebook_of(page: str) -> str | None:
    return next((name for name, pages in NOTEBOOKS.items() if page in pages), None)


def page_text(page: str, docs: Path = DOCS) -> str:
    return (docs / page).read_text()


def program(page: str, text: str | None = None) -> list[Cell]:
    """The cells of a page, in page order; KeyError if an included section does not exist."""
    text = page_text(page) if text is None else text
    return [Cell(m, s, section_code(m, s)) for m, s in INCLUDE.findall(text)]


@dataclass(frozen=True)
class Block:
    """A code block of a page: the sections it includes, and its code as the page shows it."""

    keys: tuple[str, ...]
    code: str


def blocks(page: str, docs: Path = DOCS) -> list[Block]:
    """The page's blocks of snippet sections, in page order; KeyError if a section does not exist."""
    return [Block(tuple(f"{m}:{s}" for m, s in INCLUDE.findall(fence["includes"])),
                  "\n".join(section_code(*INCLUDE.match(line).groups()) if line.strip() else ""
                            for line in fence["includes"].splitlines()))
            for fence in SNIPPET_FENCE.finditer(page_text(page, docs))]


def section_keys(page: str, docs: Path = DOCS) -> list[str]:
    """The "module:section" keys a page includes, in page order (the code is not read)."""
    return [f"{m}:{s}" for m, s in INCLUDE.findall(page_text(page, docs))]


def fingerprints(cells: list[Cell]) -> list[str]:
    """For each cell, a hash of its code and of every cell before it: what its output depends on."""
    digest, prints = hashlib.sha256(), []
    for cell in cells:
        digest.update(cell.code.encode() + b"\0")
        prints.append(digest.copy().hexdigest()[:16])
    return prints


def title(page: str, docs: Path = DOCS) -> str:
    return next(line[2:].strip() for line in page_text(page, docs).splitlines() if line.startswith("# "))


def download_name(page: str) -> str:
    return f"{Path(page).stem}.py"


def imports(code: str) -> list[str]:
    """The packages outside Python's standard library that `code` imports, in the order it imports them."""
    nodes = sorted((node for node in ast.walk(ast.parse(code)) if isinstance(node, (ast.Import, ast.ImportFrom))),
                   key=lambda node: (node.lineno, node.col_offset))
    names = [alias.name if isinstance(node, ast.Import) else node.module for node in nodes for alias in node.names
             if isinstance(node, ast.Import) or node.level == 0]  # `from . import x` is no package
    packages = [name.split(".")[0] for name in names]
    return list(dict.fromkeys(package for package in packages if package not in sys.stdlib_module_names))


def needs(cells: list[Cell]) -> list[str]:
    """What a reader installs to run these cells: the packages they import (requirements.txt pins each)."""
    return list(dict.fromkeys(package for cell in cells for package in imports(cell.code)))


def all_needs() -> list[str]:
    """What a reader installs to run every chapter page."""
    return needs([cell for page in chapter_pages() for cell in program(page)])


def download_text(page: str, cells: list[Cell] | None = None) -> str:
    """The page's code as one script that runs alone, in the percent format that editors
    (VS Code, PyCharm, Spyder, Jupytext) show as cells: one `# %%` cell per code block."""
    cells = program(page) if cells is None else cells
    packages = needs(cells)
    header = (f'"""{title(page)}: the code of this page of "Appendix A: Introduction to PyTorch",\n'
              f"in page order. It needs {ENGLISH.listing(packages)} (pip install {' '.join(packages)}):\n"
              f"python {download_name(page)}\n"
              '"""\n')
    return header + "".join(f"\n# %%\n{cell.code}\n" for cell in cells)


def split_download(text: str) -> list[str]:
    """The cells of a download, as download_text wrote them (the header is not a cell)."""
    return [part.strip("\n") for part in text.split("\n# %%\n")[1:]]


# The book's code, and where its notebooks (the names of ours) are, at the commit book/ copies.
BOOK_REPOSITORY = "https://github.com/rasbt/LLMs-from-scratch"
BOOK_NOTEBOOKS = "appendix-A/01_main-chapter-code"


def book_commit() -> str:
    return re.search(r"at commit\s+`([0-9a-f]{40})`", (BOOK / "README.md").read_text())[1]


def site_repository(config) -> str | None:
    """This site's repository where REPO_URL says where it is (the Pages workflow sets it); None otherwise."""
    return config.extra.get("site_repository")


def colab_url(config, notebook: str, edition) -> tuple[str, bool]:
    """Open in Colab: (the address, whether it is the book's notebook). This site's notebook where its
    repository is on GitHub; otherwise the book's own, at the commit this site follows."""
    repo = urlsplit(site_repository(config) or "")
    if repo.netloc != "github.com":
        return (f"https://colab.research.google.com/github{urlsplit(BOOK_REPOSITORY).path}/blob/{book_commit()}/"
                f"{BOOK_NOTEBOOKS}/{notebook}.ipynb", True)
    branch = match[1] if (match := re.search(r"(?:edit|blob)/([^/]+)/", config.edit_uri or "")) else "main"
    return (f"https://colab.research.google.com/github{repo.path.rstrip('/')}/blob/{branch}/"
            f"{edition.docs.name}/notebooks/{notebook}.ipynb", False)
