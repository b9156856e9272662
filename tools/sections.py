"""Read the named sections of a snippet module (`# --8<-- [start:NAME]` … `# --8<-- [end:NAME]`).

The same markers are what `pymdownx.snippets` includes on the pages, so a page, the
recorder and the notebooks all see the same code.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT

SNIPPETS = ROOT / "snippets"

MARKER = re.compile(r"^\s*# --8<-- \[(start|end):([\w-]+)\]\s*$")


@dataclass
class Chunk:
    """A run of lines in file order: a named section, or the code between sections (name None)."""

    name: str | None
    code: str


def read_chunks(path: Path) -> list[Chunk]:
    """Split a module into chunks in file order; raise ValueError on unbalanced or nested markers."""
    chunks, current, lines = [], None, []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = MARKER.match(line)
        if not match:
            lines.append(line)
            continue
        kind, name = match.groups()
        if kind == "start":
            if current is not None:
                raise ValueError(f"{path.name}:{number}: section '{name}' starts inside section '{current}'")
            chunks.append(Chunk(None, "\n".join(lines)))
            current = name
        else:
            if name != current:
                raise ValueError(f"{path.name}:{number}: end of '{name}' but the open section is {current!r}")
            chunks.append(Chunk(name, "\n".join(lines)))
            current = None
        lines = []
    if current is not None:
        raise ValueError(f"{path.name}: section '{current}' is never ended")
    chunks.append(Chunk(None, "\n".join(lines)))
    names = [c.name for c in chunks if c.name]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise ValueError(f"{path.name}: sections named twice: {', '.join(sorted(duplicated))}")
    return [c for c in chunks if c.name or c.code.strip()]


def section_code(module: str, name: str) -> str:
    """The code of one section, as a page shows it."""
    if not (SNIPPETS / f"{module}.py").exists():
        raise KeyError(f"there is no snippets/{module}.py")
    for chunk in read_chunks(SNIPPETS / f"{module}.py"):
        if chunk.name == name:
            return chunk.code.strip("\n")
    raise KeyError(f"snippets/{module}.py has no section '{name}'")
