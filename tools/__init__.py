"""Maintainer tooling: record outputs, generate notebooks, MkDocs hooks, benchmarks."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"  # the book's notebooks and DDP scripts, pinned, with its licence
