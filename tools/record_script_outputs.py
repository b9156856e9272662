"""Record what the DDP scripts print on 2 CPU processes, or check it against what is stored.

    python -m tools.record_script_outputs          # re-record scripts/outputs/*.txt (part of `make outputs`)
    python -m tools.record_script_outputs --check  # compare with fresh runs; exit 1 with a diff

For a run that trains, stdout is recorded: the scripts print their results there, the same
bytes on every run, and put what changes from run to run (a snapshot's path, torchrun's own
notes) on stderr. For the run that shows a failing rank, stderr is recorded.
The runs are kept on the CPU with Gloo (CUDA_VISIBLE_DEVICES="", no MASTER_ADDR/MASTER_PORT or
torchrun variables from the caller), so a machine with GPUs records the same thing.

One line depends on the machine, the torch version, declared with the snippets' machine-dependent
lines in snippets/varying_outputs.toml (under [scripts.NAME]). The check compares its shape, not its
value; every other character must match.

The tests import `run_job` (one launch with a time limit, leaving no process behind),
`recorded_text`, `fresh_output` and `drift`, and `single_process_weights`: what DDP training must equal.
"""

import argparse
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tools.record_outputs import compare_text, varying_patterns
from tools.sections import ROOT

SCRIPTS = ROOT / "scripts"
OUTPUTS = SCRIPTS / "outputs"
RERECORD = "python -m tools.record_script_outputs"

@dataclass(frozen=True)
class Run:
    """A recorded run: the command a reader types, the arguments after `python`, and what is kept."""

    command: str
    args: tuple
    stream: str = "stdout"  # which stream is recorded
    status: int = 0  # the exit status the run must have


RUNS = {
    "DDP-script.txt": Run(
        "python scripts/DDP-script.py",
        ("scripts/DDP-script.py",)),
    "DDP-script-torchrun.txt": Run(
        "torchrun --standalone --nproc_per_node=2 scripts/DDP-script-torchrun.py",
        ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "scripts/DDP-script-torchrun.py")),
    # What a rank that stops responding looks like (standard error; the job must fail).
    "DDP-script-fault-stall.txt": Run(
        "python scripts/DDP-script.py --fault stall --timeout 5",
        ("scripts/DDP-script.py", "--fault", "stall", "--timeout", "5"), stream="stderr", status=1),
}

TAG = "DDP_JOB_TAG"  # every process of a job inherits it, which is how survivors are found


def clean_environment(**extra):
    """The caller's environment without anything that would steer a DDP launch, on the CPU."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "USE_LIBUV",
                        "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMP_NUM_THREADS"}
           and not k.startswith(("TORCHELASTIC_", "TORCH_DISABLE_SHARE"))}
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


@dataclass
class Job:
    """The result of one launch."""

    command: list
    returncode: int
    stdout: str
    stderr: str
    seconds: float  # from the start to the exit of the launching process
    survivors: list = field(default_factory=list)  # "pid command" of processes still alive afterwards
    stderr_lines: list = field(default_factory=list)  # (seconds since the start, line)

    def seconds_after(self, text):
        """Seconds from the first stderr line containing `text` to the exit (None if there is none)."""
        return next((self.seconds - at for at, line in self.stderr_lines if text in line), None)

    def describe(self):
        return (f"$ {' '.join(self.command)}\nexit status {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}")


def tagged_processes(tag):
    """The processes whose environment carries DDP_JOB_TAG=tag."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "name", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(TAG) == tag:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def run_job(args, env=None, timeout=120, settle=2.0, stdin=None, tmpdir=None):
    """Run `python ARGS...` from the repository root in its own session and return a Job.

    The job is killed after `timeout` seconds. Afterwards, processes that carry the job's tag
    (torchrun's workers run in sessions of their own) get `settle` seconds to go away; any that
    remain are listed in `survivors` and then killed, so that a failing test leaves nothing behind.
    The job's temporary files (torchrun's logs, a default snapshot) go to `tmpdir` (TMPDIR);
    without one, to a folder of its own that is removed afterwards.
    """
    tag = uuid.uuid4().hex
    command = [sys.executable, *map(str, args)]
    own_tmpdir = tmpdir is None
    tmpdir = Path(tempfile.mkdtemp(prefix="ddp-job-")) if own_tmpdir else Path(tmpdir)
    tmpdir.mkdir(parents=True, exist_ok=True)
    env = dict(clean_environment() if env is None else env, **{TAG: tag, "TMPDIR": str(tmpdir)})
    try:
        return _run(command, env, tag, timeout, settle, stdin)
    finally:
        if own_tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)


def _run(command, env, tag, timeout, settle, stdin):
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=stdin or subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    timer = threading.Timer(timeout, lambda: _kill_everything(process.pid, tag))
    timer.start()
    out, err = [], []
    readers = [threading.Thread(target=_read_lines, args=(stream, lines, start), daemon=True)
               for stream, lines in ((process.stdout, out), (process.stderr, err))]
    try:
        for reader in readers:
            reader.start()
        process.wait()
        seconds = time.monotonic() - start
    finally:
        timer.cancel()
        _kill_group(process.pid)
        process.wait()
    for reader in readers:  # the pipes close when the last process holding them is gone
        reader.join(settle)
    deadline = time.monotonic() + settle
    while (survivors := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    names = [_describe(p) for p in survivors if _alive(p)]
    for p in survivors:
        _kill(p)
    for reader in readers:
        reader.join()
    return Job(command, process.returncode, "".join(line for _, line in out), "".join(line for _, line in err),
               seconds, names, err)


def _read_lines(stream, lines, start):
    for line in stream:
        lines.append((time.monotonic() - start, line))


def _kill_everything(pid, tag):
    """Past the time limit: the launcher's process group, and the tagged processes outside it."""
    _kill_group(pid)
    for p in tagged_processes(tag):
        _kill(p)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _describe(process):
    import psutil

    try:
        return f"{process.pid} {' '.join(process.cmdline()[:6])}"
    except psutil.Error:
        return str(process.pid)


def _alive(process):
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill(process):
    import psutil

    try:
        process.kill()
    except psutil.Error:
        pass


def recorded_text(job, name):
    """What of `job` is recorded as scripts/outputs/NAME; raise if the run did not end as it must."""
    run = RUNS[name]
    if job.returncode != run.status or job.survivors:
        raise RuntimeError(f"`{run.command}` should exit with status {run.status}:\n{job.describe()}")
    return job.stdout if run.stream == "stdout" else job.stderr


def fresh_output(name):
    """What the run recorded as scripts/OUTPUTS/NAME prints now."""
    return recorded_text(run_job(RUNS[name].args), name)


def drift(name, fresh):
    """None if `fresh` matches scripts/outputs/NAME, else a message that names the file, the command
    and how to re-record, with a diff."""
    path = OUTPUTS / name
    reader_command = RUNS[name].command
    if not path.exists():
        return f"{path.relative_to(ROOT)} is missing; record it with `{RERECORD}` (part of `make outputs`)."
    patterns = varying_patterns().get(f"scripts:{Path(name).stem}", {}).get("lines", [])
    diff = compare_text(path.read_text(), fresh, patterns, name)
    if diff is None:
        return None
    return (f"{path.relative_to(ROOT)} differs from what `{reader_command}` prints now; if the change "
            f"is intended, re-record it with `{RERECORD}` (part of `make outputs`):\n{diff}")


def load_script(name):
    """scripts/NAME as a module; its `if __name__ == "__main__"` part does not run."""
    spec = importlib.util.spec_from_file_location(f"ddp_script_{uuid.uuid4().hex}", SCRIPTS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def single_process_weights(epochs=3, world_size=2):
    """The state_dict of one process, without DDP, trained on the concatenation of the batches that
    ranks 0 .. world_size-1 get at each step: what a DDP run with --save must write.

    DDP averages the ranks' gradients of their mean losses; with equal batch sizes that is the
    gradient of the mean loss over all their batches together.
    """
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    from snippets.appendix_a import NeuralNetwork

    dataset = load_script("DDP-script.py").prepare_dataset(0, world_size)[0].dataset
    samplers = [DistributedSampler(dataset, num_replicas=world_size, rank=r) for r in range(world_size)]
    loaders = [DataLoader(dataset, batch_size=2, sampler=s, drop_last=True) for s in samplers]
    torch.manual_seed(123)  # as every rank does before building the model
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(epochs):
        for sampler in samplers:
            sampler.set_epoch(epoch)
        for batches in zip(*loaders):
            features = torch.cat([features for features, _ in batches])
            labels = torch.cat([labels for _, labels in batches])
            loss = F.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.state_dict()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with fresh runs instead of recording")
    args = parser.parse_args()
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(RUNS)) as pool:
        try:
            fresh = dict(zip(RUNS, pool.map(fresh_output, RUNS)))
        except RuntimeError as error:
            print(error, file=sys.stderr)
            return 1
    if args.check:
        problems = [p for name, text in fresh.items() if (p := drift(name, text))]
        print("\n\n".join(problems) or "every recorded script output matches",
              file=sys.stderr if problems else sys.stdout)
        return 1 if problems else 0
    OUTPUTS.mkdir(exist_ok=True)
    for name, text in fresh.items():
        (OUTPUTS / name).write_text(text)
    print(f"recorded {', '.join(fresh)} into {OUTPUTS.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
