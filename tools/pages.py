"""What a chapter page's code is. Its *program* is the snippet sections it includes, in page order: what a reader
copies block by block from the top, what the recorder runs, the page's download, and its notebook's code cells."""

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
# The one mapping from notebooks to pages: name -> pages in order (the titles are in tools/words.toml).
NOTEBOOKS = {
    "code-part1": ["a1-what-is-pytorch.md", "a2-understanding-tensors.md", "a3-computation-graphs.md",
                   "a4-automatic-differentiation.md", "a5-multilayer-neural-networks.md",
                   "a6-efficient-data-loaders.md", "a7-typical-training-loop.md", "a8-saving-and-loading-models.md"],
    "code-part2": ["a9-gpu-training.md"],
    "exercise-solutions": ["exercises.md"],
}

# The pages with device code: their machine-dependent outputs are recorded on a GPU too (make gpu-check).
GPU_PAGES = ["a1-what-is-pytorch.md", "a9-gpu-training.md", "exercises.md"]

# An include of a snippet section on its own line, at any indentation.
INCLUDE = re.compile(r'^[ \t]*--8<-- "snippets/(\w+)\.py:([\w-]+)"[ \t]*$', re.M)
# A python fence whose body is one or more snippet-section includes (a blank line may part two): one block.
SNIPPET_FENCE = re.compile(r'^(?P<indent>[ \t]*)```python(?P<attributes>[^\n]*)\n(?P<includes>(?:(?P=indent)--8<-- '
                           r'"snippets/\w+\.py:[\w-]+"\n(?:[ \t]*\n(?=[ \t]*--8<--))?)+)(?P=indent)```[ \t]*$', re.M)


@dataclass(frozen=True)
class Cell:
    module: str
    section: str
    code: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.section}"


def chapter_pages() -> list[str]:  # the pages whose code is recorded: every notebook's, in notebook order
    return [page for pages in NOTEBOOKS.values() for page in pages]


def notebook_of(page: str) -> str | None:
    return next((name for name, pages in NOTEBOOKS.items() if page in pages), None)


def page_text(page: str, docs: Path = DOCS) -> str:
    return (docs / page).read_text()


def program(page: str, text: str | None = None) -> list[Cell]:  # KeyError if an included section does not exist
    return [Cell(m, s, section_code(m, s)) for m, s in INCLUDE.findall(page_text(page) if text is None else text)]


@dataclass(frozen=True)
class Block:  # a code block of a page
    keys: tuple[str, ...]
    code: str


def blocks(page: str, docs: Path = DOCS) -> list[Block]:
    return [Block(tuple(f"{m}:{s}" for m, s in INCLUDE.findall(fence["includes"])), block_code(fence["includes"]))
            for fence in SNIPPET_FENCE.finditer(page_text(page, docs))]


def block_code(includes: str, code=section_code) -> str:
    """The code of a block's includes, `code(module, section)` each, as the page shows it."""
    return "\n".join(code(*INCLUDE.match(line).groups()) if line.strip() else "" for line in includes.splitlines())


def section_keys(page: str, docs: Path = DOCS) -> list[str]:  # the "module:section" keys a page includes, unread
    return [f"{m}:{s}" for m, s in INCLUDE.findall(page_text(page, docs))]


def fingerprints(cells: list[Cell]) -> list[str]:
    """For each cell, a hash of its code and every cell's before it: what its output depends on."""
    digest, prints = hashlib.sha256(), []
    for cell in cells:
        digest.update(cell.code.encode() + b"\0")
        prints.append(digest.copy().hexdigest()[:16])
    return prints


def title(page: str, docs: Path = DOCS) -> str:
    return next(line[2:].strip() for line in page_text(page, docs).splitlines() if line.startswith("# "))


def table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(f"| {' | '.join(row)} |" for row in [header, ["---"] * len(header), *rows])


def download_name(page: str) -> str:
    return f"{Path(page).stem}.py"


def imports(code: str) -> list[str]:
    """The packages outside Python's standard library that `code` imports, in order."""
    nodes = sorted((node for node in ast.walk(ast.parse(code)) if isinstance(node, (ast.Import, ast.ImportFrom))),
                   key=lambda node: (node.lineno, node.col_offset))
    packages = [(alias.name if isinstance(node, ast.Import) else node.module).split(".")[0] for node in nodes
                for alias in node.names if isinstance(node, ast.Import) or node.level == 0]  # `from . import x`: none
    return list(dict.fromkeys(package for package in packages if package not in sys.stdlib_module_names))


def needs(cells: list[Cell]) -> list[str]:
    """What a reader installs to run these cells (requirements.txt pins each)."""
    return list(dict.fromkeys(package for cell in cells for package in imports(cell.code)))


def all_needs() -> list[str]:  # to run every chapter page
    return needs([cell for page in chapter_pages() for cell in program(page)])


def download_text(page: str, cells: list[Cell] | None = None) -> str:
    """The page's code as one script that runs alone, one `# %%` cell per block (editors show them as cells)."""
    cells = program(page) if cells is None else cells
    packages = needs(cells)
    header = (f'"""{title(page)}: the code of this page of "Appendix A: Introduction to PyTorch",\n'
              f"in page order. It needs {ENGLISH.listing(packages)} (pip install {' '.join(packages)}):\n"
              f'python {download_name(page)}\n"""\n')
    return header + "".join(f"\n# %%\n{cell.code}\n" for cell in cells)


def split_download(text: str) -> list[str]:
    return [part.strip("\n") for part in text.split("\n# %%\n")[1:]]


# The book's code, and where its notebooks (the names of ours) are, at the commit book/ copies.
BOOK_REPOSITORY = "https://github.com/rasbt/LLMs-from-scratch"
BOOK_NOTEBOOKS = "appendix-A/01_main-chapter-code"


def book_commit() -> str:
    return re.search(r"at commit\s+`([0-9a-f]{40})`", (BOOK / "README.md").read_text())[1]


def colab_link(config, notebook: str, edition, words: str) -> str:
    """The edition's `words` linking Colab to this site's notebook where its repository is on GitHub, else (in the
    words `words`_book) to the book's, at the commit book/ copies."""
    repo = urlsplit(config.extra.get("site_repository") or "")  # where REPO_URL says (tools/hooks/render_pages.py)
    if repo.netloc != "github.com":
        path, words = f"{urlsplit(BOOK_REPOSITORY).path}/blob/{book_commit()}/{BOOK_NOTEBOOKS}", f"{words}_book"
    else:
        branch = match[1] if (match := re.search(r"(?:edit|blob)/([^/]+)/", config.edit_uri or "")) else "main"
        path = f"{repo.path.rstrip('/')}/blob/{branch}/{edition.docs.name}/notebooks"
    return edition.words[words].format(url=f"https://colab.research.google.com/github{path}/{notebook}.ipynb")
