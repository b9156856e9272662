"""Maintainer tooling: record outputs, generate notebooks, MkDocs hooks, benchmarks."""

from pathlib import Path

try:  # the tools import tomllib from here
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the backport, pinned for it in requirements-site.in
    import tomli as tomllib  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"  # the book's notebooks and DDP scripts, pinned, with its licence
