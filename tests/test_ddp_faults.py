"""The DDP scripts fail well: quickly, with one clear message, a non-zero exit, nothing left running.

The launches are started once, concurrently, by the module fixture `jobs`; each test asserts
on one of them: the exit status, the message, how long it took (generous bounds; the measured
times are printed, see `pytest -s`) and that no process of the job survived.

Checks of the command line and of the environment stop a script before it starts any process,
so most of them run the script's `__main__` in this process (`run_in_process`): the same code,
without paying a second each for importing torch. One of them runs as a real command too.
"""

import contextlib
import io
import os
import re
import runpy
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
import torch
import torch.multiprocessing

from snippets.appendix_a import NeuralNetwork
from snippets.ddp_common import JobError, free_port, parse_args, read_snapshot
from tools.record_script_outputs import (ROOT, clean_environment, drift, load_script, recorded_text, run_job,
                                         single_process_weights)

SPAWN = "scripts/DDP-script.py"
TORCHRUN = "scripts/DDP-script-torchrun.py"
TORCHRUN_2 = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
TIMEOUT = 5  # --timeout of the jobs that wait for a rank that never answers


class BusyPort:
    """Another program listening on a port: it accepts connections and counts them."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            connection.close()

    def still_serves(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5):
            return True


class Evil:
    """A pickle that would run code (create a file) when loaded without weights_only=True."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("ddp-faults")


@pytest.fixture(scope="module")
def jobs(tmp):
    """{name: Future of a Job}: every launch of this file, started at once (the shortest first, then
    the longest), three at a time."""
    whole = tmp / "whole.pt"
    torch.save({"model": NeuralNetwork(2, 2).state_dict(), "optimizer": {}, "epochs_done": 1}, whole)
    (tmp / "truncated.pt").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    # The environments are made here, not in the threads: tests below change os.environ meanwhile.
    env = clean_environment()
    lonely = clean_environment(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    launches = {
        "bad world size": lambda: run_job([SPAWN, "--world-size", "0"], env=env),  # short: the first test waits
        "torchrun recovers": lambda: run_job(
            [*TORCHRUN_2, "--max-restarts=3", TORCHRUN, "--fault", "kill", "--timeout", "20",
             "--save", tmp / "recovered.pt", "--snapshot", tmp / "recovery-snapshot.pt"], env=env, timeout=150),
        "spawn stall": lambda: run_job([SPAWN, "--fault", "stall", "--timeout", TIMEOUT], env=env),
        "torchrun stall": lambda: run_job([*TORCHRUN_2, TORCHRUN, "--fault", "stall", "--timeout", TIMEOUT,
                                           "--snapshot", tmp / "stall-snapshot.pt"], env=env),
        "peer never joins": lambda: run_job([TORCHRUN, "--timeout", TIMEOUT], env=lonely),
        "spawn raise": lambda: run_job([SPAWN, "--fault", "raise"], env=env),
        "spawn kill": lambda: run_job([SPAWN, "--fault", "kill"], env=env),
        "truncated snapshot": lambda: run_job([TORCHRUN, "--snapshot", tmp / "truncated.pt"], env=env),
    }
    pool = ThreadPoolExecutor(max_workers=3)
    futures = {name: pool.submit(launch) for name, launch in launches.items()}
    yield futures
    pool.shutdown(wait=True)


def failed(job, bound, status=None):
    """Assert that `job` failed (with `status` if given) within `bound` seconds, leaving nothing behind."""
    print(f"\n{' '.join(job.command[1:])}: {job.seconds:.1f} s (bound {bound} s)")
    assert job.returncode != 0, job.describe()
    if status is not None:
        assert job.returncode == status, job.describe()
    assert job.seconds < bound, f"took {job.seconds:.1f} s, more than {bound} s\n{job.describe()}"
    assert not job.survivors, f"processes left behind: {job.survivors}\n{job.describe()}"
    assert "Epoch: 003/003" not in job.stdout, "a failed job must not finish training"
    return job


def fault_to_exit(job, fault, rank, bound):
    """Assert that the job ended within `bound` seconds after rank `rank` triggered --fault `fault`."""
    seconds = job.seconds_after(f"[rank {rank}] --fault {fault}:")
    assert seconds is not None, f"no note of the fault on stderr\n{job.describe()}"
    print(f"  from the fault to the exit: {seconds:.1f} s (bound {bound} s)")
    assert seconds < bound, f"{seconds:.1f} s from the fault to the exit, more than {bound} s\n{job.describe()}"


# The first test starts every job (the fixture); the tests that need no job run meanwhile.
def test_bad_input_from_the_command_line(jobs):
    job = failed(jobs["bad world size"].result(), bound=30, status=2)
    assert "DDP-script.py: error: argument --world-size: must be a whole number, at least 1 (got '0')" in job.stderr
    assert job.stdout == "" and "Traceback" not in job.stderr


# --- bad command lines and environments ---------------------------------------------------

def run_in_process(script, args=(), env=None):
    """Run a script's `__main__` here, as `python script ARGS` would; return (exit status, stderr, seconds).

    For checks that stop the script before it starts any process: if one does not, mp.spawn
    fails the test instead of starting ranks inside pytest. Like the launched jobs, which get
    CUDA_VISIBLE_DEVICES="", the script sees no GPU.
    """
    saved_env, saved_argv = dict(os.environ), list(sys.argv)
    saved_spawn, saved_cuda = torch.multiprocessing.spawn, torch.cuda.is_available
    stderr = io.StringIO()
    start = time.monotonic()
    try:
        os.environ.clear()
        os.environ.update(clean_environment(**(env or {})))
        sys.argv = [str(ROOT / script), *map(str, args)]

        def no_spawn(*_, **__):
            raise AssertionError(f"{script} {' '.join(map(str, args))} started processes")

        torch.multiprocessing.spawn = no_spawn
        torch.cuda.is_available = lambda: False
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()) as stdout:
            try:
                runpy.run_path(str(ROOT / script), run_name="__main__")
                status = 0
            except SystemExit as exit:
                status = exit.code
    finally:
        torch.multiprocessing.spawn, torch.cuda.is_available = saved_spawn, saved_cuda
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
    assert stdout.getvalue() == "", "nothing may be printed before the checks pass"
    assert not any("spawn_main" in command_line(p) for p in psutil.Process().children()), "a rank started"
    return status, stderr.getvalue(), time.monotonic() - start


def command_line(process):
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # it has just ended
        return ""


BAD_INPUTS = [
    (["--world-size", "0"], "argument --world-size: must be a whole number, at least 1 (got '0')"),
    (["--world-size", "-2"], "argument --world-size: must be a whole number, at least 1 (got '-2')"),
    (["--world-size", "two"], "argument --world-size: must be a whole number, at least 1 (got 'two')"),
    (["--world-size", "20"], "--world-size 20 is more than the toy data supports: with 20 training samples "
                             "and batch size 2, some ranks would get no batch at all; use at most 19 processes"),
    (["--epochs", "0"], "argument --epochs: must be a whole number, at least 1 (got '0')"),
    (["--epochs", "-1"], "argument --epochs: must be a whole number, at least 1 (got '-1')"),
    (["--timeout", "0"], "argument --timeout: must be a number of seconds greater than 0 (got '0')"),
    (["--fault", "kill", "--fault-rank", "2"], "--fault-rank 2 does not exist: the ranks are 0 to 1."),
    (["--backend", "nccl"], "--backend nccl needs CUDA GPUs, and none is available here; use --backend gloo"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_gives_one_clear_sentence(args, message):
    status, stderr, seconds = run_in_process(SPAWN, args)
    assert status == 2, stderr
    assert message in stderr
    assert "Traceback" not in stderr
    assert seconds < 10


def test_more_gpus_than_present_gives_one_clear_sentence(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(SystemExit) as exit:
        parse_args(load_script("DDP-script.py").prepare_dataset, launcher="spawn", argv=["--world-size", "4"])
    assert exit.value.code == 2
    assert "--world-size 4 needs 4 GPUs, one per process, but only 2 are visible" in capsys.readouterr().err


def test_busy_master_port_fails_fast_and_leaves_the_other_program_alone():
    other = BusyPort()
    try:
        status, stderr, seconds = run_in_process(SPAWN, env={"MASTER_PORT": str(other.port)})
        assert status == 2, stderr
        assert f"MASTER_PORT={other.port} is already in use by another program (address in use)" in stderr
        assert seconds < 10
        assert other.connections == 0, "nothing may connect to the other program"
        assert other.still_serves()
    finally:
        other.socket.close()


def test_bad_master_port_gives_one_clear_sentence():
    status, stderr, _ = run_in_process(SPAWN, env={"MASTER_PORT": "http"})
    assert status == 2
    assert "MASTER_PORT='http' is not a port number" in stderr


def test_ranks_started_by_hand_need_a_master_port():
    status, stderr, _ = run_in_process(TORCHRUN, env={"RANK": "1", "WORLD_SIZE": "2"})
    assert status == 2
    assert "MASTER_PORT is not set; ranks started without a launcher must all be given the same" in stderr


# --- snapshots that must not be used ------------------------------------------------------

def test_snapshot_of_another_model_names_the_mismatch(tmp):
    other = NeuralNetwork(num_inputs=3, num_outputs=2)
    torch.save({"model": other.state_dict(), "optimizer": {}, "epochs_done": 1}, tmp / "other-model.pt")
    with pytest.raises(JobError, match=re.escape(
            "was saved from another model: layers.0.weight has shape [30, 3] there but [30, 2] here")):
        read_snapshot(tmp / "other-model.pt", NeuralNetwork(num_inputs=2, num_outputs=2))


def test_snapshot_with_missing_keys_names_them(tmp):
    state = NeuralNetwork(2, 2).state_dict()
    del state["layers.4.bias"]
    torch.save({"model": state, "optimizer": {}, "epochs_done": 1}, tmp / "missing.pt")
    with pytest.raises(JobError, match="it lacks layers.4.bias"):
        read_snapshot(tmp / "missing.pt", NeuralNetwork(2, 2))


def test_plain_state_dict_is_not_taken_for_a_snapshot(tmp):
    torch.save(NeuralNetwork(2, 2).state_dict(), tmp / "weights.pt")
    with pytest.raises(JobError, match="is not a snapshot of this script"):
        read_snapshot(tmp / "weights.pt", NeuralNetwork(2, 2))


def test_pickle_that_would_run_code_is_refused(tmp):
    torch.save({"model": Evil(tmp / "code-ran")}, tmp / "evil.pt")
    with pytest.raises(JobError, match="loading them could run arbitrary code, so it was refused"):
        read_snapshot(tmp / "evil.pt", NeuralNetwork(2, 2))
    assert not (tmp / "code-ran").exists(), "the pickle's code ran"


# --- a rank that raises, is killed, stalls or never joins ----------------------------------

def test_rank_that_raises_ends_the_job(jobs):
    job = failed(jobs["spawn raise"].result(), bound=60, status=1)
    fault_to_exit(job, "raise", 1, bound=15)
    assert "error: rank 1 failed: InjectedFault: --fault raise: rank 1 raised this error on purpose" in job.stderr
    assert "Traceback" not in job.stderr  # an expected error: the sentence is enough


def test_rank_that_is_killed_ends_the_job(jobs):
    job = failed(jobs["spawn kill"].result(), bound=60, status=1)
    fault_to_exit(job, "kill", 1, bound=15)
    assert "error: rank 1 failed: the process was killed by SIGKILL." in job.stderr


def test_rank_that_stalls_ends_the_job_after_the_timeout(jobs):
    job = failed(jobs["spawn stall"].result(), bound=TIMEOUT + 60, status=1)
    fault_to_exit(job, "stall", 1, bound=TIMEOUT + 15)
    assert f"error: rank 0 gave up after {TIMEOUT} s (--timeout) waiting for another rank" in job.stderr
    assert "Rank 1 was still running and was ended" in job.stderr
    problem = drift("DDP-script-fault-stall.txt", recorded_text(job, "DDP-script-fault-stall.txt"))
    assert problem is None, problem


def test_torchrun_rank_that_stalls_ends_the_job_after_the_timeout(jobs):
    job = failed(jobs["torchrun stall"].result(), bound=TIMEOUT + 60)
    fault_to_exit(job, "stall", 1, bound=TIMEOUT + 15)
    assert f"[rank 0] error: rank 0 gave up after {TIMEOUT} s (--timeout) waiting for another rank" in job.stderr
    # torchrun's own summary names the rank that failed
    assert re.search(r"rank\s*: 0 \(local_rank: 0\)\n\s*exitcode\s*: 1", job.stderr), job.describe()


def test_peer_that_never_joins_ends_init_within_the_timeout(jobs):
    job = failed(jobs["peer never joins"].result(), bound=TIMEOUT + 30, status=1)
    assert (f"[rank 0] error: rank 0 waited {TIMEOUT} s (--timeout) for the other ranks to join at 127.0.0.1:"
            in job.stderr), job.describe()
    assert "(only 1 of 2 joined)" in job.stderr


def test_torchrun_restarts_a_killed_worker_and_ends_with_the_same_weights(jobs, tmp):
    job = jobs["torchrun recovers"].result()
    print(f"\ntorchrun --max-restarts=3 ... --fault kill: {job.seconds:.1f} s (bound 150 s)")
    assert job.returncode == 0, job.describe()
    assert not job.survivors, job.survivors
    assert "[rank 1] --fault kill:" in job.stderr, "the fault never happened"
    assert "resuming from" in job.stderr and "after epoch 1" in job.stderr, job.describe()
    assert job.stdout.rstrip().endswith("Training accuracy 1.0000 (20/20) | Test accuracy 1.0000 (8/8)")
    recovered = torch.load(tmp / "recovered.pt", weights_only=True)
    expected = single_process_weights(epochs=3, world_size=2)  # what an uninterrupted run writes
    assert recovered.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(recovered[key], expected[key], atol=1e-6, rtol=1e-6)


def test_truncated_snapshot_is_refused_and_training_does_not_start(jobs, tmp):
    job = failed(jobs["truncated snapshot"].result(), bound=30, status=1)
    assert f"[rank 0] error: snapshot {tmp / 'truncated.pt'} is truncated or not a file written by torch.save" \
        in job.stderr, job.describe()
    assert "delete it to start fresh" in job.stderr
    assert "Epoch:" not in job.stdout, "training must not start from a bad snapshot"
    assert "Traceback" not in job.stderr
