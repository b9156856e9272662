"""Maintainer tooling: record outputs, generate notebooks, MkDocs hooks, benchmarks."""
