"""The DDP scripts fail well: quickly, with one clear message, a non-zero exit, nothing left running
and no stray file.

Faults are injected from outside the scripts, by scripts/fault-injection (`with_fault`).
The launches are started at once by the module fixture `jobs`; each test asserts on one of them
(generous time bounds; `pytest -s` prints the measured times), in any order.
Checks of the command line and of paths stop a script before it starts any process, so most run
the script's `__main__` in this process (`run_in_process`), without importing torch again for
each; one runs as a real command too.
"""

import contextlib
import math
import os
import re
import runpy
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest.mock import patch

import psutil
import pytest
import torch
import torch.multiprocessing
from ddp_harness import (
    ROOT,
    SPAWN,
    TORCHRUN,
    TORCHRUN_2,
    assert_recorded,
    assert_same_weights,
    free_port,
    load_script,
    run_job,
    single_process_weights,
    with_fault,
)

from tools.ddp_runs import ddp_environment as environment
from tools.ddp_runs import trained_fully

TIMEOUT = 5  # --timeout of the jobs that wait for a rank that never answers
LONG = ["--epochs", "300"]  # a run that is still training when it is signalled
torchrun_script = load_script("DDP-script-torchrun.py")


class Evil:
    """A pickle that would run code (create the file `code-ran` where it is loaded) without weights_only=True."""

    def __reduce__(self):
        return (open, ("code-ran", "w"))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("ddp-faults")


@pytest.fixture(scope="module")
def jobs(tmp):
    """{name: Future of a Job}: every launch of this file, started at once, three at a time."""
    whole = tmp / "whole.pt"
    torch.save({"model": torchrun_script.NeuralNetwork(2, 2).state_dict(), "optimizer": {}, "epochs_done": 1},
               whole)
    (tmp / "truncated.pt").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    # The environments are made here, not in the threads: `run_in_process` changes os.environ meanwhile.
    env, kill, stall = environment(), with_fault("kill"), with_fault("stall")
    lonely = environment(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    launches = {
        "bad world size": lambda: run_job([SPAWN, "--world-size", "0"], env=env),
        "torchrun recovers": lambda: run_job(
            [*TORCHRUN_2, "--max-restarts=3", TORCHRUN, "--timeout", "20", "--save", tmp / "recovered.pt",
             "--snapshot", tmp / "recovery-snapshot.pt"], env=kill, timeout=150),
        "torchrun stall": lambda: run_job([*TORCHRUN_2, TORCHRUN, "--timeout", TIMEOUT,
                                           "--snapshot", tmp / "stall-snapshot.pt"], env=stall),
        "torchrun agent killed": lambda: run_job([*TORCHRUN_2, TORCHRUN, *LONG], env=env, settle=20,
                                                 signal_after=("Epoch: 001/", signal.SIGKILL)),
        "spawn SIGINT": lambda: run_job([SPAWN, *LONG], env=env, signal_after=("Epoch: 001/", signal.SIGINT)),
        "spawn SIGTERM": lambda: run_job([SPAWN, *LONG], env=env, signal_after=("Epoch: 001/", signal.SIGTERM)),
        "peer never joins": lambda: run_job([TORCHRUN, "--timeout", TIMEOUT], env=lonely),
        "spawn raise": lambda: run_job([SPAWN], env=with_fault("raise")),
        "spawn kill": lambda: run_job([SPAWN], env=kill),
        "truncated snapshot": lambda: run_job([TORCHRUN, "--snapshot", tmp / "truncated.pt"], env=env),
    }
    with ThreadPoolExecutor(max_workers=3) as pool:
        yield {name: pool.submit(launch) for name, launch in launches.items()}


def failed(job, bound, status=None):
    """Assert that `job` failed (with `status` if given) within `bound` seconds, leaving nothing behind."""
    print(f"\n{' '.join(map(str, job.command[1:]))}: {job.seconds:.1f} s (bound {bound} s)")
    assert job.returncode != 0, job.describe()
    if status is not None:
        assert job.returncode == status, job.describe()
    assert job.seconds < bound, f"took {job.seconds:.1f} s, more than {bound} s\n{job.describe()}"
    assert not job.survivors, f"processes left behind: {job.survivors}\n{job.describe()}"
    assert "Epoch: 003/003" not in job.stdout, "a failed job must not finish training"
    return job


def fault_to_exit(job, fault, rank, bound):
    """Assert that the job ended within `bound` seconds after rank `rank` met the injected `fault`."""
    seconds = job.seconds_after(f"[rank {rank}] fault {fault}:")
    assert seconds is not None, f"no note of the fault on stderr\n{job.describe()}"
    print(f"  from the fault to the exit: {seconds:.1f} s (bound {bound} s)")
    assert seconds < bound, f"{seconds:.1f} s from the fault to the exit, more than {bound} s\n{job.describe()}"


def test_bad_input_from_the_command_line(jobs):
    job = failed(jobs["bad world size"].result(), bound=30, status=2)
    assert "DDP-script.py: error: --world-size 0: the toy data is made for 1 to 8 processes." in job.stderr
    assert job.stdout == "" and "Traceback" not in job.stderr


# --- bad command lines, environments and paths -------------------------------------------

@pytest.fixture
def run_in_process(monkeypatch, capsys):
    """run(script, args, env): run a script's `__main__` here, as `python script ARGS` would, in
    environment(**env); return (exit status, stderr, seconds). All it changes is undone.

    For checks that stop the script before it starts any process: if one does not, mp.spawn
    fails the test instead of starting ranks inside pytest, and the script's signal handlers
    are not installed. Like the launched jobs, which get CUDA_VISIBLE_DEVICES="", the script
    sees no GPU.
    """
    def run(script, args=(), env=None):
        monkeypatch.setattr(sys, "argv", [str(ROOT / script), *map(str, args)])

        def no_spawn(*_, **__):
            raise AssertionError(f"{script} {' '.join(map(str, args))} started processes")

        def leave(status):  # a rank ends with os._exit (no interpreter shutdown); here, end the run only
            raise SystemExit(status)

        monkeypatch.setattr(torch.multiprocessing, "spawn", no_spawn)
        monkeypatch.setattr(os, "_exit", leave)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(signal, "signal", lambda number, handler: signal.getsignal(number))
        start = time.monotonic()
        # patch.dict also removes what the script sets for its ranks (MASTER_ADDR, MASTER_PORT, ...)
        with patch.dict(os.environ, environment(**(env or {})), clear=True), pytest.raises(SystemExit) as exit:
            runpy.run_path(str(ROOT / script), run_name="__main__")
        seconds = time.monotonic() - start
        printed = capsys.readouterr()
        assert printed.out == "", "nothing may be printed before the checks pass"
        assert not any("spawn_main" in command_line(p) for p in psutil.Process().children()), "a rank started"
        return exit.value.code, printed.err, seconds

    return run


def command_line(process):
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # it has just ended
        return ""


BAD_INPUTS = [
    (SPAWN, ["--world-size", "0"], "--world-size 0: the toy data is made for 1 to 8 processes."),
    (SPAWN, ["--world-size", "9"], "--world-size 9: the toy data is made for 1 to 8 processes."),
    (SPAWN, ["--world-size", "two"], "argument --world-size: invalid int value: 'two'"),
    (TORCHRUN, ["--epochs", "0"], "--epochs must be at least 1, and --timeout a number of seconds above 0."),
    (TORCHRUN, ["--timeout", "0"], "--epochs must be at least 1, and --timeout a number of seconds above 0."),
    (TORCHRUN, ["--timeout", "nan"], "--epochs must be at least 1, and --timeout a number of seconds above 0."),
]


@pytest.mark.parametrize("script, args, message", BAD_INPUTS, ids=[" ".join(a) for _, a, _ in BAD_INPUTS])
def test_bad_input_gives_one_clear_sentence(run_in_process, script, args, message):
    status, stderr, seconds = run_in_process(script, args)
    assert status == 2, stderr
    assert message in stderr
    assert "Traceback" not in stderr
    assert seconds < 10


def unwritable_folder(tmp):
    """A folder this process cannot create files in (root may write anywhere but /sys)."""
    folder = tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        (folder / "probe").touch()
    except OSError:
        return folder
    return Path("/sys")


@pytest.mark.parametrize("script, option", [(SPAWN, "--save"), (TORCHRUN, "--save"), (TORCHRUN, "--snapshot")])
@pytest.mark.parametrize("case", ["parent is a file", "folder missing", "path is a folder", "dot",
                                  "folder not writable"])
def test_bad_path_stops_before_any_work(run_in_process, tmp_path, script, option, case):
    a_file, a_folder = tmp_path / "a-file", tmp_path / "a-folder"
    a_file.write_text("not a folder")
    a_folder.mkdir()
    path = {"parent is a file": a_file / "w.pt", "folder missing": tmp_path / "missing" / "w.pt",
            "path is a folder": a_folder, "dot": Path("."),
            "folder not writable": unwritable_folder(tmp_path) / "w.pt"}[case]
    status, stderr, seconds = run_in_process(script, [option, path])
    assert status == 2, stderr
    assert stderr.endswith(f"error: {option} {path} cannot be written: give a file name in a folder that exists "
                           "and that you can write to.\n"), stderr
    assert stderr.count("error:") == 1 and "Traceback" not in stderr, stderr
    assert not (tmp_path / "missing").exists(), "nothing is made before the checks pass"


def test_more_gpus_than_present_gives_one_clear_sentence(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(sys, "argv", ["DDP-script.py", "--world-size", "4"])
    with pytest.raises(SystemExit) as exit:
        load_script("DDP-script.py").parse_args()
    assert exit.value.code == 2
    stderr = capsys.readouterr().err
    assert "--world-size 4 needs 4 GPUs, one per process, but 2 are visible; use --world-size 2" in stderr


def test_busy_or_bad_master_port_fails_fast_and_leaves_the_other_program_alone(run_in_process):
    """The busy port is another program's: it listens, and counts the connections it accepts."""
    other_program, connections = socket.create_server(("127.0.0.1", 0)), []

    def serve():
        with contextlib.suppress(OSError):  # closed
            while True:
                connections.append(other_program.accept()[0].close())

    threading.Thread(target=serve, daemon=True).start()
    with other_program:
        busy = other_program.getsockname()[1]
        for port in (busy, "http"):
            status, stderr, seconds = run_in_process(SPAWN, env={"MASTER_PORT": str(port)})
            assert status == 2, stderr
            assert f"MASTER_PORT={port} is in use or not a port number; choose a free port (1 to 65535)" in stderr
            assert seconds < 10
        assert connections == [], "nothing may connect to the other program"
        socket.create_connection(("127.0.0.1", busy), timeout=5).close()  # it still serves


def test_ranks_started_by_hand_need_a_master_address(run_in_process):
    status, stderr, _ = run_in_process(TORCHRUN, env={"RANK": "1", "WORLD_SIZE": "2"})
    assert status == 1
    assert stderr == ("[rank 1] error: Error initializing torch.distributed using env:// rendezvous: "
                      "environment variable MASTER_ADDR expected, but not set\n")


# --- snapshots that must not be used ------------------------------------------------------

def snapshot_problem(path, epochs=3):
    model = torchrun_script.NeuralNetwork(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    return torchrun_script.read_snapshot(path, model, optimizer, epochs)


def good_snapshot():
    model = torchrun_script.NeuralNetwork(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epochs_done": 1}


def with_nan(snapshot):
    snapshot["model"]["layers.2.bias"][0] = math.nan
    return snapshot


BAD_SNAPSHOTS = {
    "another model": (lambda s: {**s, "model": torchrun_script.NeuralNetwork(3, 2).state_dict()},
                      "size mismatch for layers.0.weight: copying a param with shape torch.Size([30, 3])"),
    "a missing key": (lambda s: {**s, "model": {k: v for k, v in s["model"].items() if k != "layers.4.bias"}},
                      'Missing key(s) in state_dict: "layers.4.bias"'),
    "a plain state_dict": (lambda s: s["model"], "it needs exactly the keys epochs_done, model and optimizer"),
    "epochs_done a string": (lambda s: {**s, "epochs_done": "3"},
                             "epochs_done is '3', not a whole number from 0 to --epochs 3"),
    "epochs_done too large": (lambda s: {**s, "epochs_done": 99}, "epochs_done is 99, not a whole number"),
    "epochs_done negative": (lambda s: {**s, "epochs_done": -5}, "epochs_done is -5, not a whole number"),
    "no param_groups": (lambda s: {**s, "optimizer": {"state": {}}}, "KeyError: 'param_groups'"),
    "a NaN weight": (with_nan, "its weights are not all finite numbers"),
    "a pickle that would run code": (lambda s: {"model": Evil()}, "UnpicklingError: Weights only load failed"),
}


@pytest.mark.parametrize("case", BAD_SNAPSHOTS)
def test_bad_snapshot_is_refused_in_one_sentence(tmp_path, monkeypatch, case):
    change, reason = BAD_SNAPSHOTS[case]
    path = tmp_path / "snapshot.pt"
    torch.save(change(good_snapshot()), path)
    monkeypatch.chdir(tmp_path)  # where Evil's code would create its file
    problem = snapshot_problem(path)
    assert isinstance(problem, str) and reason in problem, problem
    assert problem.startswith(f"snapshot {path} cannot be resumed from (")
    assert problem.endswith("; delete it or pass another --snapshot.") and "\n" not in problem
    assert not (tmp_path / "code-ran").exists(), "the pickle's code ran"


def test_good_snapshot_is_resumed(tmp_path):
    torch.save(good_snapshot(), tmp_path / "good.pt")
    assert snapshot_problem(tmp_path / "good.pt")["epochs_done"] == 1


def test_truncated_snapshot_is_refused_and_training_does_not_start(jobs, tmp):
    job = failed(jobs["truncated snapshot"].result(), bound=30, status=1)
    assert re.search(rf"^\[rank 0\] error: snapshot {re.escape(str(tmp / 'truncated.pt'))} cannot be resumed "
                     r"from \(.+\); delete it or pass another --snapshot\.$", job.stderr, re.M), job.describe()
    assert "Epoch:" not in job.stdout, "training must not start from a bad snapshot"
    assert "Traceback" not in job.stderr


# --- a rank that raises, is killed, stalls or never joins; signals -------------------------

@pytest.mark.parametrize("fault, message", [
    ("raise", "RuntimeError: rank 1 raised this error on purpose"),
    ("kill", "process 1 terminated with signal SIGKILL"),
])
def test_rank_that_raises_or_is_killed_ends_the_job(jobs, fault, message):
    job = failed(jobs[f"spawn {fault}"].result(), bound=60, status=1)
    fault_to_exit(job, fault, 1, bound=15)
    assert f"error: rank 1 failed: {message}" in job.stderr
    assert "Traceback" not in job.stderr  # an expected error: the sentence is enough
    assert job.leftovers == [], "torch's error files are removed"
    if fault == "kill":  # the failing run the page shows
        assert_recorded(job, "DDP-script-fault-kill.txt")


def test_torchrun_rank_that_stalls_ends_the_job_after_the_timeout(jobs):
    job = failed(jobs["torchrun stall"].result(), bound=TIMEOUT + 60)
    fault_to_exit(job, "stall", 1, bound=TIMEOUT + 15)
    assert re.search(rf"^\[rank 0\] error: .*Timed out waiting {TIMEOUT * 1000}ms", job.stderr, re.M), job.describe()
    # torchrun's own summary names the rank that failed
    assert re.search(r"rank\s*: 0 \(local_rank: 0\)\n\s*exitcode\s*: 1", job.stderr), job.describe()


def test_peer_that_never_joins_ends_init_within_the_timeout(jobs):
    job = failed(jobs["peer never joins"].result(), bound=TIMEOUT + 30, status=1)
    assert re.search(r"^\[rank 0\] error: .*1/2 clients joined", job.stderr, re.M), job.describe()
    assert "Traceback" not in job.stderr


@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_signal_to_the_spawn_launcher_stops_every_rank(jobs, signal_name, status):
    job = failed(jobs[f"spawn {signal_name}"].result(), bound=120, status=status)
    assert job.signalled_at is not None, f"the job never trained\n{job.describe()}"
    stop = job.seconds - job.signalled_at
    print(f"  from {signal_name} to the exit: {stop:.1f} s (bound 10 s)")
    assert stop < 10
    assert job.stderr.strip() == f"stopped by {signal_name}: every rank has ended.", job.describe()
    assert job.leftovers == []


def test_torchrun_workers_stop_when_their_agent_is_killed(jobs):
    job = jobs["torchrun agent killed"].result()
    assert job.signalled_at is not None and job.returncode == -signal.SIGKILL, job.describe()
    print(f"\n  workers gone {job.gone_after:.1f} s after their agent was killed (bound 10 s)")
    assert not job.survivors, f"workers outlived their agent: {job.survivors}"
    assert job.gone_after < 10
    # The default snapshot stays on purpose, and the message said where and until when.
    named = re.search(r"^snapshot file: (\S+) \(removed when training completes; after a failure it stays, "
                      r"to resume with --snapshot\)$", job.stderr, re.M)
    assert named, job.describe()
    assert [n for n in job.leftovers if "ddp-snapshot" in n] == [Path(named[1]).name]


def test_torchrun_restarts_a_killed_worker_and_ends_with_the_same_weights(jobs, tmp):
    job = jobs["torchrun recovers"].result()
    print(f"\ntorchrun --max-restarts=3 ... (FAULT=kill): {job.seconds:.1f} s (bound 150 s)")
    assert job.returncode == 0, job.describe()
    assert not job.survivors, job.survivors
    assert "[rank 1] fault kill:" in job.stderr, "the fault never happened"
    assert f"resuming from {tmp / 'recovery-snapshot.pt'} after epoch 1" in job.stderr, job.describe()
    assert trained_fully(job.stdout, 2), job.describe()
    recovered = torch.load(tmp / "recovered.pt", weights_only=True)
    assert_same_weights(recovered, single_process_weights(epochs=3, world_size=2))  # as an uninterrupted run
