"""The named sections of the snippet modules (`# --8<-- [start:NAME]` … `# --8<-- [end:NAME]`): the markers that
`pymdownx.snippets` includes on the pages, so a page, the recorder and the notebooks all see the same code."""

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tools import ROOT

SNIPPETS = ROOT / "snippets"

MARKER = re.compile(r"^\s*# --8<-- \[(start|end):([\w-]+)\]\s*$")


@dataclass(frozen=True)
class Section:  # a named section of a snippet module: what a page includes, the recorder runs, a notebook cell holds
    module: str
    name: str

    @property
    def key(self) -> str:  # what its outputs are stored by
        return f"{self.module}:{self.name}"

    @cached_property
    def code(self) -> str:  # as a page shows it; KeyError (no such section) or ValueError (bad markers)
        return section_code(self.module, self.name)


def read_sections(path: Path) -> dict[str, str]:
    """A module's sections in file order, {name: code}; ValueError on unbalanced, nested or twice-named markers."""
    sections, current, lines = {}, None, []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not (match := MARKER.match(line)):
            lines.append(line)
            continue
        kind, name = match.groups()
        if kind == "start" and current is not None:
            raise ValueError(f"{path.name}:{number}: section '{name}' starts inside section '{current}'")
        if kind == "end" and name != current:
            raise ValueError(f"{path.name}:{number}: end of '{name}' but the open section is {current!r}")
        if kind == "end" and name in sections:
            raise ValueError(f"{path.name}:{number}: section '{name}' is named twice")
        if kind == "end":
            sections[name] = "\n".join(lines).strip("\n")
        current, lines = (name if kind == "start" else None), []
    if current is not None:
        raise ValueError(f"{path.name}: section '{current}' is never ended")
    return sections


def section_code(module: str, name: str) -> str:
    if not (SNIPPETS / f"{module}.py").exists():
        raise KeyError(f"there is no snippets/{module}.py")
    if (code := read_sections(SNIPPETS / f"{module}.py").get(name)) is None:
        raise KeyError(f"snippets/{module}.py has no section '{name}'")
    return code
