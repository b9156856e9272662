"""Record what the DDP scripts print, on 2 CPU processes with Gloo, into scripts/outputs/.

    python -m tools.record_script_outputs   # part of `make outputs`

A run that trains is recorded from stdout, where the scripts print the same bytes on every run
(notes that change, such as where a snapshot is, go to stderr). The run that shows a failing
rank is recorded from stderr. The tests compare fresh runs with these files.
"""

import os
import signal
import subprocess
import sys
from dataclasses import dataclass

from tools.sections import ROOT

OUTPUTS = ROOT / "scripts" / "outputs"
TIME_LIMIT = 300  # seconds for one run; past it the run's process group is killed


@dataclass(frozen=True)
class Run:
    """A recorded run: the command a reader types, the arguments after `python`, what is kept."""

    command: str
    args: tuple
    stream: str = "stdout"
    status: int = 0  # the exit status the run must have


RUNS = {
    "DDP-script.txt": Run("python scripts/DDP-script.py", ("scripts/DDP-script.py",)),
    "DDP-script-torchrun.txt": Run(
        "torchrun --standalone --nproc_per_node=2 scripts/DDP-script-torchrun.py",
        ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "scripts/DDP-script-torchrun.py")),
    "DDP-script-fault-stall.txt": Run(
        "python scripts/DDP-script.py --fault stall --timeout 5",
        ("scripts/DDP-script.py", "--fault", "stall", "--timeout", "5"), stream="stderr", status=1),
}


def environment(**extra):
    """The caller's environment on the CPU, without what would steer a DDP launch: the same
    recording on every machine."""
    steering = {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                "GROUP_RANK", "USE_LIBUV", "OMP_NUM_THREADS", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items()
           if k not in steering and not k.startswith(("TORCHELASTIC_", "TORCH_DISABLE_SHARE"))}
    return {**env, "CUDA_VISIBLE_DEVICES": "", **extra}


def record(run):
    """What `run` prints on the recorded stream; exit with a message if it does not end as it must."""
    process = subprocess.Popen([sys.executable, *run.args], cwd=ROOT, env=environment(), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        sys.exit(f"`{run.command}` ran for more than {TIME_LIMIT} s and was stopped; nothing was recorded.")
    if process.returncode != run.status:
        sys.exit(f"`{run.command}` exited with status {process.returncode}, not {run.status}; "
                 f"nothing was recorded. Its standard error:\n{stderr}")
    return stdout if run.stream == "stdout" else stderr


def main():
    recorded = {name: record(run) for name, run in RUNS.items()}  # all, before writing any
    OUTPUTS.mkdir(exist_ok=True)
    for name, text in recorded.items():
        (OUTPUTS / name).write_text(text)
    print(f"recorded {', '.join(recorded)} into {OUTPUTS.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
