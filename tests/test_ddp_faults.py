"""The DDP scripts fail well: quickly, in one clear sentence, with a non-zero exit, nothing left running
and no stray file. Faults are injected from outside the scripts, by scripts/fault-injection (`with_fault`)."""

import os
import re
import runpy
import signal
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest.mock import Mock, patch

import pytest
import torch
from ddp_harness import ROOT, SPAWN, TORCHRUN, TORCHRUN_2, assert_recorded, assert_same_weights, run_job
from torch.distributed.elastic.utils.distributed import get_free_port

from tools.ddp_runs import FAULT_INJECTION, ddp_environment, load_script, trained_fully

TIMEOUT = 5  # --timeout of the jobs that wait for a rank that never answers
LONG = ["--epochs", "300"]  # a run that is still training when it is signalled
torchrun_script = load_script(ROOT / TORCHRUN)
REFUSED = r"snapshot {} cannot be resumed from \(.+\); delete it or pass another --snapshot\."  # `.`: one line


class Evil:  # a pickle that would run code (create the file `code-ran`) if loaded without weights_only=True
    def __reduce__(self):
        return (open, ("code-ran", "w"))


def model_and_optimizer():
    model = torchrun_script.NeuralNetwork(2, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.5)


def good_snapshot():
    model, optimizer = model_and_optimizer()
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epochs_done": 1}


def with_fault(fault, folder=FAULT_INJECTION):  # its sitecustomize: the last rank raises, is killed or stalls
    return ddp_environment(PYTHONPATH=str(folder), FAULT=fault)


def printed(text, signum):  # signum to the launcher once stdout shows `text` (run_job's signal_when)
    return (lambda launcher, stdout: text in stdout), (lambda pid: os.kill(pid, signum))


def ctrl_c_loading_torch(ranks=None):
    """Ctrl-C (SIGINT to the launcher's group, as a terminal sends it) once the launcher, or both ranks (its children
    with `ranks` in their command line), have torch's library: importing torch (a second more at least), or done."""
    def when(launcher, stdout):
        starting = [p for p in launcher.children() if ranks in " ".join(p.cmdline())] if ranks else [launcher]
        loading = [p for p in starting if any("libtorch" in m.path for m in p.memory_maps())]
        return len(loading) == (2 if ranks else 1)
    return when, lambda pid: os.killpg(pid, signal.SIGINT)


@pytest.fixture(scope="module")
def jobs(tmp):
    """{name: Future of a Job}: every launch of this file, started at once, three at a time."""
    torch.save(good_snapshot(), whole := tmp / "whole.pt")
    (tmp / "truncated.pt").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    # The environments are made here, not in the threads: `run_in_process` changes os.environ meanwhile.
    env, kill, stall = ddp_environment(), with_fault("kill"), with_fault("stall")
    lonely = ddp_environment(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(get_free_port()))
    launches = {
        "torchrun recovers": lambda: run_job(
            [*TORCHRUN_2, "--max-restarts=3", TORCHRUN, "--timeout", "20", "--save", tmp / "recovered.pt",
             "--snapshot", tmp / "recovery-snapshot.pt"], env=kill, timeout=150),
        "torchrun stall": lambda: run_job([*TORCHRUN_2, TORCHRUN, "--timeout", TIMEOUT,
                                           "--snapshot", tmp / "stall-snapshot.pt"], env=stall),
        # Epoch 2 has begun only after the barrier that follows epoch 1's snapshot: there is one to leave behind.
        "torchrun agent killed": lambda: run_job([*TORCHRUN_2, TORCHRUN, *LONG], env=env,
                                                 signal_when=printed("Epoch: 002/", signal.SIGKILL)),
        "spawn SIGINT": lambda: run_job([SPAWN, *LONG], env=env, signal_when=printed("Epoch: 001/", signal.SIGINT)),
        "spawn SIGTERM": lambda: run_job([SPAWN, *LONG], env=env, signal_when=printed("Epoch: 001/", signal.SIGTERM)),
        "peer never joins": lambda: run_job([TORCHRUN, "--timeout", TIMEOUT], env=lonely),
        "spawn raise": lambda: run_job([SPAWN], env=with_fault("raise")),
        "spawn raise, partner first": lambda: run_job([SPAWN], env=with_fault("raise", ROOT / "tests/partner_first")),
        "spawn kill": lambda: run_job([SPAWN], env=kill),
        "truncated snapshot": lambda: run_job([TORCHRUN, "--snapshot", tmp / "truncated.pt"], env=env),
        "Ctrl-C, spawn launcher starting": lambda: run_job([SPAWN], env=env, signal_when=ctrl_c_loading_torch()),
        "Ctrl-C, spawn ranks starting": lambda: run_job([SPAWN], env=env,
                                                        signal_when=ctrl_c_loading_torch(ranks="spawn_main")),
        "Ctrl-C, torchrun ranks starting": lambda: run_job([*TORCHRUN_2, TORCHRUN], env=env,
                                                           signal_when=ctrl_c_loading_torch(ranks=TORCHRUN)),
    }
    with ThreadPoolExecutor(max_workers=3) as pool:
        yield {name: pool.submit(launch) for name, launch in launches.items()}


def failed(job, bound, status=None, fault=None):
    """fault=(name, seconds): the job must end within `seconds` of rank 1 meeting that fault."""
    assert job.returncode != 0 and status in (None, job.returncode), job.describe()
    assert job.seconds < bound, f"took {job.seconds:.1f} s, more than {bound} s\n{job.describe()}"
    assert not job.survivors, f"processes left behind: {job.survivors}\n{job.describe()}"
    assert "Epoch: 003/003" not in job.stdout, "a failed job must not finish training"
    if fault:
        name, limit = fault
        after = [job.seconds - at for at, line in job.stderr_lines if f"[rank 1] fault {name}:" in line]
        assert after, f"no note of the fault on stderr\n{job.describe()}"
        assert after[0] < limit, f"{after[0]:.1f} s from the fault to the exit, more than {limit} s\n{job.describe()}"
    return job


@pytest.fixture
def run_in_process(monkeypatch, capsys):
    """run(script, args, env, status, gpus): a script's `__main__` run here, exiting before it starts a process."""
    def run(script, args=(), env=None, status=2, gpus=0):
        monkeypatch.setattr(sys, "argv", [str(ROOT / script), *map(str, args)])
        monkeypatch.setattr(torch.multiprocessing, "spawn", Mock(side_effect=AssertionError(f"{script} started ranks")))
        monkeypatch.setattr(os, "_exit", sys.exit)  # a rank ends with os._exit; here, end the run only
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
        monkeypatch.setattr(signal, "signal", lambda number, handler: signal.getsignal(number))
        start = time.monotonic()
        # patch.dict also removes what the script sets for its ranks (MASTER_ADDR, MASTER_PORT, ...)
        with patch.dict(os.environ, ddp_environment(**(env or {})), clear=True), pytest.raises(SystemExit) as exit:
            runpy.run_path(str(ROOT / script), run_name="__main__")
        seconds, captured = time.monotonic() - start, capsys.readouterr()
        assert captured.out == "", "nothing may be printed before the checks pass"
        assert exit.value.code == status and "Traceback" not in captured.err, captured.err
        assert seconds < 10, f"took {seconds:.1f} s"
        return captured.err

    return run


BAD_INPUTS = [  # (script, arguments, GPUs visible, what stderr says)
    *[(SPAWN, f"--world-size {n}", 0, f"DDP-script.py: error: --world-size {n}: the toy data is made for 1 to 8 "
                                      "processes.") for n in (0, 9)],
    (SPAWN, "--world-size two", 0, "argument --world-size: invalid int value: 'two'"),
    (SPAWN, "--world-size 4", 2, "--world-size 4 needs 4 GPUs, one per process, but 2 are visible; use --world-size 2"),
    *[(TORCHRUN, args, 0, "--epochs must be at least 1, and --timeout a number of seconds above 0.")
      for args in ("--epochs 0", "--timeout 0", "--timeout nan")],
]


@pytest.mark.parametrize("script, args, gpus, message", BAD_INPUTS, ids=[args for _, args, _, _ in BAD_INPUTS])
def test_bad_input_gives_one_clear_sentence(run_in_process, script, args, gpus, message):
    assert message in run_in_process(script, args.split(), gpus=gpus)


# /sys: no one, root included, can create a file there
@pytest.mark.parametrize("script, option", [(SPAWN, "--save"), (TORCHRUN, "--save"), (TORCHRUN, "--snapshot")])
@pytest.mark.parametrize("path", ["a-file/w.pt", "missing/w.pt", "a-folder", ".", "/sys/w.pt"])
def test_bad_path_stops_before_any_work(run_in_process, tmp_path, monkeypatch, script, option, path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "a-folder").mkdir()
    stderr = run_in_process(script, [option, path])
    assert stderr.endswith(f"error: {option} {path} cannot be written: give a file name in a folder that exists "
                           "and that you can write to.\n") and stderr.count("error:") == 1, stderr
    assert not (tmp_path / "missing").exists(), "nothing is made before the checks pass"


def test_busy_or_bad_master_port_fails_fast_and_leaves_the_other_program_alone(run_in_process):
    with socket.create_server(("127.0.0.1", 0)) as other_program:
        busy = other_program.getsockname()[1]
        for port in (busy, "http"):
            stderr = run_in_process(SPAWN, env={"MASTER_PORT": str(port)})
            assert f"MASTER_PORT={port} is in use or not a port number; choose a free port (1 to 65535)" in stderr
        other_program.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing connected to the other program
            other_program.accept()
        socket.create_connection(("127.0.0.1", busy), timeout=5).close()  # it still serves


def test_ranks_started_by_hand_need_a_master_address(run_in_process):
    assert run_in_process(TORCHRUN, env={"RANK": "1", "WORLD_SIZE": "2"}, status=1) == (
        "[rank 1] error: Error initializing torch.distributed using env:// rendezvous: "
        "environment variable MASTER_ADDR expected, but not set\n")


BAD_SNAPSHOTS = {
    "another model": (lambda s: {**s, "model": torchrun_script.NeuralNetwork(3, 2).state_dict()},
                      "size mismatch for layers.0.weight: copying a param with shape torch.Size([30, 3])"),
    "a missing key": (lambda s: {**s, "model": {k: v for k, v in s["model"].items() if k != "layers.4.bias"}},
                      'Missing key(s) in state_dict: "layers.4.bias"'),
    "a plain state_dict": (lambda s: s["model"], "it needs exactly the keys epochs_done, model and optimizer"),
    **{f"epochs_done {done!r}": (lambda s, done=done: {**s, "epochs_done": done},
                                 f"epochs_done is {done!r}, not a whole number from 0 to --epochs 3")
       for done in ("3", 99, -5)},
    "no param_groups": (lambda s: {**s, "optimizer": {"state": {}}}, "KeyError: 'param_groups'"),
    "a NaN weight": (lambda s: {**s, "model": {**s["model"], "layers.4.bias": torch.tensor([torch.nan, 0.0])}},
                     "its weights are not all finite numbers"),
    "a pickle that would run code": (lambda s: {"model": Evil()}, "UnpicklingError: Weights only load failed"),
}


@pytest.mark.parametrize("change, reason", BAD_SNAPSHOTS.values(), ids=list(BAD_SNAPSHOTS))
def test_bad_snapshot_is_refused_in_one_sentence(tmp_path, monkeypatch, change, reason):
    torch.save(change(good_snapshot()), path := tmp_path / "snapshot.pt")
    monkeypatch.chdir(tmp_path)  # where Evil's code would create its file
    problem = torchrun_script.read_snapshot(path, *model_and_optimizer(), 3)
    assert isinstance(problem, str) and reason in problem, problem
    assert re.fullmatch(REFUSED.format(re.escape(str(path))), problem), problem
    assert not (tmp_path / "code-ran").exists(), "the pickle's code ran"


# A snapshot that cannot be read (REFUSED names the path: test_bad_snapshot_...), a partner that never comes
@pytest.mark.parametrize("launch, bound, error", [("truncated snapshot", 30, REFUSED.format(r"\S+/truncated\.pt")),
                                                  ("peer never joins", TIMEOUT + 30, r".*1/2 clients joined.*")])
def test_a_rank_that_cannot_start_says_why_in_one_line_and_training_does_not_start(jobs, launch, bound, error):
    job = failed(jobs[launch].result(), bound=bound, status=1)
    assert re.search(rf"^\[rank 0\] error: {error}$", job.stderr, re.M), job.describe()
    assert "Epoch:" not in job.stdout and "Traceback" not in job.stderr, job.describe()


# "partner first": its partner's error reaches join() first (tests/partner_first); the rank that raised is named.
RAISED = "RuntimeError: rank 1 raised this error on purpose"


@pytest.mark.parametrize("fault, message", [("raise", RAISED), ("raise, partner first", RAISED),
                                            ("kill", "process 1 terminated with signal SIGKILL")])
def test_rank_that_raises_or_is_killed_ends_the_job(jobs, fault, message):
    job = failed(jobs[f"spawn {fault}"].result(), bound=60, status=1, fault=(fault.split(",")[0], 15))
    assert f"error: rank 1 failed: {message}" in job.stderr, job.describe()
    assert "Traceback" not in job.stderr  # an expected error: the sentence is enough
    assert job.leftovers == [], "torch's error files are removed"
    if fault == "kill":  # the failing run the page shows
        assert_recorded(job, "DDP-script-fault-kill.txt")


def test_torchrun_rank_that_stalls_ends_the_job_after_the_timeout(jobs):
    job = failed(jobs["torchrun stall"].result(), bound=TIMEOUT + 60, fault=("stall", TIMEOUT + 15))
    assert re.search(rf"^\[rank 0\] error: .*Timed out waiting {TIMEOUT * 1000}ms", job.stderr, re.M), job.describe()
    # torchrun's own summary names the rank that failed
    assert re.search(r"rank\s*: 0 \(local_rank: 0\)\n\s*exitcode\s*: 1", job.stderr), job.describe()


@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_signal_to_the_spawn_launcher_stops_every_rank(jobs, signal_name, status):
    job = failed(jobs[f"spawn {signal_name}"].result(), bound=120, status=status)
    assert job.signalled_at is not None, f"the job never trained\n{job.describe()}"
    assert job.seconds - job.signalled_at < 10, f"{job.seconds - job.signalled_at:.1f} s from {signal_name} to the exit"
    assert job.stderr.strip() == f"stopped by {signal_name}: every rank has ended.", job.describe()
    assert job.leftovers == []


# Ctrl-C while a run starts: the system ends the spawn launcher loading torch, silently; while its ranks load it,
# the launcher ends them in one line. Under torchrun no rank prints; torchrun reports the signal itself (None).
CTRL_C = {"spawn launcher": (-signal.SIGINT, ""), "spawn ranks": (130, "stopped by SIGINT: every rank has ended.\n"),
          "torchrun ranks": (1, None)}
TORCH = Path(torch.__file__).resolve().parent


@pytest.mark.parametrize("launch", CTRL_C)
def test_ctrl_c_while_the_run_starts_stops_it_with_no_traceback_of_ours(jobs, launch):
    status, stderr = CTRL_C[launch]
    job = failed(jobs[f"Ctrl-C, {launch} starting"].result(), bound=60, status=status)
    assert job.signalled_at is not None and "Training on" not in job.stdout, f"not at start-up\n{job.describe()}"
    assert stderr is None or job.stderr == stderr, job.describe()
    frames = re.findall(r'^  File "([^"]+)"', job.stderr, re.M)  # torchrun's SignalException: torch's files only
    assert all(frame.startswith("<frozen") or Path(frame).resolve().is_relative_to(TORCH) for frame in frames), (
        job.describe())
    assert "KeyboardInterrupt" not in job.stderr and "[rank" not in job.stderr, job.describe()
    assert [name for name in job.leftovers if not name.startswith("torchelastic_")] == []  # torchrun's logs aside


def test_torchrun_workers_stop_when_their_agent_is_killed(jobs):
    job = jobs["torchrun agent killed"].result()
    assert job.signalled_at is not None and job.returncode == -signal.SIGKILL, job.describe()
    assert not job.survivors, f"workers outlived their agent by 10 s: {job.survivors}"
    # The default snapshot stays on purpose, and the message said where and until when.
    assert (named := re.search(r"^snapshot file: (\S+) \(removed when training completes; after a failure it stays, "
                               r"to resume with --snapshot\)$", job.stderr, re.M)), job.describe()
    assert [n for n in job.leftovers if "ddp-snapshot" in n] == [Path(named[1]).name]


def test_torchrun_restarts_a_killed_worker_and_ends_with_the_same_weights(jobs, tmp):
    job = jobs["torchrun recovers"].result()
    assert job.returncode == 0 and not job.survivors, f"left behind: {job.survivors}\n{job.describe()}"
    assert "[rank 1] fault kill:" in job.stderr, "the fault never happened"
    assert f"resuming from {tmp / 'recovery-snapshot.pt'} after epoch 1" in job.stderr, job.describe()
    assert trained_fully(job.stdout, 2), job.describe()
    assert_same_weights(tmp / "recovered.pt")  # as if unhurt
