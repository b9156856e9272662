"""The DDP scripts' recorded runs: what each is (SCRIPT_RUNS), the environment they run in, and what
they print, rank by rank; the recorder, gpu_check, bench and the DDP tests read them here."""

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
    """A DDP run's lines with each rank's together, rank after rank, each in the order it printed them;
    lines of no rank first. The ranks print at the same time, so a terminal shows them interleaved, and
    differently on every run: the pages show a run this way, and say so."""
    def rank(line):
        return int(match[1]) if (match := RANK_LINE.match(line)) else -1
    return "".join(sorted(stdout.splitlines(keepends=True), key=rank))


def trained_fully(stdout: str, world_size: int) -> bool:
    """Whether every rank of a DDP run printed the accuracy lines of a model that learned the toy data."""
    return all(f"[rank {rank}] {data} accuracy 1.0\n" in stdout
               for rank in range(world_size) for data in ("Training", "Test"))


@dataclass(frozen=True)
class ScriptRun:
    """A recorded run: the command a reader types, the arguments after `python`, what is kept.
    A run that trains is recorded from stdout, where the scripts print the same bytes on every run
    (notes that change, such as where a snapshot is, go to stderr); a failing one from stderr.
    `env`: variables the command sets (a fault injected from scripts/fault-injection). `page`: the page
    under whose name check-appendix-a.py runs the script too (tools/checker.py), as a reader would.
    `changes`: (old, new) pairs; the run is of a copy of the script with each old text, found exactly once, made new."""

    command: str
    args: tuple
    stream: str = "stdout"
    status: int = 0  # the exit status the run must have
    env: tuple = ()  # (name, value) pairs
    changes: tuple = ()
    page: str | None = None

    def recorded(self, stdout: str, stderr: str) -> str:
        """What is kept of a run of it: its recorded stream, the ranks' lines in rank order."""
        return in_rank_order(stdout) if self.stream == "stdout" else stderr

    def arguments(self, folder: Path) -> list[str]:
        """The arguments after `python`: the script's, or, with `changes`, those of its changed copy written in
        `folder`; RecordingError if an old text is not in the script exactly once."""
        if not self.changes:
            return list(self.args)
        script, *rest = self.args
        code = (ROOT / script).read_text()
        for old, new in self.changes:
            if code.count(old) != 1:
                raise RecordingError(f"{script} has {code.count(old)} times, not once, the text {old!r} that "
                                     "tools/ddp_runs.py changes for its recorded run; update the change.")
            code = code.replace(old, new)
        copy = Path(folder) / Path(script).name
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
        ("scripts/DDP-script.py",), stream="stderr", status=1,
        env=(("PYTHONPATH", str(FAULT_INJECTION)), ("FAULT", "kill"))),
    "ddp-inside.txt": ScriptRun("python scripts/ddp-inside.py", ("scripts/ddp-inside.py",),
                                page="a9-multi-gpu-training.md"),
}


# ddp-inside.py's printout: a heading a section (before and after DDP(...), each step), then rows of
# a label in 11 characters and a cell of 12 for each rank; a row of two numbers takes two lines.
INSIDE_SECTION = re.compile(r"(before|after) DDP\(\.\.\.\):|(step \d+) \(epoch \d+\):")


def inside_table(text: str) -> dict:
    """{section: {row label: [[a cell per rank] for each of its lines]}}; the sections "before",
    "after", "step 1", ...; ValueError if `text` is not a printout of ddp-inside.py."""
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
    """What a printout of ddp-inside.py shows that DDP must not do: the ranks' weights alike before DDP(...)
    (each drew its own) or unlike after it or after a step; two ranks given one example in a step; an
    all-reduce result that is not the mean of the ranks' own gradients (within 1e-6)."""
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
    """The caller's environment on the CPU, without what would steer a DDP launch: the same
    recording on every machine. PYTHONUNBUFFERED would make each rank write a line in two pieces,
    which the other ranks' lines can split."""
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
    """A DDP script's functions and classes (its launcher runs only under __main__), with this process's Ctrl-C
    put back: the script's first lines set it to the system's default."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return SimpleNamespace(**runpy.run_path(str(script)))
    finally:
        signal.signal(signal.SIGINT, handler)


def training_loader(script: Path = ROOT / "scripts" / "DDP-script.py"):
    """The training loader that a DDP script's prepare_dataset makes (ours, or a copy of the book's); its sampler
    needs a process group: one of one process, in memory, for the call."""
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
