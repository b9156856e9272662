"""The DDP scripts train correctly: on the CPU with Gloo, with both launchers, for every world size.

Every launch this file needs is started once by the module fixture `jobs`, two at a time
(each keeps about two cores busy: most of a launch is every process importing torch, and
torch._dynamo, which torch.optim imports on first use); the tests then assert on the
results as they arrive.
"""

import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from snippets.ddp_common import free_port
from tools.record_script_outputs import (clean_environment, drift, recorded_text, run_job,
                                         single_process_weights)

SPAWN = "scripts/DDP-script.py"
TORCHRUN = "scripts/DDP-script-torchrun.py"
TORCHRUN_2 = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
WORLD_SIZES = [1, 3, 4, 5, 8]  # and 2, the default, in the runs above
EPOCHS = 3
FULL_ACCURACY = "Training accuracy 1.0000 (20/20) | Test accuracy 1.0000 (8/8)"


def two_nodes(tmp, env):
    """Two torchrun agents with one process each, meeting through a c10d rendezvous on loopback."""
    endpoint = f"127.0.0.1:{free_port()}"
    run_id = f"test-{uuid.uuid4().hex[:8]}"

    def node(rank):
        return run_job(["-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
                        "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={run_id}",
                        f"--node-rank={rank}", "--rdzv-conf=join_timeout=60", TORCHRUN,
                        "--save", tmp / "two-nodes.pt", "--snapshot", tmp / "two-nodes-snapshot.pt"],
                       env=env, timeout=150)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(node, [0, 1]))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """{name: Future of a Job}: every launch of this file, started two at a time, longest first."""
    tmp = tmp_path_factory.mktemp("ddp")
    # The spawn run and the two-node run take the code path of Windows (a TCP store without
    # libuv); the other runs take the default one. All of them must print the same.
    no_libuv = clean_environment(USE_LIBUV="0")
    launches = {
        **{f"world size {n}": lambda n=n: run_job([SPAWN, "--world-size", n]) for n in (8, 5)},
        "two nodes, USE_LIBUV=0": lambda: two_nodes(tmp, no_libuv),
        "torchrun": lambda: run_job([*TORCHRUN_2, TORCHRUN, "--save", tmp / "torchrun.pt"],
                                    tmpdir=tmp / "torchrun-tmpdir"),
        "spawn": lambda: run_job([SPAWN, "--save", tmp / "spawn.pt"], env=no_libuv),
        **{f"world size {n}": lambda n=n: run_job([SPAWN, "--world-size", n]) for n in (4, 3, 1)},
    }
    pool = ThreadPoolExecutor(max_workers=2)  # each launch keeps about two cores busy on its own
    futures = {name: pool.submit(launch) for name, launch in launches.items()}
    futures["tmp"] = tmp
    yield futures
    pool.shutdown(wait=True)


def succeeded(job):
    assert job.returncode == 0, job.describe()
    assert not job.survivors, f"processes left behind: {job.survivors}\n{job.describe()}"
    return job


@pytest.fixture(scope="module")
def reference():
    """The weights of one process trained on what ranks 0 and 1 get at every step, without DDP."""
    return single_process_weights(epochs=EPOCHS, world_size=2)


def saved_weights(path):
    return torch.load(path, weights_only=True)


def assert_same_weights(actual, expected):
    assert actual.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], atol=1e-6, rtol=1e-6, msg=lambda m: f"{key}: {m}")


def ranks_that_trained(stdout):
    return sorted({int(r) for r in re.findall(r"^\[rank (\d+)\] Epoch: \d+/\d+ \| Batch 001/", stdout, re.M)})


@pytest.mark.parametrize("launcher", ["spawn", "torchrun"])
def test_two_processes_train_to_full_accuracy(jobs, launcher):
    job = succeeded(jobs[launcher].result())
    assert ranks_that_trained(job.stdout) == [0, 1], job.describe()
    assert f"Training on 2 CPU processes (world size 2) with the gloo backend for {EPOCHS} epochs" in job.stdout
    assert job.stdout.rstrip().endswith(FULL_ACCURACY), job.describe()
    for rank in (0, 1):
        assert f"[rank {rank}] Training accuracy 1.0000 | Test accuracy 1.0000" in job.stdout


def test_torchrun_removes_its_default_snapshot(jobs):
    job = succeeded(jobs["torchrun"].result())
    snapshot = re.search(r"^snapshot file: (.+)$", job.stderr, re.M)
    assert snapshot, job.describe()
    tmpdir = jobs["tmp"] / "torchrun-tmpdir"  # the job's TMPDIR
    assert snapshot[1].startswith(f"{tmpdir}/ddp-snapshot-"), "the default is in the temporary directory"
    assert not list(tmpdir.glob("ddp-snapshot-*")), "the default snapshot is removed when the job is done"


@pytest.mark.parametrize("launcher", ["spawn", "torchrun"])
def test_ddp_equals_single_process_training(jobs, launcher, reference):
    succeeded(jobs[launcher].result())
    assert_same_weights(saved_weights(jobs["tmp"] / f"{launcher}.pt"), reference)


def test_save_leaves_no_temporary_file(jobs):
    succeeded(jobs["spawn"].result())
    assert sorted(p.name for p in jobs["tmp"].glob(".spawn.pt.*")) == []


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_every_world_size_trains_and_reports_the_same_exact_accuracy(jobs, world_size):
    job = succeeded(jobs[f"world size {world_size}"].result())
    assert ranks_that_trained(job.stdout) == list(range(world_size)), job.describe()
    rank_lines = re.findall(r"^\[rank (\d+)\] Training accuracy", job.stdout, re.M)
    assert rank_lines == [str(r) for r in range(world_size)], "one accuracy line per rank, in rank order"
    # The exact figure counts every sample once, whatever the world size.
    assert job.stdout.rstrip().splitlines()[-1] == FULL_ACCURACY, job.describe()


def two_node_stdout(jobs):
    """What the two-node run printed: the node whose process got rank 0 prints everything."""
    nodes = [succeeded(job) for job in jobs["two nodes, USE_LIBUV=0"].result()]
    printed = [job.stdout for job in nodes if job.stdout]
    assert len(printed) == 1, "exactly one node prints"
    return printed[0]


def test_runs_print_the_same(jobs):
    # Three runs (and the recorded ones, see below): spawn, torchrun, and torchrun on two nodes.
    spawn, torchrun = succeeded(jobs["spawn"].result()), succeeded(jobs["torchrun"].result())
    assert torchrun.stdout == spawn.stdout, "the launchers differ, the training does not"
    assert two_node_stdout(jobs) == torchrun.stdout


def test_use_libuv_0_works(jobs, reference):
    job = succeeded(jobs["spawn"].result())  # with USE_LIBUV=0, like the two-node run
    assert job.stdout.rstrip().endswith(FULL_ACCURACY)
    assert_same_weights(saved_weights(jobs["tmp"] / "spawn.pt"), reference)
    assert two_node_stdout(jobs).rstrip().endswith(FULL_ACCURACY)


@pytest.mark.parametrize("name, launcher", [("DDP-script.txt", "spawn"), ("DDP-script-torchrun.txt", "torchrun")])
def test_recorded_output_matches_a_fresh_run(jobs, name, launcher):
    # The fresh runs above also write their weights with --save, which prints on stderr only.
    problem = drift(name, recorded_text(succeeded(jobs[launcher].result()), name))
    assert problem is None, problem


def test_two_nodes_on_loopback_match_one_node(jobs, reference):
    assert ranks_that_trained(two_node_stdout(jobs)) == [0, 1]
    weights = saved_weights(jobs["tmp"] / "two-nodes.pt")
    assert_same_weights(weights, saved_weights(jobs["tmp"] / "torchrun.pt"))
    assert_same_weights(weights, reference)
