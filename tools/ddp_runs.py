"""The DDP scripts' recorded runs (SCRIPT_RUNS), the environment they run in, and what they print, rank by rank."""

import os
import re
import runpy
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from tools import ROOT
from tools.page_runner import TIME_LIMIT, TimedOut, run
from tools.store import RecordingError

RANK_LINE = re.compile(r"\[(?:rank |GPU)(\d+)\] ")  # ours print [rank 0], the book's [GPU0]


def in_rank_order(stdout: str) -> str:
    """A DDP run's lines, each rank's together in the order it printed them, rank after rank (lines of no rank
    first): the ranks interleave differently on every run, so the pages show a run this way, and say so."""
    return "".join(sorted(stdout.splitlines(keepends=True),
                          key=lambda line: int(match[1]) if (match := RANK_LINE.match(line)) else -1))


def trained_fully(stdout: str, world_size: int) -> bool:
    """Whether every rank of a DDP run printed the accuracy lines of a model that learned the toy data."""
    return all(f"[rank {rank}] {data} accuracy 1.0\n" in stdout
               for rank in range(world_size) for data in ("Training", "Test"))


@dataclass(frozen=True)
class ScriptRun:
    """A recorded run: the command a reader types, the arguments after `python`. One that trains is recorded from
    stdout, the same bytes on every run (notes that change go to stderr); a failing one from stderr."""

    command: str
    args: tuple
    status: int = 0  # the exit status the run must have
    env: tuple = ()  # (name, value) pairs the command sets
    changes: tuple = ()  # (old, new) pairs made in a copy of the script, each old text found exactly once
    page: str | None = None  # the page under whose name check-appendix-a.py runs the script too (tools/checker.py)

    def recorded(self, stdout: str, stderr: str) -> str:
        return stderr if self.status else in_rank_order(stdout)

    def arguments(self, folder: Path) -> list[str]:
        """The arguments after `python`, with `changes` those of a changed copy written in `folder`."""
        if not self.changes:
            return list(self.args)
        script, *rest = self.args
        code = (ROOT / script).read_text()
        for old, new in self.changes:
            if code.count(old) != 1:
                raise RecordingError(f"{script} has {code.count(old)} times, not once, the text {old!r} that "
                                     "tools/ddp_runs.py changes for its recorded run; update the change.")
            code = code.replace(old, new)
        copy = Path(folder, Path(script).name)
        copy.write_text(code)
        return [str(copy), *rest]


def run_key(name: str) -> str:
    """The key of SCRIPT_RUNS[name]'s machine-dependent lines in snippets/varying_outputs.toml."""
    return f"scripts:{Path(name).stem}"


FAULT_INJECTION = ROOT / "scripts" / "fault-injection"
# The book's DDP-script.py on a CPU, with two processes: its device lines, and nothing else, changed.
BOOK_ON_CPU = (
    ('init_process_group(backend="nccl", rank=rank, world_size=world_size)',
     'init_process_group(backend="gloo", rank=rank, world_size=world_size)'),
    ("    torch.cuda.set_device(rank)\n", ""),
    ("model.to(rank)", 'model.to("cpu")'),
    ("model = DDP(model, device_ids=[rank])", "model = DDP(model)"),
    ("features.to(rank), labels.to(rank)", 'features.to("cpu"), labels.to("cpu")'),
    ("compute_accuracy(model, train_loader, device=rank)", 'compute_accuracy(model, train_loader, device="cpu")'),
    ("compute_accuracy(model, test_loader, device=rank)", 'compute_accuracy(model, test_loader, device="cpu")'),
    ("world_size = torch.cuda.device_count()", "world_size = 2"),
)
SCRIPT_RUNS = {
    "DDP-script.txt": ScriptRun("python scripts/DDP-script.py", ("scripts/DDP-script.py",)),
    "book-DDP-script-cpu.txt": ScriptRun("python DDP-script.py (book/, its device lines changed for the CPU)",
                                         ("book/DDP-script.py",), changes=BOOK_ON_CPU),
    "DDP-script-fault-kill.txt": ScriptRun(
        "PYTHONPATH=scripts/fault-injection FAULT=kill python scripts/DDP-script.py",
        ("scripts/DDP-script.py",), status=1, env=(("PYTHONPATH", str(FAULT_INJECTION)), ("FAULT", "kill"))),
    "ddp-inside.txt": ScriptRun("python scripts/ddp-inside.py", ("scripts/ddp-inside.py",),
                                page="a9-multi-gpu-training.md"),
}


# ddp-inside.py prints sections (before and after DDP(...), each step), each of rows of a label in 11 characters and
# a cell of 12 for each rank; a row of two numbers takes two lines.
INSIDE_SECTION = re.compile(r"(before|after) DDP\(\.\.\.\):|(step \d+) \(epoch \d+\):")


def inside_table(text: str) -> dict:
    """{"before", "after", "step 1", ...: {row label: [[a cell per rank] for each of its lines]}}."""
    if not (ranks := re.match(r"DDP: (\d+) processes", text)):
        raise ValueError(f"not a printout of ddp-inside.py:\n{text}")
    table, section, label = {}, None, None
    for line in text.splitlines():
        if heading := INSIDE_SECTION.fullmatch(line):
            section = table.setdefault(heading[1] or heading[2], {})
        elif section is not None:
            label = line[:11].strip() or label
            section.setdefault(label, []).append([line[11 + 12 * rank:23 + 12 * rank].strip()
                                                  for rank in range(int(ranks[1]))])
    return table


def inside_problems(text: str) -> list[str]:
    """What a printout of ddp-inside.py shows that DDP must not do: the ranks' weights alike before DDP(...) or unlike
    after it, two ranks given one example in a step, an all-reduce that is not the mean of the ranks' gradients."""
    table = inside_table(text)
    steps = [name for name in table if name.startswith("step ")]
    problems = [f"it shows {len(steps)} steps, not at least 3"] * (len(steps) < 3)
    if len(set(table["before"]["checksum"][0])) == 1:
        problems.append(f"before DDP(...), the ranks' checksums are equal: {table['before']['checksum'][0]}")
    for name in ["after", *steps]:
        if len(set(checksums := table[name]["checksum"][0])) > 1:
            problems.append(f"{name}: the ranks' checksums differ: {checksums}")
    for name in steps:
        rows = table[name]
        taken = [{int(index) for index in cell.split(", ")} for cell in rows["examples"][0]]
        if sum(map(len, taken)) != len(set().union(*taken)):
            problems.append(f"{name}: the ranks' examples overlap: {rows['examples'][0]}")
        for own, averaged in zip(rows["own b.grad"], rows["all-reduce"]):
            mean = sum(map(float, own)) / len(own)
            if any(abs(float(value) - mean) > 1e-6 for value in averaged):
                problems.append(f"{name}: the all-reduce gave {averaged}, not the mean of {own}")
    return problems


def ddp_environment(**extra) -> dict:
    """The caller's environment on the CPU, less what would steer a DDP launch. PYTHONUNBUFFERED would make each rank
    write a line in two pieces, which the other ranks' lines can split."""
    steering = {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                "GROUP_RANK", "USE_LIBUV", "OMP_NUM_THREADS", "PYTHONPATH", "PYTHONUNBUFFERED"}
    env = {k: v for k, v in os.environ.items()
           if k not in steering and not k.startswith(("TORCHELASTIC_", "TORCH_DISABLE_SHARE"))}
    return {**env, "CUDA_VISIBLE_DEVICES": "", **extra}


def run_script(name: str) -> str:
    """What SCRIPT_RUNS[name] prints on its recorded stream; RecordingError if it ends otherwise."""
    script_run = SCRIPT_RUNS[name]
    with tempfile.TemporaryDirectory(prefix="ddp-run-") as tmp:  # torchrun's files go, however it ends
        try:
            status, stdout, stderr = run([sys.executable, *script_run.arguments(tmp)], TIME_LIMIT, cwd=ROOT,
                                         env=ddp_environment(TMPDIR=tmp, **dict(script_run.env)))
        except TimedOut as stopped:
            raise RecordingError(f"`{script_run.command}` was {stopped}.") from None
    if status != script_run.status:
        raise RecordingError(f"`{script_run.command}` exited with status {status}, not {script_run.status}. "
                             f"Its standard error:\n{stderr}")
    return script_run.recorded(stdout, stderr)


def load_script(script: Path) -> SimpleNamespace:
    """A DDP script's functions and classes, with this process's Ctrl-C handler, which the script resets, put back."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return SimpleNamespace(**runpy.run_path(str(script)))
    finally:
        signal.signal(signal.SIGINT, handler)


def training_loader(script: Path = ROOT / "scripts" / "DDP-script.py"):
    """A DDP script's prepare_dataset's training loader, made in a process group of one, which its sampler needs."""
    import torch.distributed as dist

    prepare_dataset = load_script(script).prepare_dataset
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        return prepare_dataset()[0]
    finally:
        dist.destroy_process_group()


def training_data():
    """DDP-script.py's training set (the enlarged toy data), made by the script itself."""
    return training_loader().dataset
