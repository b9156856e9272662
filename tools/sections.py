"""Read the named sections of a snippet module (`# --8<-- [start:NAME]` … `# --8<-- [end:NAME]`): the markers that
`pymdownx.snippets` includes on the pages, so a page, the recorder and the notebooks all see the same code."""

import re
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT

SNIPPETS = ROOT / "snippets"

MARKER = re.compile(r"^\s*# --8<-- \[(start|end):([\w-]+)\]\s*$")


@dataclass
class Chunk:  # a named section of a module
    name: str
    code: str


def read_chunks(path: Path) -> list[Chunk]:
    """A module's sections in file order; ValueError on unbalanced, nested or twice-named markers."""
    chunks, current, lines = [], None, []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not (match := MARKER.match(line)):
            lines.append(line)
            continue
        kind, name = match.groups()
        if kind == "start":
            if current is not None:
                raise ValueError(f"{path.name}:{number}: section '{name}' starts inside section '{current}'")
            current = name
        else:
            if name != current:
                raise ValueError(f"{path.name}:{number}: end of '{name}' but the open section is {current!r}")
            chunks.append(Chunk(name, "\n".join(lines)))
            current = None
        lines = []
    if current is not None:
        raise ValueError(f"{path.name}: section '{current}' is never ended")
    names = [chunk.name for chunk in chunks]
    if duplicated := {name for name in names if names.count(name) > 1}:
        raise ValueError(f"{path.name}: sections named twice: {', '.join(sorted(duplicated))}")
    return chunks


def section_code(module: str, name: str) -> str:
    if not (SNIPPETS / f"{module}.py").exists():
        raise KeyError(f"there is no snippets/{module}.py")
    for chunk in read_chunks(SNIPPETS / f"{module}.py"):
        if chunk.name == name:
            return chunk.code.strip("\n")  # as a page shows it
    raise KeyError(f"snippets/{module}.py has no section '{name}'")
