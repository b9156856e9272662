"""What a chapter page's code is. Its *program* is the snippet sections it includes, in page order: what a reader
copies block by block from the top, what the recorder runs, the page's download, and its notebook's code cells."""

import ast
import hashlib
import re
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from tools import BOOK
from tools.editions import ENGLISH
from tools.sections import Section

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

# A code block: a python fence whose body is snippet-section includes, each on its own line (a blank line may part two).
INCLUDE = r'--8<-- "snippets/(\w+)\.py:([\w-]+)"'
SNIPPET_FENCE = re.compile(rf"^(?P<indent>[ \t]*)```python(?P<attributes>[^\n]*)\n(?P<includes>(?:(?P=indent)"
                           rf"{INCLUDE}\n(?:[ \t]*\n(?=[ \t]*--8<--))?)+)(?P=indent)```[ \t]*$", re.M)
OURS = re.compile(r'\s*\bours="([^"]*)"')  # in a block's opening line: ```python ours="what it adds"


@dataclass(frozen=True)
class Block:  # a code block of a page: the sections it shows, where it stands in the page's text
    fence: re.Match

    @cached_property
    def sections(self) -> tuple[Section, ...]:
        return tuple(Section(*include) for include in re.findall(INCLUDE, self.fence["includes"]))

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(section.key for section in self.sections)

    @property
    def code(self) -> str:  # as the page shows it, a blank line between two includes kept
        sections = iter(self.sections)
        return "\n".join(next(sections).code if line.strip() else "" for line in self.fence["includes"].splitlines())

    @property
    def ours(self) -> str | None:  # what it adds, where it says it is ours
        return match[1] if (match := OURS.search(self.fence["attributes"])) else None


@dataclass(frozen=True)
class Page:  # a page's code: its blocks, top to bottom
    name: str
    blocks: tuple[Block, ...]

    @property
    def sections(self) -> list[Section]:  # its program
        return [section for block in self.blocks for section in block.sections]

    @cached_property
    def fingerprints(self) -> dict[str, str]:
        """{section key: a hash of its code and every section's before it}: what its output depends on."""
        digest, prints = hashlib.sha256(), {}
        for section in self.sections:
            digest.update(section.code.encode() + b"\0")
            prints[section.key] = digest.copy().hexdigest()[:16]
        return prints


def chapter_pages() -> list[str]:  # the pages whose code is recorded: every notebook's, in notebook order
    return [page for pages in NOTEBOOKS.values() for page in pages]


def notebook_of(page: str) -> str | None:
    return next((name for name, pages in NOTEBOOKS.items() if page in pages), None)


def page_text(page: str, docs: Path = ENGLISH.docs) -> str:
    return (docs / page).read_text()


def read(page: str, docs: Path = ENGLISH.docs, text: str | None = None) -> Page:
    """The page (or `text`, its Markdown as a hook has it): its code read as each section is asked for."""
    text = page_text(page, docs) if text is None else text
    return Page(page, tuple(map(Block, SNIPPET_FENCE.finditer(text))))


def program(page: str) -> list[Section]:  # on reading its code: KeyError (no such section) or ValueError (bad markers)
    return read(page).sections


def title(page: str, docs: Path = ENGLISH.docs) -> str:
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


def needs(sections: list[Section]) -> list[str]:
    """What a reader installs to run these sections (requirements.txt pins each)."""
    return list(dict.fromkeys(package for section in sections for package in imports(section.code)))


def all_needs() -> list[str]:  # to run every chapter page
    return needs([section for page in chapter_pages() for section in program(page)])


def download_text(page: str, sections: list[Section] | None = None) -> str:
    """The page's code as one script that runs alone, one `# %%` cell per section (editors show them as cells)."""
    sections = program(page) if sections is None else sections
    packages = needs(sections)
    header = (f'"""{title(page)}: the code of this page of "Appendix A: Introduction to PyTorch",\n'
              f"in page order. It needs {ENGLISH.listing(packages)} (pip install {' '.join(packages)}):\n"
              f'python {download_name(page)}\n"""\n')
    return header + "".join(f"\n# %%\n{section.code}\n" for section in sections)


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
    repo = urlsplit(config.extra.get("site_repository") or "")  # where REPO_URL says (tools/hooks/edition.py)
    if repo.netloc != "github.com":
        path, words = f"{urlsplit(BOOK_REPOSITORY).path}/blob/{book_commit()}/{BOOK_NOTEBOOKS}", f"{words}_book"
    else:
        branch = match[1] if (match := re.search(r"(?:edit|blob)/([^/]+)/", config.edit_uri or "")) else "main"
        path = f"{repo.path.rstrip('/')}/blob/{branch}/{edition.docs.name}/notebooks"
    return edition.words[words].format(url=f"https://colab.research.google.com/github{path}/{notebook}.ipynb")
