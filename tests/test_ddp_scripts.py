"""The DDP scripts train correctly: on the CPU with Gloo, with both launchers, for world sizes 1 to 8, each alone in an
empty folder, carrying the chapter pages' model and data; and ddp-inside.py shows, on real numbers, what DDP does."""

import ast
import fcntl
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from ddp_harness import SCRIPTS, SPAWN, TORCHRUN, TORCHRUN_2, assert_recorded, assert_same_weights, run_alone, run_job
from torch.distributed.elastic.utils.distributed import get_free_port

from tools import BOOK, ROOT, ddp_numbers, ddp_runs, pages, script_diff
from tools.editions import ENGLISH
from tools.page_runner import run
from tools.sections import section_code
from tools.store import SCRIPT_OUTPUTS, RecordingError

LAUNCHERS = {"spawn": "DDP-script.py", "torchrun": "DDP-script-torchrun.py"}  # both print the recorded run
BOOK_ON_CPU = "book-DDP-script-cpu.txt"  # the book's DDP-script.py, its device lines changed for the CPU
INSIDE = "ddp-inside.py"  # ours: what DDP does, printed from a run
WORLD_SIZES = [1, 3, 8]  # and 2, the default: the fewest, one that does not divide 20 samples, the most
UNDESTROYED = "the process group was not destroyed before the process exited"  # tests/alone/sitecustomize.py


def book_on_the_cpu(tmp):
    """The book's script always listens on port 12345: on one machine (two test suites at once) its runs take
    turns, by a lock on a file that every suite finds."""
    with open(Path(tempfile.gettempdir()) / "appendix-a-port-12345.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes, or the process ends
        return run_job(ddp_runs.SCRIPT_RUNS[BOOK_ON_CPU].arguments(tmp))


def two_nodes(tmp):
    port = get_free_port()  # and the run's id
    agent = ["-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d",
             f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=test-{port}", "--rdzv-conf=join_timeout=60"]
    script = [TORCHRUN, "--save", tmp / "two-nodes.pt", "--snapshot", tmp / "two-nodes-snapshot.pt"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda rank: run_job([*agent, f"--node-rank={rank}", *script], timeout=150,
                                                  env=ddp_runs.ddp_environment(USE_LIBUV="0")), [0, 1]))


def without_destroy(tmp, script, *args):
    """Run a copy of `script` whose destroy_process_group() call is gone: the check must catch it."""
    code = (SCRIPTS / script).read_text()
    assert code.count("destroy_process_group()  #") == 1
    return run_alone(tmp, script, *args, code=code.replace("destroy_process_group()  #", "pass  #"))


@pytest.fixture(scope="module")
def jobs(tmp):
    """{name: Future of a Job}: every launch, longest first, two at a time (each keeps about two cores busy)."""
    # The two-node and spawn runs take Windows' code path (a TCP store without libuv); all must print the same.
    launches = {
        # Eight processes each import torch: on a busy 2-core machine that alone can take minutes.
        "world size 8": lambda: run_job([SPAWN, "--world-size", 8], timeout=300),
        "two nodes, USE_LIBUV=0": lambda: two_nodes(tmp),
        "torchrun": lambda: run_alone(tmp, "DDP-script-torchrun.py", "--save", tmp / "torchrun.pt",
                                      launcher=TORCHRUN_2),
        "spawn": lambda: run_alone(tmp, "DDP-script.py", "--save", tmp / "spawn.pt", USE_LIBUV="0"),
        "inside": lambda: run_alone(tmp, INSIDE),
        **{f"world size {n}": lambda n=n: run_job([SPAWN, "--world-size", n], timeout=300) for n in (3, 1)},
        "spawn without destroy": lambda: without_destroy(tmp, "DDP-script.py", "--world-size", 1),  # 1 is enough
        "book on the CPU": lambda: book_on_the_cpu(tmp),
        "torchrun without destroy": lambda: without_destroy(tmp, "DDP-script-torchrun.py"),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {name: pool.submit(launch) for name, launch in launches.items()}


def succeeded(job):
    assert job.returncode == 0, job.describe()
    assert not job.survivors, f"processes left behind: {job.survivors}\n{job.describe()}"
    assert UNDESTROYED not in job.stderr, job.describe()
    return job


@pytest.mark.parametrize("script", [*LAUNCHERS.values(), INSIDE])
def test_script_imports_only_torch_and_has_no_build_markers(script):  # 80 columns: scripts/ruff.toml
    code = (SCRIPTS / script).read_text()
    others = [name for name in pages.imports(code) if name != "torch"]
    assert not others, f"scripts/{script} imports {', '.join(others)}: a reader has only torch"
    assert "--8<--" not in code, f"scripts/{script} carries a build marker; the pages section it with ast"


@pytest.mark.parametrize("script", LAUNCHERS.values())
def test_script_reads_in_the_books_order_whose_parts_hold_every_line_of_it_once(script):
    code, names = (BOOK / script).read_text(), list(script_diff.parts((SCRIPTS / script).read_text()))
    books, non_blank = script_diff.parts(code), [line for line in code.splitlines() if line.strip()]
    assert [line for part in books.values() for line in part.splitlines() if line.strip()] == non_blank
    assert [n for n in names if n in books] == list(books), (
        f"scripts/{script}: parts in the order {names}, not {list(books)}")
    assert names[-1] == "__main__", "the __main__ block comes last, as in the book"


def test_a_comment_after_a_parts_last_line_stays_with_it():
    code = "def f():\n    x = 1\n\n    # after x\n\n\n# above g\ndef g():\n    pass\n# last\n"
    assert script_diff.parts(code) == {"f": "def f():\n    x = 1\n\n    # after x",
                                       "g": "# above g\ndef g():\n    pass\n# last"}


# What the scripts carry of snippets/appendix_a.py, which the chapter pages show, compared as code: {script: {part:
# (its sections, the names they define that the part holds)}}; the toy data stands at the top of a function.
NETWORK = {"NeuralNetwork": (["neural_network"], ["NeuralNetwork"]), "ToyDataset": (["toy_dataset"], ["ToyDataset"])}
COPIED = {**dict.fromkeys(LAUNCHERS.values(), {
    **NETWORK, "compute_accuracy": (["compute_accuracy_on_device"], ["compute_accuracy"]),
    "prepare_dataset": (["toy_data", "toy_test_data"], ["X_train", "y_train", "X_test", "y_test"])}),
    INSIDE: {**NETWORK, "train": (["toy_data"], ["X_train", "y_train"])}}


def defined(statements, names):
    """ast.dump of the statements that define one of `names` (a class, a function or a variable)."""
    return [ast.dump(node) for node in statements if getattr(node, "name", None) in names
            or isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in names]


@pytest.mark.parametrize("script", COPIED)
def test_what_a_script_copies_from_the_chapter_is_the_chapters_code(script):
    parts = script_diff.parts((SCRIPTS / script).read_text())
    for name, (sections, names) in COPIED[script].items():
        ours = ast.parse(parts[name]).body
        chapter = ast.parse("\n".join(section_code("appendix_a", section) for section in sections)).body
        assert defined(ours if name in names else ours[0].body, names) == defined(chapter, names), (
            f"scripts/{script}: {name} differs from snippets/appendix_a.py's {', '.join(sections)}, which the "
            f"chapter pages show; make the two the same code:\n{parts[name]}")


@pytest.mark.parametrize("script", LAUNCHERS.values())
def test_changed_parts_and_reasons_match_and_no_line_is_shown_moved_for_its_indentation(script):
    base, parts = script_diff.BASES[script].relative_to(ROOT), script_diff.compare(script)
    changed = {part.name for part in parts if part.diff}
    declared = set(script_diff.reasons().get(script, {}))
    assert changed == declared, (f"{script_diff.DECLARED.relative_to(ROOT)}, [{script[:-3]}.PART]: parts of scripts/"
                                 f"{script} that differ from {base} without a reason: {sorted(changed - declared)}; "
                                 f"reasons for parts that no longer differ: {sorted(declared - changed)}")
    for part in parts:  # no line shown removed and added again only for its indentation
        removed, added = ({line[1:] for line in part.diff if line[0] == sign} for sign in "-+")
        again = {a.strip() for a in added for r in removed if a.strip() == r.strip() != "" and a != r}
        assert not again, f"scripts/{script}, {part.name}: lines shown removed and added again: {sorted(again)}"


def test_a_part_without_a_reason_is_found(monkeypatch, tmp_path):
    (tmp_path / "DDP-script.py").write_text((SCRIPTS / "DDP-script.py").read_text() + "\n\ndef extra():\n    pass\n")
    monkeypatch.setattr(script_diff, "SCRIPTS", tmp_path)
    parts = {part.name: part for part in script_diff.compare("DDP-script.py")}
    assert parts["extra"].diff == ["+def extra():", "+    pass"]
    assert "extra" not in script_diff.reasons()["DDP-script.py"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_script_alone_trains_prints_what_is_recorded_leaves_no_file_and_destroys_its_group(jobs, tmp, launcher):
    script = LAUNCHERS[launcher]
    job = succeeded(jobs[launcher].result())  # run where `snippets` and `tools` cannot be imported
    assert [p.name for p in job.cwd.iterdir()] == [script], "only the script, nothing else"
    assert_same_weights(tmp / f"{launcher}.pt")
    assert not list(tmp.glob(f".{launcher}.pt.*")), "--save leaves no temporary file"
    assert_recorded(job, "DDP-script.txt")  # both launchers print the run the page shows: 2 ranks, trained fully
    if launcher == "torchrun":  # its default snapshot, in the job's TMPDIR, is removed when the job is done
        snapshot = re.search(r"^snapshot file: (\S+)", job.stderr, re.M)
        assert snapshot and snapshot[1].startswith(f"{job.tmpdir}/ddp-snapshot-"), job.describe()
        assert not [name for name in job.leftovers if name.startswith("ddp-snapshot-")], "the snapshot is left"
    undestroyed = jobs[f"{launcher} without destroy"].result()  # `succeeded`'s check of the exit can fail
    assert undestroyed.returncode != 0 and UNDESTROYED in undestroyed.stderr, undestroyed.describe()


def test_the_recorded_ddp_inside_run_keeps_ddps_promises_and_a_printout_that_breaks_one_is_caught():
    recorded = (SCRIPT_OUTPUTS / "ddp-inside.txt").read_text()
    assert ddp_runs.inside_problems(recorded) == []
    table = ddp_runs.inside_table(recorded)
    before, last = table["before"]["checksum"][0], [name for name in table if name.startswith("step ")][-1]
    examples, average = table["step 1"]["examples"][0], table["step 2"]["all-reduce"][0]
    off = f"{float(average[1]) + 2e-6:+.7f}"  # beyond 1e-6
    broken = {  # (row, which of its lines, rank 1's cell): what is wrong
        ("checksum", 0, before[0]): f"before DDP(...), the ranks' checksums are equal: {[before[0]] * 2}",
        ("checksum", -1, "+9.9999"): f"{last}: the ranks' checksums differ: "
                                     f"{[table[last]['checksum'][0][0], '+9.9999']}",
        ("examples", 0, examples[0]): f"step 1: the ranks' examples overlap: {[examples[0]] * 2}",
        ("all-reduce", 1, off): f"step 2: the all-reduce gave {[average[0], off]}, not the mean of "
                                f"{table['step 2']['own b.grad'][0]}"}
    lines = recorded.splitlines(keepends=True)
    for (label, occurrence, value), problem in broken.items():
        at = [i for i, line in enumerate(lines) if line[:11].strip() == label][occurrence]
        changed = f"{label:11}{lines[at][11:23].strip():12}{value:12}".rstrip() + "\n"
        assert ddp_runs.inside_problems("".join([*lines[:at], changed, *lines[at + 1:]])) == [problem]


def test_ddp_inside_alone_prints_what_is_recorded_and_keeps_ddps_promises(jobs):
    job = succeeded(jobs["inside"].result())  # run where `snippets` and `tools` cannot be imported
    assert [p.name for p in job.cwd.iterdir()] == [INSIDE], "only the script, nothing else"
    assert ddp_runs.inside_problems(job.stdout) == [], job.describe()
    assert_recorded(job, "ddp-inside.txt")


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_every_world_size_trains_and_reports_the_same_exact_accuracy(jobs, world_size):
    job = succeeded(jobs[f"world size {world_size}"].result())
    trained = {int(rank) for rank in re.findall(r"^\[rank (\d+)\] Epoch: ", job.stdout, re.M)}
    assert trained == set(range(world_size)), job.describe()
    assert ddp_runs.trained_fully(job.stdout, world_size), job.describe()
    assert len(re.findall(r"^\[rank \d+\] Training accuracy", job.stdout, re.M)) == world_size


def test_two_nodes_print_and_train_as_one_torchrun_does(jobs, tmp):
    nodes = [succeeded(job) for job in jobs["two nodes, USE_LIBUV=0"].result()]
    printed = "".join(job.stdout for job in nodes)  # each node prints its own rank's lines
    torchrun = jobs["torchrun"].result().stdout  # the recorded run (test above): ranks 0 and 1 trained
    assert ddp_runs.in_rank_order(printed) == ddp_runs.in_rank_order(torchrun)
    assert_same_weights(tmp / "two-nodes.pt")


def test_the_books_script_on_the_cpu_prints_what_is_recorded(jobs):
    job = succeeded(jobs["book on the CPU"].result())
    assert_recorded(job, BOOK_ON_CPU)
    assert ddp_runs.trained_fully(job.stdout.replace("[GPU", "[rank "), 2), job.describe()


def test_a_change_to_the_books_script_that_is_not_there_once_is_refused(tmp_path):
    changes = ddp_runs.ScriptRun("", ("book/DDP-script.py",), changes=(("device_ids=[rank]", ""), ("rank", "")))
    with pytest.raises(RecordingError, match="has 21 times, not once, the text 'rank'"):
        changes.arguments(tmp_path)


@pytest.mark.parametrize("script", LAUNCHERS.values())
def test_the_books_factor_lines_and_the_numbers_the_pages_state_are_what_the_scripts_do(script, tmp_path):
    """Uncommenting the factor lines the pages name, and no others, makes the training set the pages say."""
    numbers = {name: number(ENGLISH) for name, number in ddp_numbers.NUMBERS.items()}
    block, lines = ddp_numbers.factor_block(BOOK / script), (BOOK / script).read_text().splitlines(keepends=True)
    commented = slice(block["first"] - 1, block["last"])
    lines[commented] = [line.replace("# ", "", 1) for line in lines[commented]]
    (tmp_path / script).write_text("".join(lines))
    as_shipped, with_factor = ddp_runs.training_loader(BOOK / script), ddp_runs.training_loader(tmp_path / script)
    assert len(as_shipped.dataset) == numbers["book.examples"] and as_shipped.batch_size == numbers["book.batch_size"]
    assert len(with_factor.dataset) == numbers["book.examples_with_factor"]
    assert len(ddp_runs.training_loader().dataset) == numbers["ours.examples"]


def test_gpu_check_without_cuda_says_so_in_one_sentence_and_fails():
    gpu_outputs = sorted((SCRIPTS / "outputs").rglob("gpu/*"))
    status, _, stderr = run([sys.executable, "-m", "tools.gpu_check"], 120, cwd=ROOT, env=ddp_runs.ddp_environment())
    assert (status, stderr) == (1, f"gpu-check needs a CUDA GPU, and torch {torch.__version__} sees none on this "
                                   "machine; run `make gpu-check` on a machine with an NVIDIA GPU and a CUDA build of "
                                   "torch.\n")
    assert sorted((SCRIPTS / "outputs").rglob("gpu/*")) == gpu_outputs, "nothing is recorded"
