"""The DDP scripts part by part (the imports together, a function or class by name, the `__main__` block), each as a
diff of its base: our DDP-script.py of the book's, our DDP-script-torchrun.py of ours, the book's torchrun script of
its DDP-script.py. Each changed part has its reason in snippets/script_differences.toml as [SCRIPT.PART]."""

import ast
import difflib
import itertools
from collections import namedtuple
from functools import cache

from tools import BOOK, ROOT, tomllib
from tools.sections import SNIPPETS

SCRIPTS = ROOT / "scripts"
DECLARED = SNIPPETS / "script_differences.toml"
BASES = {"DDP-script.py": BOOK / "DDP-script.py", "DDP-script-torchrun.py": SCRIPTS / "DDP-script.py"}


def parts(code: str) -> dict[str, str]:
    """{name: code} of a script's top-level parts, in file order. Every line is in one part, which ends where the next
    unindented line begins: the comments above a statement are its part's, its indented comments after it too. A
    statement among the imports (a signal set before torch loads) is one of them."""
    lines, body = code.splitlines(), ast.parse(code).body
    imports = [index for index, node in enumerate(body) if isinstance(node, (ast.Import, ast.ImportFrom))]
    ends = [next((i for i in range(node.end_lineno, len(lines)) if lines[i][:1].strip()), len(lines))
            for node in body[:-1]]
    found = {}
    for index, (node, start, end) in enumerate(zip(body, [0, *ends], [*ends, len(lines)])):
        if imports and index <= imports[-1]:
            name = "imports"
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            name = "__main__"
        else:
            name = ast.unparse(node).split("=")[0].strip()
        found[name] = found.get(name, "") + "\n".join(lines[start:end]) + "\n"
    return {name: part.strip("\n") for name, part in found.items()}


Part = namedtuple("Part", ["name", "diff"])  # diff: the part's lines after "+", "-" or " "; empty if unchanged


@cache
def book_scripts() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The book's DDP-script.py part by part, and its torchrun script's changed parts as diffs of it: once a build."""
    code = (BOOK / "DDP-script.py").read_text()
    torchrun = compare_code(code, (BOOK / "DDP-script-torchrun.py").read_text())
    return parts(code), {part.name: part.diff for part in torchrun if part.diff}


def compare(script: str) -> list[Part]:  # scripts/SCRIPT against its base
    return compare_code(BASES[script].read_text(), (SCRIPTS / script).read_text())


def compare_code(base_code: str, code: str) -> list[Part]:
    """The parts of both in the order of `code`'s, a part only the base has where the base has it."""
    ours, base = parts(code), parts(base_code)
    order, base_order = list(ours), list(base)
    for index, name in enumerate(base_order):
        if name not in order:  # after the base's part before it, which is in `order` by now
            order.insert(order.index(base_order[index - 1]) + 1 if index else 0, name)
    return [Part(name, diff_lines(base.get(name, "").splitlines(), ours.get(name, "").splitlines()))
            for name in order]


def diff_lines(old: list[str], new: list[str]) -> list[str]:
    """All of `new` as a diff of `old`, blind to whitespace changes (shown as `new` has it); empty if no other."""
    old_words, new_words = ([" ".join(line.split()) for line in lines] for lines in (old, new))
    diff = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_words, new_words, autojunk=False).get_opcodes():
        if tag == "equal":
            diff += [" " + line for line in new[j1:j2]]
        else:
            diff += ["-" + line for line in old[i1:i2]] + ["+" + line for line in new[j1:j2]]
    return diff if old_words != new_words else []


def hunks(diff: list[str]) -> list[str]:
    """Only the changed lines of `diff` and a line around each; "..." where lines are left out."""
    near = [any(line[0] != " " for line in diff[max(index - 1, 0):index + 2]) for index in range(len(diff))]
    shown = []
    for kept, lines in itertools.groupby(zip(near, diff), key=lambda pair: pair[0]):
        shown += [line for _, line in lines] if kept else [" ..."]
    return shown


@cache
def reasons() -> dict[str, dict[str, dict[str, dict[str, str]]]]:
    """{script: {part: {language: {"summary": ..., "reason": ...}}}}; ValueError naming a malformed entry."""
    declared, keys = {}, ("summary", "summary_zh", "reason", "reason_zh")
    for stem, entries in tomllib.loads(DECLARED.read_text()).items():
        for name, entry in entries.items():
            if not (isinstance(entry, dict) and all(entry.get(key) for key in keys)):
                raise ValueError(f"{DECLARED.name}, [{stem}.{name}]: give {', '.join(keys)}")
            declared.setdefault(f"{stem}.py", {})[name] = {
                language: {"summary": entry["summary" + suffix], "reason": entry["reason" + suffix]}
                for language, suffix in (("en", ""), ("zh", "_zh"))}
    return declared
