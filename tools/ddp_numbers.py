"""The numbers A.9.3 states about the DDP scripts, computed, never typed: a page writes <!-- ddp NAME --> and the
hooks put in the number, found by `ast` in the book's and our scripts (the build has no torch) or counted in their
recorded runs (scripts/outputs/)."""

import ast
import re
from collections import Counter

from tools import BOOK, ROOT
from tools.ddp_runs import RANK_LINE
from tools.store import SCRIPT_OUTPUTS

MARK = re.compile(r"(?<!`)<!-- ddp ([\w.]+) -->")  # not `<!-- ddp NAME -->`, code naming a mark


def _function(script, name: str) -> ast.FunctionDef:
    return next(node for node in ast.parse(script.read_text()).body
                if isinstance(node, ast.FunctionDef) and node.name == name)


def _assigned(node: ast.AST, name: str) -> ast.expr:
    """The value of the first `name = ...` in `node`."""
    return next(n.value for n in ast.walk(node) if isinstance(n, ast.Assign)
                and any(isinstance(target, ast.Name) and target.id == name for target in n.targets))


def examples(script) -> int:
    """The toy training set as the script types it: the labels in `y_train = torch.tensor([...])`."""
    return len(_assigned(_function(script, "prepare_dataset"), "y_train").args[0].elts)


def factor(script) -> int:  # where the script sets `factor = N` (ours)
    return ast.literal_eval(_assigned(_function(script, "prepare_dataset"), "factor"))


def factor_block(script) -> tuple[int, int, int]:
    """(first line, last line, factor) of the commented-out lines that name `factor` (the book's scripts)."""
    function, lines = _function(script, "prepare_dataset"), script.read_text().splitlines()
    block = [number for number in range(function.lineno, function.end_lineno + 1)
             if re.fullmatch(r"\s*# .*\bfactor\b.*", lines[number - 1])]
    if block != list(range(block[0], block[-1] + 1)):
        raise ValueError(f"{script.name}: the commented-out lines with `factor` are not together: {block}")
    return block[0], block[-1], ast.literal_eval(_assigned(ast.parse(lines[block[0] - 1].strip()[2:]), "factor"))


def batch_size(script) -> int:
    """The training loader's batch size, per process: the DataLoader given a sampler."""
    loader = next(n for n in ast.walk(_function(script, "prepare_dataset")) if isinstance(n, ast.Call)
                  and any(keyword.arg == "sampler" for keyword in n.keywords))
    return next(ast.literal_eval(keyword.value) for keyword in loader.keywords if keyword.arg == "batch_size")


def loss_lines(recording: str) -> tuple[int, int]:
    """(ranks, loss lines each printed) in a recorded run; ValueError if the ranks printed different numbers."""
    counts = Counter(int(match[1]) for line in (SCRIPT_OUTPUTS / recording).read_text().splitlines()
                     if (match := RANK_LINE.match(line)) and "Loss:" in line)
    if len(set(counts.values())) != 1:
        raise ValueError(f"scripts/outputs/{recording}: the ranks printed different numbers of loss lines: {counts}")
    return len(counts), next(iter(counts.values()))


BOOK_SCRIPT, BOOK_TORCHRUN = BOOK / "DDP-script.py", BOOK / "DDP-script-torchrun.py"
OURS = ROOT / "scripts" / "DDP-script.py"
BOOK_RUN = "book-DDP-script-cpu.txt"  # tools/ddp_runs.py SCRIPT_RUNS


def _lines(script, edition) -> str:
    first, last, _ = factor_block(script)
    return edition.words["line_range"].format(first=first, last=last)


NUMBERS = {  # name -> what it is, in an edition's words
    "book.examples": lambda edition: examples(BOOK_SCRIPT),
    "book.factor": lambda edition: factor_block(BOOK_SCRIPT)[2],
    "book.examples_with_factor": lambda edition: examples(BOOK_SCRIPT) * factor_block(BOOK_SCRIPT)[2],
    "book.batch_size": lambda edition: batch_size(BOOK_SCRIPT),
    "book.epochs": lambda edition: ast.literal_eval(_assigned(ast.parse(BOOK_SCRIPT.read_text()), "num_epochs")),
    "book.lines_per_rank": lambda edition: loss_lines(BOOK_RUN)[1],
    "book.factor_lines": lambda edition: _lines(BOOK_SCRIPT, edition),
    "book_torchrun.factor_lines": lambda edition: _lines(BOOK_TORCHRUN, edition),
    "book.effective_batch": lambda edition: batch_size(BOOK_SCRIPT) * loss_lines(BOOK_RUN)[0],
    "ours.examples": lambda edition: examples(OURS) * factor(OURS),
    "ours.lines_per_rank": lambda edition: loss_lines("DDP-script.txt")[1],
}


def fill(html: str, edition) -> tuple[str, list[str]]:
    """`html` with every <!-- ddp NAME --> filled in, and a sentence for each mark that it could not fill."""
    problems = []

    def number(match):
        if match[1] not in NUMBERS:
            problems.append(f"<!-- ddp {match[1]} --> names no number that tools/ddp_numbers.py computes; use one "
                            f"of {', '.join(NUMBERS)}.")
            return match[0]
        try:
            return str(NUMBERS[match[1]](edition))
        except Exception as error:  # a script or a recording that no longer reads as this module expects
            problems.append(f"<!-- ddp {match[1]} --> cannot be computed ({error!r}); make tools/ddp_numbers.py "
                            "read the scripts and their recordings as they are now.")
            return match[0]

    return MARK.sub(number, html), list(dict.fromkeys(problems))
