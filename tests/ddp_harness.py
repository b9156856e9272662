"""What the DDP tests share: launches that leave nothing behind, checked against their recordings and against
what DDP training must equal."""

import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch
import torch.nn.functional as F
from conftest import survivors
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from tools import ROOT
from tools.ddp_runs import SCRIPT_RUNS, ddp_environment, load_script, run_key, training_data
from tools.page_runner import compare_text, end_group, process_group
from tools.store import SCRIPT_OUTPUTS, varying_patterns

SCRIPTS = ROOT / "scripts"
SPAWN = "scripts/DDP-script.py"
TORCHRUN = "scripts/DDP-script-torchrun.py"
TORCHRUN_2 = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
WHOLE_LINES = Path(__file__).parent / "whole_lines"  # its sitecustomize makes every rank print whole lines
ALONE = Path(__file__).parent / "alone"  # its sitecustomize blocks this project's packages, checks the exit


@dataclass
class Job:
    command: list
    cwd: Path
    tmpdir: Path  # the job's TMPDIR, removed once the job is over
    returncode: int
    stdout: str
    stderr: str
    stderr_lines: list  # (seconds since the start, line)
    seconds: float  # from the start to the exit of the launching process
    survivors: list  # "pid command" of the job's processes alive 10 s after the launcher exited
    leftovers: list  # names of the files the job left in its TMPDIR
    signalled_at: float | None  # seconds from the start to the signal sent (`signal_when`)

    def describe(self):
        return (f"$ {' '.join(map(str, self.command))}\nexit status {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}")


def run_alone(tmp, script, *args, launcher=(), code=None, **env):
    """Run scripts/SCRIPT (or `code` under its name) alone in an empty folder, under ALONE; `launcher`: before it."""
    folder = Path(tempfile.mkdtemp(prefix="alone-", dir=tmp))
    (folder / script).write_text(code or (SCRIPTS / script).read_text())
    return run_job([*launcher, script, *args], env=ddp_environment(PYTHONPATH=str(ALONE), **env), cwd=folder)


def run_job(args, env=None, timeout=120, cwd=ROOT, signal_when=None):
    """Run `python ARGS...` in a process group and a TMPDIR of its own, ended after `timeout` s; return a Job.
    Once the launcher has exited, the processes with the group's tag (torchrun's workers, in sessions of their own,
    carry it too) get 10 s to go (multiprocessing's resource tracker took over 2 s on a busy machine).
    signal_when=(when, send): send(the launcher's pid) once when(the launcher, a psutil.Process, and stdout) is true."""
    command = [sys.executable, *map(str, args)]
    out, err, signalled_at = [], [], None
    with tempfile.TemporaryDirectory(prefix="ddp-job-") as tmpdir:
        env = {**(ddp_environment() if env is None else env), "TMPDIR": tmpdir}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(WHOLE_LINES), env.get("PYTHONPATH")]))
        start = time.monotonic()

        def read(stream, lines):  # until the pipe closes, when the last process holding it is gone
            for line in stream:
                lines.append((time.monotonic() - start, line))

        # The readers are waited for once the job's processes are ended, as process_group exits.
        with ThreadPoolExecutor(max_workers=2) as readers, process_group(
                command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, text=True, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE) as process:
            readers.submit(read, process.stdout, out)
            readers.submit(read, process.stderr, err)
            launcher = psutil.Process(process.pid)
            while process.poll() is None:
                if time.monotonic() - start > timeout:
                    end_group(process)
                with contextlib.suppress(psutil.Error):  # a process that ends while it is looked at
                    stdout = "".join(line for _, line in out)
                    if signal_when and signalled_at is None and signal_when[0](launcher, stdout):
                        signalled_at = time.monotonic() - start
                        signal_when[1](process.pid)
                time.sleep(0.05)
            seconds = time.monotonic() - start
            left = survivors(process.tag, 10)  # ended as process_group exits
        # torch keeps a compiler cache there (torchinductor_USER): not the job's doing
        leftovers = sorted(p.name for p in Path(tmpdir).iterdir() if not p.name.startswith("torchinductor_"))
    return Job(command, Path(cwd), Path(tmpdir), process.returncode, stdout="".join(line for _, line in out),
               stderr="".join(line for _, line in err), stderr_lines=err, seconds=seconds, survivors=left,
               leftovers=leftovers, signalled_at=signalled_at)


def assert_recorded(job, name):
    """Assert that `job` printed what scripts/outputs/NAME holds (how it must end: the caller's check)."""
    run, path = SCRIPT_RUNS[name], SCRIPT_OUTPUTS / name
    assert path.exists(), f"{path.relative_to(ROOT)} is missing; record it with `make outputs`."
    diff = compare_text(path.read_text(), run.recorded(job.stdout, job.stderr), run_key(name), varying_patterns(), name)
    assert diff is None, (f"{path.relative_to(ROOT)} differs from what `{run.command}` prints now; if the "
                          f"change is intended, re-record it with `make outputs`:\n{diff}")


@functools.cache
def single_process_weights():
    """The state_dict of one process, without DDP, trained for 3 epochs on the concatenation of the batches that
    ranks 0 and 1 get at each step: what a DDP run of 2 processes must write. DDP averages the ranks' gradients of
    their mean losses; with equal batch sizes that is the gradient of the mean loss over all their batches."""
    dataset, network = training_data(), load_script(SCRIPTS / "DDP-script.py").NeuralNetwork
    samplers = [DistributedSampler(dataset, num_replicas=2, rank=rank) for rank in range(2)]
    loaders = [DataLoader(dataset, batch_size=2, sampler=s, drop_last=True) for s in samplers]
    torch.manual_seed(123)  # as every rank does before building the model
    model = network(num_inputs=2, num_outputs=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(3):
        for sampler in samplers:
            sampler.set_epoch(epoch)
        for batches in zip(*loaders):
            features, labels = (torch.cat(tensors) for tensors in zip(*batches))  # rank 0's, then rank 1's
            loss = F.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.state_dict()


def assert_same_weights(saved):
    torch.testing.assert_close(torch.load(saved, weights_only=True), single_process_weights(), atol=1e-6, rtol=1e-6)

