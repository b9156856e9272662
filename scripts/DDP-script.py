# Appendix A.9.3: train Appendix A's toy network with DistributedDataParallel
# (DDP), one process per GPU (or 2 CPU processes), started by mp.spawn.
#   python DDP-script.py [--world-size 4] [--help]
#
# It follows the book's script of the same name top to bottom, in the book's
# order and with its names; `# NEW` marks what the book marks as new for DDP.
# What is ours says so: `# Ours` on a line, a `# ---- Ours ... ----` banner.
# It needs nothing but PyTorch.

import argparse
import logging
import os  # NEW
import re
import signal
import socket
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp  # NEW
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group  # NEW
from torch.nn.parallel import DistributedDataParallel as DDP  # NEW
from torch.utils.data import DataLoader, Dataset, Subset
from torch.utils.data.distributed import DistributedSampler  # NEW


# --8<-- [start:ddp_setup]
# NEW: function to initialize a distributed process group (1 process / GPU)
# this allows communication among processes
def ddp_setup(rank, world_size, backend, timeout):
    # Ours: the launcher (at the bottom) set MASTER_ADDR and MASTER_PORT, where
    # rank 0 listens, and chose the backend: nccl on GPUs, gloo on CPUs.
    if torch.cuda.is_available():
        torch.cuda.set_device(rank)  # Ours: first, so NCCL starts on this GPU
    init_process_group(
        backend=backend,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout),  # Ours: give up on a stuck rank
    )
# --8<-- [end:ddp_setup]


# ToyDataset, NeuralNetwork, the toy data and compute_accuracy are the
# chapter's, as its pages show them (a test keeps these copies identical).
# --8<-- [start:toy_dataset]
class ToyDataset(Dataset):
    def __init__(self, X, y):
        self.features = X
        self.labels = y

    def __getitem__(self, index):
        one_x = self.features[index]
        one_y = self.labels[index]
        return one_x, one_y

    def __len__(self):
        return self.labels.shape[0]
# --8<-- [end:toy_dataset]


# --8<-- [start:neural_network]
class NeuralNetwork(torch.nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super().__init__()

        self.layers = torch.nn.Sequential(

            # 1st hidden layer
            torch.nn.Linear(num_inputs, 30),
            torch.nn.ReLU(),

            # 2nd hidden layer
            torch.nn.Linear(30, 20),
            torch.nn.ReLU(),

            # output layer
            torch.nn.Linear(20, num_outputs),
        )

    def forward(self, x):
        logits = self.layers(x)
        return logits
# --8<-- [end:neural_network]


# The book builds this data at the top of prepare_dataset.
# --8<-- [start:toy_data]
X_train = torch.tensor([
    [-1.2, 3.1],
    [-0.9, 2.9],
    [-0.5, 2.6],
    [2.3, -1.1],
    [2.7, -1.5]
])

y_train = torch.tensor([0, 0, 0, 1, 1])

X_test = torch.tensor([
    [-0.8, 2.8],
    [2.6, -1.6],
])

y_test = torch.tensor([0, 1])
# --8<-- [end:toy_data]


# --8<-- [start:prepare_dataset]
def prepare_dataset(rank, world_size):
    # Ours: the book's commented-out `factor = 4`, switched on: 20 training and
    # 8 test samples, enough for 8 ranks. The noise comes from a generator of
    # its own, so that every rank and every run builds the same data.
    factor = 4
    noise = torch.Generator().manual_seed(123)

    def noisy_copies(X):
        return torch.cat([X + torch.randn(X.shape, generator=noise) * 0.1
                          for _ in range(factor)])

    train_ds = ToyDataset(noisy_copies(X_train), y_train.repeat(factor))
    test_ds = ToyDataset(noisy_copies(X_test), y_test.repeat(factor))

    train_loader = DataLoader(
        dataset=train_ds,
        batch_size=2,
        shuffle=False,  # NEW: False because of DistributedSampler below
        pin_memory=torch.cuda.is_available(),  # Ours: only where it can pin
        drop_last=True,
        # NEW: chunk batches across GPUs without overlapping samples:
        sampler=DistributedSampler(  # NEW
            train_ds, num_replicas=world_size, rank=rank  # Ours: explicit
        ),
    )
    test_loader = DataLoader(
        dataset=test_ds,
        batch_size=2,
        shuffle=False,
        # Ours: the test set is split across the ranks too, in order
        sampler=DistributedSampler(
            test_ds, num_replicas=world_size, rank=rank, shuffle=False
        ),
    )
    return train_loader, test_loader
# --8<-- [end:prepare_dataset]


# --8<-- [start:main]
# NEW: wrapper
def main(rank, world_size, args):  # mp.spawn passes the rank (0, 1, ...)
    ddp_setup(rank, world_size, args.backend, args.timeout)  # NEW
    # Ours: the book's device is the rank, a GPU; here it can be the CPU
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", rank) if cuda else "cpu"
    try:  # Ours: so that destroy_process_group() below runs on every path
        train_loader, test_loader = prepare_dataset(rank, world_size)
        torch.manual_seed(123)  # Ours: here, in every process
        model = NeuralNetwork(num_inputs=2, num_outputs=2)
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

        # NEW: wrap model with DDP (a CPU model takes no device_ids)
        model = DDP(model, device_ids=[rank] if cuda else None)
        # the core model is now accessible as model.module

        for epoch in range(args.epochs):
            # NEW: Set sampler to ensure each epoch has a different
            # shuffle order
            train_loader.sampler.set_epoch(epoch)

            model.train()
            lines = []  # Ours: this rank's log lines, printed in rank order
            for batch_idx, (features, labels) in enumerate(train_loader):

                features, labels = features.to(device), labels.to(device)
                logits = model(features)
                loss = F.cross_entropy(logits, labels)  # Loss function

                optimizer.zero_grad()
                loss.backward()  # and DDP averages the gradients of all ranks
                optimizer.step()  # the same update on every rank

                # LOGGING
                lines.append(
                    f"[rank {rank}] Epoch: {epoch+1:03d}/{args.epochs:03d}"
                    f" | Batch {batch_idx+1:03d}/{len(train_loader):03d}"
                    f" | Batchsize {labels.shape[0]:03d}"
                    f" | Train Loss: {loss:.2f}"
                )
                inject_fault(args, rank, epoch, batch_idx)  # Ours: --fault
            print_in_rank_order(lines)  # Ours
# --8<-- [end:main]

        # --8<-- [start:accuracy]
        # Ours: the network itself, model.module: it needs no other rank.
        # Each rank's accuracy on its own shard, as DistributedSampler gives it:
        train_acc = compute_accuracy(model.module, train_loader, device=device)
        test_acc = compute_accuracy(model.module, test_loader, device=device)
        if rank == 0:
            print("Accuracy of each rank on its own shard"
                  " (DistributedSampler pads shards by repeating samples):")
        print_in_rank_order([f"[rank {rank}] Training accuracy {train_acc:.4f}"
                             f" | Test accuracy {test_acc:.4f}"])
        # Ours: every sample counted once; rank r takes r, r+W, r+2W, ...
        exact = []  # (correct, total) of the training set, then the test set
        for dataset in (train_loader.dataset, test_loader.dataset):
            shard = Subset(dataset, range(rank, len(dataset), world_size))
            loader = DataLoader(shard, batch_size=2)
            accuracy = compute_accuracy(model.module, loader, device)
            counts = torch.tensor([round(accuracy * len(shard)), len(shard)],
                                  device=device)
            dist.all_reduce(counts)  # sums the counts of all ranks, on each
            exact.append(counts.tolist())
        if rank == 0:
            print("Accuracy over all samples, each counted once"
                  " (counts summed over the ranks with all_reduce):")
            print(" | ".join(
                f"{name} accuracy {correct / total:.4f} ({correct}/{total})"
                for name, (correct, total) in zip(("Training", "Test"), exact)
            ), flush=True)
        # --8<-- [end:accuracy]

        if args.save and rank == 0:  # Ours: --save; all ranks hold the same
            save_atomically(model.module.state_dict(), args.save)
            print(f"Saved the final weights to {args.save}", file=sys.stderr)
    finally:
        destroy_process_group()  # NEW: cleanly exit distributed mode
    sys.stdout.flush()
    os._exit(0)  # Ours: skip the interpreter shutdown, where Gloo may abort


# --8<-- [start:compute_accuracy_on_device]
def compute_accuracy(model, dataloader, device):

    model = model.eval()
    correct = 0.0
    total_examples = 0

    for idx, (features, labels) in enumerate(dataloader):

        features, labels = features.to(device), labels.to(device) # New

        with torch.no_grad():
            logits = model(features)

        predictions = torch.argmax(logits, dim=1)
        compare = labels == predictions
        correct += torch.sum(compare)
        total_examples += len(compare)

    return (correct / total_examples).item()
# --8<-- [end:compute_accuracy_on_device]


# ---- Ours, not in the book: every rank's lines, printed in rank order ----
def print_in_rank_order(lines):  # the same output on every run
    rank_0 = dist.get_rank() == 0
    gathered = [None] * dist.get_world_size() if rank_0 else None
    dist.gather_object(lines, gathered, dst=0)  # rank 0 gets every rank's
    if gathered:
        print("\n".join(line for rank_lines in gathered for line in rank_lines),
              flush=True)


# ---- Ours, not in the book: a crash while saving leaves the old file ----
def save_atomically(obj, path):  # a temporary file, then a rename
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(obj, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)  # after a failed write


# ---- Ours, not in the book: --fault, to see what a failing rank does ----
def inject_fault(args, rank, epoch, batch_idx):  # in epoch 2, after batch 1
    if args.fault and (rank, epoch, batch_idx) == (args.fault_rank, 1, 0):
        print(f"[rank {rank}] --fault {args.fault}: failing now, in epoch 2"
              " after batch 1", file=sys.stderr, flush=True)
        if args.fault == "raise":
            raise RuntimeError(
                f"--fault raise: rank {rank} raised this error on purpose")
        if args.fault == "kill":
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
        time.sleep(args.timeout + 3600)  # "stall": as a deadlocked rank would


# ---- Ours, not in the book: the command line, checked before any work ----
def parse_args():  # a bad value stops here with one sentence (exit status 2)
    parser = argparse.ArgumentParser(
        description="Train Appendix A's toy network with DDP.")
    add = parser.add_argument
    add("--world-size", type=int,
        help="processes (default: one per GPU, or 2)")
    add("--epochs", type=int, default=3, help="training epochs (default: 3)")
    add("--backend", choices=["nccl", "gloo"],
        help="default: nccl on GPUs, else gloo")
    add("--timeout", type=float, default=60.0,
        help="seconds to wait for a rank (60)")
    add("--save", type=Path, help="write the final weights to this file")
    add("--fault", choices=["raise", "kill", "stall"],
        help="make rank --fault-rank fail in epoch 2")
    add("--fault-rank", type=int,
        help="the rank --fault breaks (default: the last)")
    args = parser.parse_args()

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.world_size is None:
        args.world_size = gpus or 2
    if not 1 <= args.world_size <= 8:  # the 8 test samples: 1 or more a rank
        parser.error(f"--world-size {args.world_size}: the toy data is made"
                     " for 1 to 8 processes.")
    if gpus and args.world_size > gpus:
        parser.error(f"--world-size {args.world_size} needs {args.world_size}"
                     f" GPUs, one per process, but {gpus} are visible;"
                     f" use --world-size {gpus} or fewer.")
    if args.epochs < 1 or not 0 < args.timeout < float("inf"):
        parser.error("--epochs must be at least 1, and --timeout a number of"
                     " seconds above 0.")
    nccl = gpus > 0 and dist.is_nccl_available()
    if args.backend == "nccl" and not nccl:
        parser.error("--backend nccl needs CUDA GPUs and a PyTorch build with"
                     " NCCL; use --backend gloo.")
    args.backend = args.backend or ("nccl" if nccl else "gloo")
    if args.fault_rank is None:
        args.fault_rank = args.world_size - 1
    if (not 0 <= args.fault_rank < args.world_size
            or args.fault and args.epochs < 2):
        parser.error("--fault strikes in epoch 2 (use --epochs 2 or more) on"
                     f" one of the ranks 0 to {args.world_size - 1}"
                     " (--fault-rank).")
    if args.save:  # fail now, not after training
        check_path(parser, "--save", args.save)
    return args, parser


def check_path(parser, option, path):  # stop if `path` cannot be written
    if path.is_dir():
        parser.error(f"{option} {path} is a folder; give a file name, such as"
                     f" {path / 'model.pth'}.")
    # The nearest folder that exists; save_atomically makes the rest.
    folder = next(p for p in path.absolute().parents if p.exists())
    if not folder.is_dir():
        parser.error(f"{option} {path}: {folder} is a file, not a folder;"
                     " choose another path.")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        parser.error(f"{option} {path}: the folder {folder} cannot be written"
                     " to; choose another one.")


def set_master_address(parser):  # where rank 0 listens
    # MASTER_ADDR and MASTER_PORT if set, else this machine and a free port.
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch
        try:
            s.bind(("", int(os.environ.get("MASTER_PORT", "0"))))
        except (ValueError, OverflowError, OSError):
            parser.error(f"MASTER_PORT={os.environ['MASTER_PORT']} is in use"
                         " or not a port number; choose a free port (1 to"
                         " 65535), or unset MASTER_PORT to get one.")
        os.environ.setdefault("MASTER_PORT", str(s.getsockname()[1]))


# ---- Ours, not in the book: Ctrl-C and SIGTERM end every rank ----
def stop(signum, frame):  # then exit with 128 + the signal's number
    ranks = mp.active_children()
    for process in ranks:
        process.kill()
    for process in ranks:
        process.join()
    print(f"stopped by {signal.Signals(signum).name}: every rank has ended.",
          file=sys.stderr)
    sys.exit(128 + signum)


# --8<-- [start:launcher]
if __name__ == "__main__":
    args, parser = parse_args()  # Ours: a bad value: exit, saying why
    set_master_address(parser)  # Ours: not the book's fixed port 12345
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # Ours: share the cores
    if os.name == "nt":  # Ours, as the book's ddp_setup does on Windows:
        os.environ.setdefault("USE_LIBUV", "0")  # its PyTorch has no libuv
    print("PyTorch version:", torch.__version__)
    print("CUDA available:", torch.cuda.is_available())
    print("Number of GPUs available:", torch.cuda.device_count())
    gpus, n = torch.cuda.device_count(), args.world_size  # Ours: one line
    kind = "GPU" if gpus else "CPU process"
    plural = ("s" if gpus else "es") * (n > 1)
    print(f"Training on {n} {kind}{plural} (world size {n}) with the"
          f" {args.backend} backend for {args.epochs}"
          f" epoch{'s' * (args.epochs > 1)}", flush=True)
    # Ours: no torch.manual_seed(123) here. The book's seed in this process
    # never reaches the spawned ones, fresh interpreters: main() seeds in each.
    signal.signal(signal.SIGINT, stop)  # Ours
    signal.signal(signal.SIGTERM, stop)  # Ours
    # Ours: a failed rank is told in one line (below), not logged at length.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)

    # NEW: spawn new processes
    # note that spawn will automatically pass the rank
    context = mp.spawn(main, args=(args.world_size, args),
                       nprocs=args.world_size, join=False)  # Ours: join=False
    # nprocs=world_size spawns one process per GPU
    try:  # Ours: wait; if a rank fails, join() ends the others and raises
        while not context.join():
            pass
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as error:
        # The last line of the rank's traceback without Gloo's source location,
        # or how the rank ended.
        last = str(error).strip().splitlines()[-1]
        cause = re.sub(r"\[\S+:\d+\] ", "", last)
        if isinstance(error, mp.ProcessExitedException):
            cause = (f"killed by {error.signal_name}" if error.signal_name
                     else f"exit status {error.exit_code}")
        elif not cause.startswith(("RuntimeError", "torch.distributed")):
            print(str(error).strip(), file=sys.stderr)  # unexpected: where
        print(f"error: rank {error.error_index} failed: {cause}; the other"
              " ranks were stopped.", file=sys.stderr)
        sys.exit(1)
    finally:  # also after a signal (see stop): torch leaves each rank's
        for error_file in context.error_files:  # traceback in a file
            Path(error_file).unlink(missing_ok=True)
# --8<-- [end:launcher]
