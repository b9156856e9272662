"""Our DDP scripts as diffs of their bases: DDP-script.py of the book's (pinned in tests/upstream/), and
DDP-script-torchrun.py of our DDP-script.py, as the book shows its torchrun script.

A script's parts are its top-level statements, found with `ast` (no markers in the scripts): the imports
together, each function and class by its name, the `__main__` block; the comments above a statement belong
to it. The parts are matched by name. Each part that differs has its reason, declared once in
snippets/script_differences.toml as [SCRIPT.PART] (SCRIPT without .py) with `reason` and `reason_zh`;
tests/test_ddp_scripts.py fails on a changed part without a reason and on a reason for a part that no
longer differs.
"""

import ast
import difflib
from dataclasses import dataclass
from functools import cache

from tools.sections import ROOT, SNIPPETS
from tools.store import tomllib

SCRIPTS = ROOT / "scripts"
BOOK = ROOT / "tests" / "upstream"
DECLARED = SNIPPETS / "script_differences.toml"
BASES = {"DDP-script.py": BOOK / "DDP-script.py", "DDP-script-torchrun.py": SCRIPTS / "DDP-script.py"}
MARK = "<!-- diff of {script} -->"  # where a page shows SCRIPT as a diff of its base


def parts(code: str) -> dict[str, str]:
    """{name: code} of a script's top-level parts, in file order."""
    lines = code.splitlines()
    found, start = {}, 0
    for node in ast.parse(code).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            name = "imports"
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            name = "__main__"
        else:
            name = ast.unparse(node).split("=")[0].strip()
        found[name] = found.get(name, "") + "\n".join(lines[start:node.end_lineno]) + "\n"
        start = node.end_lineno
    return {name: part.strip("\n") for name, part in found.items()}


@dataclass
class Part:
    name: str
    diff: list[str]  # the part's lines, each with "+", "-" or " " in front; empty if unchanged


def compare(script: str) -> list[Part]:
    """The parts of scripts/SCRIPT and of its base in one order: ours, with a part only the base has
    where the base has it."""
    ours, base = parts((SCRIPTS / script).read_text()), parts(BASES[script].read_text())
    order = list(ours)
    for index, name in enumerate(base):
        if name not in ours:
            before = [n for n in list(base)[:index] if n in order]
            order.insert(order.index(before[-1]) + 1 if before else 0, name)
    compared = []
    for name in order:
        old, new = base.get(name, "").splitlines(), ours.get(name, "").splitlines()
        # One hunk with the whole part as its context, without its three header lines
        diff = list(difflib.unified_diff(old, new, n=len(old) + len(new), lineterm=""))[3:]
        compared.append(Part(name, diff))
    return compared


@cache
def reasons() -> dict[str, dict[str, dict[str, str]]]:
    """{script: {part: {language: reason}}}; ValueError naming the entry if one is malformed."""
    declared = {}
    for stem, entries in tomllib.loads(DECLARED.read_text()).items():
        for name, entry in entries.items():
            if not (isinstance(entry, dict) and entry.get("reason") and entry.get("reason_zh")):
                raise ValueError(f"{DECLARED.name}, [{stem}.{name}]: give reason and reason_zh")
            declared.setdefault(f"{stem}.py", {})[name] = {"en": entry["reason"], "zh": entry["reason_zh"]}
    return declared
