"""Run what is recorded, each in a process group of its own: a page's download (through
tools/page_runner.py) and the DDP scripts' recorded runs. `session` is the one way the recorder,
gpu_check and the DDP tests start a process tree and make sure none of it outlives them.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT, pages
from tools.store import RecordingError

PAGE_RUNNER = ROOT / "tools" / "page_runner.py"
running = set()  # the sessions now running, stopped at once if the recording is interrupted


def kill_group(process: subprocess.Popen, signum: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


@contextlib.contextmanager
def session(command: list[str], **popen):
    """`command` in a session (and process group) of its own; on the way out, however the caller
    leaves, whatever of the group still runs is killed."""
    process = subprocess.Popen(command, start_new_session=True, **popen)
    running.add(process)
    try:
        yield process
    finally:
        kill_group(process)
        process.wait()
        running.discard(process)


def in_parallel(function, items) -> list:
    """function(item) for every item, on every core; an interruption stops the sessions at once."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        try:
            return list(pool.map(function, items))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            for process in list(running):  # SIGTERM first: a DDP launch cleans up on it
                kill_group(process, signal.SIGTERM)
            for process in list(running):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(5)
                kill_group(process)
            raise


def run_page(page: str) -> dict:
    """Run the page's download alone; {"cells": [...], "outputs": [text per cell], "environment": {...},
    "plots": {"module:section": {data, svg}}}: the figure a section's code draws, as it is shown."""
    cells = pages.program(page)
    with tempfile.TemporaryDirectory(prefix="page-run-") as folder:
        script = Path(folder) / pages.download_name(page)
        script.write_text(pages.download_text(page, cells))
        result = Path(folder) / "result.json"
        with session([sys.executable, "-I", str(PAGE_RUNNER), str(script), str(result), '{"save": true}'],
                     cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as child:
            _, stderr = child.communicate()
        if child.returncode != 0:
            raise RecordingError(f"the code of docs/{page} does not run alone:\n{stderr.strip()}")
        run = json.loads(result.read_text())
        run["plots"] = {}
        for index, output in enumerate(run["outputs"]):
            if isinstance(output, dict):
                svg = in_both_palettes(Path(f"{result}.{index}.svg").read_text())
                run["plots"][cells[index].key] = {"data": output["plot"], "svg": svg}
                run["outputs"][index] = output["text"]
    return {"cells": cells, **run}


def in_both_palettes(svg: str) -> str:
    """Matplotlib's SVG (transparent) drawn in the colour of the text around it, which follows the light and
    dark palettes where it is inline (on the pages, in the notebooks): black becomes currentColor (black text
    has no fill: it inherits the root's), the legend's white box the page's background. Inline, it shares the
    page's ids and styles: the ids of its parts (figure_1, matplotlib.axis_1: every plot has them) go, and
    its style rule for every element (*) is kept to plots."""
    svg = re.sub(r' id="[\w.]+_\d+"', "", svg)
    svg = svg.replace("#000000", "currentColor").replace("fill: #ffffff", "fill: var(--md-default-bg-color, #fff)")
    svg = svg.replace("<svg ", '<svg fill="currentColor" ', 1)
    return svg.replace("*{", "figure.plot svg *{", 1)


# ---------------------------------------------------------------------------------------------
# The DDP scripts' runs

SCRIPT_TIME_LIMIT = 300  # seconds for one run; past it its process group is killed
RANK_LINE = re.compile(r"\[rank (\d+)\] ")


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
    `env`: variables the command sets (a fault injected from scripts/fault-injection)."""

    command: str
    args: tuple
    stream: str = "stdout"
    status: int = 0  # the exit status the run must have
    env: tuple = ()  # (name, value) pairs


FAULT_INJECTION = ROOT / "scripts" / "fault-injection"
SCRIPT_RUNS = {
    "DDP-script.txt": ScriptRun("python scripts/DDP-script.py", ("scripts/DDP-script.py",)),
    "DDP-script-fault-kill.txt": ScriptRun(
        "PYTHONPATH=scripts/fault-injection FAULT=kill python scripts/DDP-script.py",
        ("scripts/DDP-script.py",), stream="stderr", status=1,
        env=(("PYTHONPATH", str(FAULT_INJECTION)), ("FAULT", "kill"))),
}


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
    run = SCRIPT_RUNS[name]
    with tempfile.TemporaryDirectory(prefix="ddp-run-") as tmp:  # torchrun's files go, however it ends
        env = ddp_environment(TMPDIR=tmp, **dict(run.env))
        with session([sys.executable, *run.args], cwd=ROOT, env=env, text=True,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
            try:
                stdout, stderr = child.communicate(timeout=SCRIPT_TIME_LIMIT)
            except subprocess.TimeoutExpired:
                raise RecordingError(f"`{run.command}` ran for more than {SCRIPT_TIME_LIMIT} s and was "
                                     "stopped.") from None
    if child.returncode != run.status:
        raise RecordingError(f"`{run.command}` exited with status {child.returncode}, not {run.status}. "
                             f"Its standard error:\n{stderr}")
    return in_rank_order(stdout) if run.stream == "stdout" else stderr
