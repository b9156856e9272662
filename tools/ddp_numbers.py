"""The numbers A.9.3 states about the DDP scripts, computed, never typed: the hooks fill <!-- ddp NAME --> with what
`ast` finds in the book's and our scripts (the build has no torch) or what their recordings (scripts/outputs/) count."""

import ast
import re
from collections import Counter

from tools import BOOK, ROOT
from tools.ddp_runs import RANK_LINE
from tools.store import SCRIPT_OUTPUTS

MARK = re.compile(r"(?<!`)<!-- ddp ([\w.]+) -->")  # not `<!-- ddp NAME -->`, code naming a mark


def _assigned(code: str, name: str) -> ast.expr:
    """The value of the first `name = ...` in `code`, the outermost first."""
    return next(n.value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Assign)
                and any(isinstance(target, ast.Name) and target.id == name for target in n.targets))


def examples(script) -> int:
    """The toy training set as the script types it: the labels in `y_train = torch.tensor([...])`."""
    return len(_assigned(script.read_text(), "y_train").args[0].elts)


def factor_block(script) -> dict:
    """The commented-out lines that name `factor` (the book's scripts): {"first": line, "last": line, "factor": N}."""
    lines = script.read_text().splitlines()
    block = [number for number, line in enumerate(lines, 1) if re.fullmatch(r"\s*# .*\bfactor\b.*", line)]
    if block != list(range(block[0], block[-1] + 1)):
        raise ValueError(f"{script.name}: the commented-out lines with `factor` are not together: {block}")
    factor = ast.literal_eval(_assigned(lines[block[0] - 1].strip()[2:], "factor"))
    return {"first": block[0], "last": block[-1], "factor": factor}


def batch_size(script) -> int:
    """The training loader's batch size, per process: the DataLoader given a sampler."""
    loaders = [{keyword.arg: keyword.value for keyword in n.keywords}
               for n in ast.walk(ast.parse(script.read_text())) if isinstance(n, ast.Call)]
    return next(ast.literal_eval(loader["batch_size"]) for loader in loaders if "sampler" in loader)


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


NUMBERS = {  # name -> what it is, in an edition's words
    "book.examples": lambda edition: examples(BOOK_SCRIPT),
    "book.factor": lambda edition: factor_block(BOOK_SCRIPT)["factor"],
    "book.examples_with_factor": lambda edition: examples(BOOK_SCRIPT) * factor_block(BOOK_SCRIPT)["factor"],
    "book.batch_size": lambda edition: batch_size(BOOK_SCRIPT),
    "book.epochs": lambda edition: ast.literal_eval(_assigned(BOOK_SCRIPT.read_text(), "num_epochs")),
    "book.lines_per_rank": lambda edition: loss_lines(BOOK_RUN)[1],
    "book.factor_lines": lambda edition: edition.words["line_range"].format(**factor_block(BOOK_SCRIPT)),
    "book_torchrun.factor_lines": lambda edition: edition.words["line_range"].format(**factor_block(BOOK_TORCHRUN)),
    "book.effective_batch": lambda edition: batch_size(BOOK_SCRIPT) * loss_lines(BOOK_RUN)[0],
    "ours.examples": lambda edition: examples(OURS) * ast.literal_eval(_assigned(OURS.read_text(), "factor")),
    "ours.lines_per_rank": lambda edition: loss_lines("DDP-script.txt")[1],
}


def fill(html: str, edition) -> tuple[str, list[str]]:
    """`html` with every <!-- ddp NAME --> filled in, and a sentence for each mark that it could not fill."""
    problems = []

    def number(match):
        try:
            return str(NUMBERS[match[1]](edition))
        except Exception as error:  # no such number, or a script or a recording that no longer reads as expected
            problems.append(f"<!-- ddp {match[1]} --> names no number that tools/ddp_numbers.py computes; use one "
                            f"of {', '.join(NUMBERS)}." if match[1] not in NUMBERS else
                            f"<!-- ddp {match[1]} --> cannot be computed ({error!r}); make tools/ddp_numbers.py "
                            "read the scripts and their recordings as they are now.")
            return match[0]

    return MARK.sub(number, html), list(dict.fromkeys(problems))
