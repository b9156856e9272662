"""Plumbing shared by scripts/DDP-script.py and scripts/DDP-script-torchrun.py.

This is not teaching code. The DDP steps (init_process_group, DistributedSampler, the
DDP wrapper, set_epoch, the training loop, destroy_process_group) stay visible in the
scripts; this module holds the robust but boring parts, so that neither script repeats
them: checking the command line, choosing the backend, finding a free port, printing
in rank order, the exact accuracy over all ranks, saving atomically, loading safely,
the fault injection of --fault, and turning a failed rank into one clear message.

Conventions: results go to stdout (the same bytes on every run, so they can be recorded);
notes that differ from run to run (where a snapshot is, a restart) go to stderr.
"""

import argparse
import contextlib
import errno
import math
import multiprocessing.connection
import os
import pickle
import platform
import re
import signal
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Subset

DEFAULT_TIMEOUT = 60  # seconds; PyTorch's own default is 30 minutes, a long time to wait for a dead peer
FAULT_EPOCH = 1  # --fault triggers in the second epoch (index 1) ...
FAULT_BATCH = 0  # ... right after its first batch
_timeout = DEFAULT_TIMEOUT  # --timeout, once parse_args has seen it


class JobError(Exception):
    """A problem the reader can fix; its message says how, and it is shown without a traceback."""


class InjectedFault(JobError):
    """The error that `--fault raise` raises on purpose."""


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------

def _whole_number(minimum):
    def parse(text):
        if not re.fullmatch(r"\s*[+-]?\d+\s*", text) or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number, at least {minimum} (got {text!r})")
        return int(text)
    return parse


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a number of seconds greater than 0 (got {text!r})")
    return value


def parse_args(prepare_dataset, launcher, argv=None, world_size=None, local_rank=0):
    """Parse and check the command line of a DDP script; exit 2 with one clear sentence on a bad value.

    launcher: "spawn" (DDP-script.py: the world size is an option) or "torchrun"
    (DDP-script-torchrun.py: `world_size` and `local_rank` come from torchrun's environment).
    prepare_dataset(rank, world_size) is the script's own, used to check that the data gives
    every rank at least one batch.
    """
    parser = argparse.ArgumentParser(
        description="Train the toy network of Appendix A with DistributedDataParallel"
                    + (" (launched with torch.multiprocessing.spawn)." if launcher == "spawn"
                       else " (launched with torchrun, or with plain python as one process)."),
    )
    if launcher == "spawn":
        parser.add_argument("--world-size", type=_whole_number(1), metavar="N",
                            help="number of processes (default: one per GPU, or 2 CPU processes without a GPU)")
    parser.add_argument("--epochs", type=_whole_number(1), default=3, metavar="E",
                        help="number of training epochs (default: 3)")
    parser.add_argument("--backend", choices=["nccl", "gloo"],
                        help="communication backend (default: nccl with CUDA GPUs on Linux, gloo otherwise)")
    parser.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="how long a rank waits for the others, when joining and in every collective "
                             f"(default: {DEFAULT_TIMEOUT})")
    parser.add_argument("--save", type=Path, metavar="PATH",
                        help="write the final weights (model.module.state_dict()) to PATH, from rank 0")
    if launcher == "torchrun":
        parser.add_argument("--snapshot", type=Path, metavar="PATH",
                            help="snapshot written after every epoch and resumed from after a restart "
                                 "(default: ddp-snapshot-<torchrun run id>.pt in the temporary directory, "
                                 "removed when the job finishes)")
    parser.add_argument("--fault", choices=["raise", "kill", "stall"],
                        help="try what happens when a rank fails: in epoch 2, after its first batch, rank "
                             "--fault-rank raises an error, kills itself, or stops responding"
                             + (" (under torchrun only in the first attempt, so that a restart recovers)"
                                if launcher == "torchrun" else ""))
    parser.add_argument("--fault-rank", type=_whole_number(0), metavar="R",
                        help="the rank that --fault breaks (default: the last rank)")
    args = parser.parse_args(argv)
    args.launcher = launcher
    global _timeout
    _timeout = args.timeout  # for the messages of exit_on_error and wait_for_ranks

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if launcher == "spawn":
        if args.world_size is None:
            args.world_size = gpus or 2
        if gpus and args.world_size > gpus:
            parser.error(f"--world-size {args.world_size} needs {args.world_size} GPUs, one per process, but only "
                         f"{gpus} {'is' if gpus == 1 else 'are'} visible; use --world-size {gpus} or fewer "
                         "(or make more visible with CUDA_VISIBLE_DEVICES).")
    else:
        args.world_size = world_size
        if gpus and local_rank >= gpus:
            parser.error(f"LOCAL_RANK is {local_rank}, but this node has only {gpus} visible GPU(s); "
                         f"start at most {gpus} processes per node (--nproc-per-node={gpus}).")

    args.backend = _choose_backend(parser, args.backend)
    _check_data_fits(parser, prepare_dataset, args.world_size, launcher)

    if args.fault_rank is None:
        args.fault_rank = args.world_size - 1
    elif args.fault_rank >= args.world_size:
        parser.error(f"--fault-rank {args.fault_rank} does not exist: the ranks are 0 to {args.world_size - 1}.")
    if args.fault and args.epochs < FAULT_EPOCH + 1:
        parser.error(f"--fault triggers in epoch {FAULT_EPOCH + 1}; use --epochs {FAULT_EPOCH + 1} or more.")

    if launcher == "torchrun":
        args.snapshot_is_default = args.snapshot is None
        if args.snapshot is None:
            # One file per torchrun job (torchrun --standalone makes a new run id every time),
            # so a new job never resumes an old one; plain python gets one per process.
            run_id = os.environ.get("TORCHELASTIC_RUN_ID") or f"single-{os.getpid()}"
            args.snapshot = Path(tempfile.gettempdir()) / f"ddp-snapshot-{run_id}.pt"
    return args


def _choose_backend(parser, requested):
    cuda = torch.cuda.is_available()
    if requested == "nccl":
        if not cuda:
            parser.error("--backend nccl needs CUDA GPUs, and none is available here; "
                         "use --backend gloo (the default without a GPU).")
        if not dist.is_nccl_available():
            parser.error("--backend nccl: this PyTorch build has no NCCL (on Windows it never has); "
                         "use --backend gloo.")
        return "nccl"
    if requested == "gloo":
        return "gloo"
    return "nccl" if cuda and platform.system() == "Linux" and dist.is_nccl_available() else "gloo"


def _check_data_fits(parser, prepare_dataset, world_size, launcher):
    """Exit with a clear error unless every rank gets at least one training batch."""
    train_loader, _ = prepare_dataset(0, world_size)
    if len(train_loader) > 0:  # every rank gets as many batches as rank 0
        return
    samples, batch_size = len(train_loader.dataset), train_loader.batch_size
    fits = max(n for n in range(1, samples + 1) if math.ceil(samples / n) // batch_size > 0)
    option = "--world-size" if launcher == "spawn" else "the world size (WORLD_SIZE from torchrun)"
    parser.error(f"{option} {world_size} is more than the toy data supports: with {samples} training samples "
                 f"and batch size {batch_size}, some ranks would get no batch at all; use at most {fits} "
                 "processes, or enlarge the data (`factor` in prepare_dataset).")


def fail(message):
    """Stop the launching process with one clear sentence (exit status 2, like a usage error)."""
    print(f"{Path(sys.argv[0]).name}: error: {message}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------------------
# Where the ranks meet
# ---------------------------------------------------------------------------------------

def enlarged_toy_datasets(factor=4):
    """The toy data of Appendix A, `factor` noisy copies of it (as the book's listing suggests in a
    comment), so that up to 8 ranks all get batches. The noise comes from a generator of its own
    with a fixed seed: every rank and every run builds exactly the same data."""
    from snippets.appendix_a import ToyDataset, X_test, X_train, y_test, y_train

    generator = torch.Generator().manual_seed(123)
    X_tr = torch.cat([X_train + torch.randn(X_train.shape, generator=generator) * 0.1 for _ in range(factor)])
    X_te = torch.cat([X_test + torch.randn(X_test.shape, generator=generator) * 0.1 for _ in range(factor)])
    return ToyDataset(X_tr, y_train.repeat(factor)), ToyDataset(X_te, y_test.repeat(factor))


def exit_without_shutdown(code=0):
    """End this process now, skipping Python's interpreter shutdown.

    All work is done and the process group destroyed by then. But with Gloo, torch 2.13
    sometimes aborts while its C++ threads are torn down during shutdown ("terminate called
    without an active exception", SIGABRT: seen in about 1 of 10 runs of 4 processes on a
    2-core machine), which would turn a finished run into a failed one.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def launched_by_torchrun():
    return "TORCHELASTIC_RUN_ID" in os.environ


def set_master_address(check_port=True, pick_free_port=True):
    """Make MASTER_ADDR and MASTER_PORT point where rank 0 will listen, before any rank starts.

    Values already in the environment are kept. Otherwise: this machine and a port that is
    free now, so that two jobs on one machine do not collide (pick_free_port=False: ranks
    started by hand must be given the port). An explicit MASTER_PORT that another program
    holds stops us here, before any rank connects to that program.
    Under torchrun, the agent has already set both and listens there itself: nothing to do.
    """
    if launched_by_torchrun():
        return
    if platform.system() == "Windows":
        os.environ.setdefault("USE_LIBUV", "0")  # PyTorch for Windows is built without libuv
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        if not pick_free_port:
            fail("MASTER_PORT is not set; ranks started without a launcher must all be given the "
                 "same MASTER_ADDR and MASTER_PORT (where rank 0 listens).")
        os.environ["MASTER_PORT"] = str(free_port())
        return
    text = os.environ["MASTER_PORT"]
    if not text.isdigit() or not 0 < int(text) < 65536:
        fail(f"MASTER_PORT={text!r} is not a port number (1 to 65535); fix it or unset it to use a free port.")
    if check_port and not port_is_free(int(text)):
        fail(f"MASTER_PORT={text} is already in use by another program (address in use); choose another "
             "port, or unset MASTER_PORT so that the script picks a free one.")


def store_for_this_attempt(timeout):
    """The store for init_process_group(store=...): None, or under torchrun a fresh key space per restart.

    torchrun's agent keeps one TCPStore for the whole job and the ranks of every attempt share it.
    A restarted rank could then read what a rank of the failed attempt wrote there (for Gloo, the
    address of a peer that is gone) and hang or be refused. Prefixing the keys with the restart count
    keeps the attempts apart. Without torchrun's store: None, and init_process_group uses
    MASTER_ADDR and MASTER_PORT as usual (rank 0 hosts the store).
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timedelta(seconds=timeout))
    return dist.PrefixStore(f"attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def port_is_free(port):
    """Whether rank 0 could listen on `port`; binding and closing again leaves its holder alone."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as PyTorch's TCPStore does
        try:
            s.bind(("", port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return False
            raise
    return True


# ---------------------------------------------------------------------------------------
# What the ranks print
# ---------------------------------------------------------------------------------------

def print_banner(args):
    """What rank 0 (or the launching process) prints once, before training."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    print("PyTorch version:", torch.__version__)
    print("CUDA available:", torch.cuda.is_available())
    print("Number of GPUs available:", gpus)
    where = f"{args.world_size} GPU{'s' if args.world_size > 1 else ''}" if gpus else \
        f"{args.world_size} CPU process{'es' if args.world_size > 1 else ''}"
    print(f"Training on {where} (world size {args.world_size}) with the {args.backend} backend "
          f"for {args.epochs} epoch{'s' if args.epochs > 1 else ''}", flush=True)
    if args.launcher == "torchrun":
        note(f"snapshot file: {args.snapshot}")


def note(message):
    """A note that differs from run to run: to stderr, so that stdout stays the same."""
    print(message, file=sys.stderr, flush=True)


def print_in_rank_order(lines):
    """Every rank passes its lines; rank 0 prints all of them, rank by rank, each rank's lines together.

    Printing from every process at once would interleave the lines at random; gathering them
    to one process first gives the same output on every run.
    """
    gathered = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(lines, gathered, dst=0)
    if dist.get_rank() == 0:
        print("\n".join(line for rank_lines in gathered for line in rank_lines), flush=True)


def exact_accuracy(model, dataset, device, batch_size=2):
    """(correct, total) over every sample of `dataset` exactly once, summed over all ranks.

    Rank r counts samples r, r + W, r + 2W, ... (W = world size): together the ranks see each
    sample once, unlike DistributedSampler shards, which repeat samples to be equally long.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    shard = Subset(dataset, range(rank, len(dataset), world_size))
    correct = total = 0
    model.eval()
    with torch.no_grad():
        for features, labels in DataLoader(shard, batch_size=batch_size):
            predictions = model(features.to(device)).argmax(dim=1)
            correct += int((predictions == labels.to(device)).sum())
            total += len(labels)
    counts = torch.tensor([correct, total], device=device)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    return int(counts[0]), int(counts[1])


def print_accuracy(rank, own, exact):
    """own: this rank's {"Training": acc, "Test": acc} on its shard; exact: {"Training": (correct, total), ...}."""
    if rank == 0:
        print("Accuracy of each rank on its own shard (DistributedSampler pads shards by repeating samples):")
    print_in_rank_order([f"[rank {rank}] " + " | ".join(f"{name} accuracy {acc:.4f}" for name, acc in own.items())])
    if rank == 0:
        print("Accuracy over all samples, each counted once (counts summed over the ranks with all_reduce):")
        print(" | ".join(f"{name} accuracy {c / t:.4f} ({c}/{t})" for name, (c, t) in exact.items()), flush=True)


# ---------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------

def save_atomically(obj, path):
    """torch.save to a temporary file next to `path`, then rename it: a reader (or a restarted job)
    sees the old file or the new one, never half of one, even if this process dies while writing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            torch.save(obj, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def load_checkpoint(path, what="checkpoint"):
    """torch.load(path, weights_only=True) with one clear error for a file that cannot be used."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if "Weights only load failed" in str(error):
            raise JobError(f"{what} {path} holds Python objects other than tensors and plain data; loading "
                           "them could run arbitrary code, so it was refused (torch.load with "
                           "weights_only=True). Delete the file unless you wrote it yourself.") from None
        raise JobError(f"{what} {path} is truncated or not a file written by torch.save; delete it "
                       "to start fresh.") from None
    except FileNotFoundError:
        raise
    except Exception as error:
        reason = str(error).split(". ")[0].strip() or type(error).__name__
        raise JobError(f"{what} {path} is truncated or not a file written by torch.save ({reason}); "
                       "delete it to start fresh.") from None


def check_fits(state_dict, model, where):
    """Raise a JobError naming the first key or shape in which `state_dict` differs from `model`'s."""
    expected = model.state_dict()
    if not isinstance(state_dict, dict) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise JobError(f"{where} is not a state_dict (a dict of tensors).")
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    if missing or unexpected:
        raise JobError(f"{where} was saved from another model: "
                       + "; ".join(filter(None, [missing and f"it lacks {', '.join(missing[:3])}",
                                                 unexpected and f"it has {', '.join(unexpected[:3])}, "
                                                                "which this model does not"]))
                       + ". Delete it or point to a file of this model.")
    for key, tensor in expected.items():
        if state_dict[key].shape != tensor.shape:
            raise JobError(f"{where} was saved from another model: {key} has shape "
                           f"{list(state_dict[key].shape)} there but {list(tensor.shape)} here. "
                           "Delete it or point to a file of this model.")


def read_snapshot(path, model):
    """The snapshot at `path` (a dict with model, optimizer, epochs_done) checked against `model`,
    or None if there is no file yet."""
    try:
        snapshot = load_checkpoint(path, "snapshot")
    except FileNotFoundError:
        return None
    keys = {"model", "optimizer", "epochs_done"}
    if not isinstance(snapshot, dict) or not keys <= set(snapshot):
        found = ", ".join(map(str, snapshot)) if isinstance(snapshot, dict) else type(snapshot).__name__
        raise JobError(f"snapshot {path} is not a snapshot of this script (it needs the keys "
                       f"{', '.join(sorted(keys))}; found {found}); delete it or pass another --snapshot.")
    check_fits(snapshot["model"], model, f"snapshot {path}")
    return snapshot


# ---------------------------------------------------------------------------------------
# Faults, on purpose: --fault
# ---------------------------------------------------------------------------------------

def inject_fault(args, rank, epoch, batch_idx):
    """With --fault, break rank --fault-rank in epoch 2 right after its first batch.

    Under torchrun, only the first attempt is broken, so that `--max-restarts` can show a recovery.
    """
    if (args.fault is None or rank != args.fault_rank or (epoch, batch_idx) != (FAULT_EPOCH, FAULT_BATCH)
            or int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0):
        return
    where = f"in epoch {epoch + 1} after batch {batch_idx + 1}"
    if args.fault == "raise":
        note(f"[rank {rank}] --fault raise: this process raises an error now, {where}")
        raise InjectedFault(f"--fault raise: rank {rank} raised this error on purpose {where}")
    if args.fault == "kill":
        note(f"[rank {rank}] --fault kill: this process kills itself now, {where}")
        if hasattr(signal, "SIGKILL"):
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)  # Windows has no SIGKILL
    note(f"[rank {rank}] --fault stall: this process stops responding now, {where}; "
         f"the other ranks give up after --timeout {args.timeout:g} s")
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------------------------------
# When a rank fails
# ---------------------------------------------------------------------------------------

_COMMUNICATION = re.compile(
    r"gloo/transport|Connection (closed|reset) by peer|Broken pipe|Timed out|timed out|"
    r"DistBackendError|DistNetworkError|DistStoreError|NCCL (error|communicator)|ProcessGroup")


def _is_communication_error(text):
    """Whether an error says that a rank lost contact with others, rather than what went wrong first."""
    return bool(_COMMUNICATION.search(text))


def _short(text):
    """The first line of an error message, without Gloo's source location and boilerplate."""
    first = text.strip().splitlines()[0] if text.strip() else "(no message)"
    first = re.sub(r"\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\] ", "", first)
    return re.sub(r"\. This is typically caused by .*$", "", first)


def _explain(text, rank):
    """One clear sentence for an error message `text` ('Type: message') seen on `rank`."""
    address = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
    if "waiting for clients" in text:
        joined = re.search(r"(\d+)/(\d+) clients joined", text)
        count = f" (only {joined[1]} of {joined[2]} joined)" if joined else ""
        return (f"rank {rank} waited {_timeout:g} s (--timeout) for the other ranks to join at {address}{count}; "
                "start every rank, each with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE and its own RANK, "
                "and check that they can reach that address.")
    if "trying to connect" in text:
        return (f"rank {rank} could not reach rank 0 at {address} within {_timeout:g} s (--timeout); "
                "start rank 0 and check MASTER_ADDR and MASTER_PORT.")
    if re.search(r"[Tt]imed out", text):
        return (f"rank {rank} gave up after {_timeout:g} s (--timeout) waiting for another rank "
                f"({_short(text)}).")
    if _is_communication_error(text):
        return f"rank {rank} lost contact with another rank ({_short(text)})."
    return f"rank {rank} failed: {_short(text)}"


def _ranks(ranks, capital=False):
    return f"{'R' if capital else 'r'}ank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _exception_text(trace):
    """The 'Type: message' part at the end of a formatted traceback, without the module path of Type."""
    lines = trace.rstrip("\n").splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    start = frames[-1] + 1 if frames else 0
    while start < len(lines) and lines[start].startswith("    "):
        start += 1
    text = "\n".join(lines[start:])
    return re.sub(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*(?::|$))", "", text, count=1)


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def wait_for_ranks(context, grace=1.0):
    """Wait for the processes of `mp.spawn(..., join=False)`; exit 1 with a clear message if one fails.

    When a rank fails, the others get `grace` seconds to stop by themselves (they usually fail
    at once, having lost a peer); then the rest are stopped. The message names the rank that
    failed first for a reason of its own, not one that only lost contact with it.
    """
    processes = context.processes
    pending = {p.sentinel: rank for rank, p in enumerate(processes)}
    seen = []  # ranks, in the order they ended
    first_failure = None
    stopped = []
    try:
        while pending:
            wait = None if first_failure is None else max(0.0, first_failure + grace - time.monotonic())
            ready = multiprocessing.connection.wait(list(pending), timeout=wait)
            if not ready:
                break
            for sentinel in ready:
                rank = pending.pop(sentinel)
                processes[rank].join()
                seen.append(rank)
                if processes[rank].exitcode != 0 and first_failure is None:
                    first_failure = time.monotonic()
    finally:
        for rank, process in enumerate(processes):
            if process.is_alive():
                stopped.append(rank)
                process.terminate()
        deadline = time.monotonic() + 3
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        traces = {}
        for rank, error_file in enumerate(context.error_files):
            with contextlib.suppress(OSError):
                with open(error_file, "rb") as file:
                    traces[rank] = pickle.load(file)
                os.unlink(error_file)

    if first_failure is None and not stopped:
        return
    failures = []  # (own fault?, order, rank, text, trace)
    for order, rank in enumerate(seen):
        code = processes[rank].exitcode
        if code == 0:
            continue
        if rank in traces:
            text = _exception_text(traces[rank])
            failures.append((not _is_communication_error(text), order, rank, text, traces[rank]))
        elif code < 0:
            failures.append((True, order, rank, f"the process was killed by {_signal_name(code)}", None))
        else:
            failures.append((True, order, rank, f"the process exited with status {code}", None))
    own = [f for f in failures if f[0]]
    _, _, rank, text, trace = (own or failures)[0]
    others = sorted(r for _, _, r, _, _ in failures if r != rank)
    if own:
        if trace and not text.startswith(("InjectedFault", "JobError")):  # unexpected: show where
            print(f"Traceback of rank {rank}:\n{trace}", file=sys.stderr, end="")
        message = f"rank {rank} failed: {_short(text) if trace else text}."
        if others:
            message += f" Then {_ranks(others)} stopped as well, having lost contact with it."
        if stopped:
            message += f" {_ranks(stopped, True)} had not stopped and {'were' if len(stopped) > 1 else 'was'} ended."
    else:  # only errors about lost contact: a rank that stalled is the likely cause
        message = _explain(text, rank)
        if others:
            message += f" {_ranks(others, True)} failed the same way."
        if stopped:
            message += (f" {_ranks(stopped, True)} {'were' if len(stopped) > 1 else 'was'} still running and "
                        f"{'were' if len(stopped) > 1 else 'was'} ended: a rank that stalls makes the others wait "
                        "until --timeout.")
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


@contextlib.contextmanager
def exit_on_error(rank):
    """Around a rank's work (torchrun, or one process): on an error, print one clear line naming
    this rank (and the traceback when the error is unexpected), then exit with status 1."""
    try:
        yield
    except JobError as error:
        note(f"[rank {rank}] error: {error}")
        sys.exit(1)
    except Exception:
        text = _exception_text(traceback.format_exc())
        if not _is_communication_error(text):
            traceback.print_exc()
        note(f"[rank {rank}] error: {_explain(text, rank)}")
        sys.exit(1)
