"""What the prose says about a recorded output, held against it: a sentence about a printed value is followed by a
mark, `<!-- holds: EXPRESSION -->`, evaluated with the page's outputs by their sections' names (Authoring lists what
it sees). The build warns on a false mark (so `--strict` fails) and removes the marks, as tools/notebooks.py does."""

import ast
import json
import math
import re
from dataclasses import dataclass
from functools import cached_property

from tools import ROOT, pages
from tools.store import MANIFEST, output_path, stored_output, varying_patterns

MARK = re.compile(r"[ \t]*\n?[ \t]*<!-- holds: (.*?) -->", re.S)  # at a line's end, or on a line of its own
FENCE = re.compile(r"^[ \t]*(`{3,}).*?^[ \t]*\1[ \t]*$", re.S | re.M)  # a mark in one is an example (Authoring)
TENSOR = re.compile(r"tensor\((\[[^()]*\]|[^,()]+)")  # a printed tensor's values: a (nested) list, or one number
NUMBER = re.compile(r"(?<!\w)-?\d+(?:\.\d*)?(?:e[-+]?\d+)?")
BENCH = ROOT / "measured" / "bench.json"
BUILTINS = {function.__name__: function for function in (
    abs, all, any, float, int, len, list, max, min, range, round, set, sorted, str, sum, zip)}


@dataclass(frozen=True)
class Output:  # what a block printed, as the recording stored it
    key: str
    text: str

    lines = property(lambda self: self.text.splitlines())
    numbers = property(lambda self: [float(number) for number in NUMBER.findall(self.text)])  # all, in order

    def after(self, label: str) -> list[float]:  # the number after each `label`: train.after("Loss:")
        return [float(number) for number in re.findall(rf"{re.escape(label)}\s*({NUMBER.pattern})", self.text)]

    @cached_property
    def tensors(self) -> list:  # the values of each tensor(...) it prints, as nested lists (... where it skips)
        return [ast.literal_eval(values) for values in TENSOR.findall(self.text)]

    def _plotted(self, kind: str) -> list:
        path = output_path(self.key, ".plot.json")
        return json.loads(path.read_text())[0][kind] if path.exists() else []

    # A plot's: the [x, y] points of each scatter, and of each line, in the order they were drawn.
    points = property(lambda self: self._plotted("points"))
    curves = property(lambda self: self._plotted("lines"))
    varies = property(lambda self: self.key in varying_patterns())  # declared in snippets/varying_outputs.toml


def marks(markdown: str) -> list[re.Match]:
    fences = [fence.span() for fence in FENCE.finditer(markdown)]
    return [mark for mark in MARK.finditer(markdown) if not any(start < mark.end() <= end for start, end in fences)]


def _block(keys: tuple[str, ...], read) -> Output | None:  # what a code block shows under it (None: no block)
    printed = [(key, text) for key in keys if (text := read(key)) is not None]
    return Output("+".join(key for key, _ in printed), "".join(text for _, text in printed)) if printed else None


def problems(markdown: str, source: str, read=stored_output) -> list[str]:
    """Each mark of `markdown` that is false or cannot be read, against the outputs `read("module:section")` gives."""
    if not (found_marks := marks(markdown)):
        return []
    blocks = pages.read(source, text=markdown).blocks
    shown = {key: Output(key, read(key) or "") for block in blocks for key in block.keys  # what each printed, or drew
             if read(key) is not None or output_path(key, ".plot.json").exists()}
    names = [key.split(":")[1] for key in shown]
    namespace = {"__builtins__": BUILTINS, "math": math, "bench": json.loads(BENCH.read_text()),
                 "environment": json.loads(MANIFEST.read_text())["environment"],
                 "output": lambda key: Output(key, read(key) or ""),
                 **{name: output for name, output in zip(names, shown.values()) if names.count(name) == 1}}
    found = []
    for mark in found_marks:
        before = [block.keys for block in blocks if block.fence.end() <= mark.start()] or [()]
        after = [block.keys for block in blocks if block.fence.start() >= mark.end()] or [()]
        scope = {**namespace, "above": _block(before[-1], read), "below": _block(after[0], read)}
        where = f"{source}:{markdown.count(chr(10), 0, mark.end()) + 1}"  # the mark's line
        try:
            holds = eval(mark[1], scope)  # the site's own pages, with the names above and a few builtins
        except Exception as error:  # a typo, an output that is not there: say which
            found.append(f"{where}: the mark <!-- holds: {mark[1]} --> cannot be read: "
                         f"{type(error).__name__}: {error}.")
            continue
        if not holds:
            said = " ".join(without_marks(markdown[:mark.start()].rsplit("\n\n", 1)[-1]).split())[-120:]
            found.append(f"{where}: the recorded outputs no longer bear out “{said}”: `{mark[1]}` is false. "
                         "Change the sentence and its mark together.")
    return found


def without_marks(markdown: str) -> str:
    for mark in reversed(marks(markdown)):
        markdown = markdown[:mark.start()] + markdown[mark.end():]
    return markdown
