# Appendix A.9.3: train Appendix A's toy network with DistributedDataParallel (DDP), one process
# per GPU (or 2 CPU processes), started by mp.spawn. It needs nothing but PyTorch.
#   python DDP-script.py [--world-size 4] [--help]

import argparse
import logging
import os
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
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Subset
from torch.utils.data.distributed import DistributedSampler


# The network, the toy data and compute_accuracy of Appendix A, as the chapter shows them.
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


# --8<-- [start:toy_data]
X_train = torch.tensor([
    [-1.2, 3.1],
    [-0.9, 2.9],
    [-0.5, 2.6],
    [2.3, -1.1],
    [2.7, -1.5],
])
y_train = torch.tensor([0, 0, 0, 1, 1])

X_test = torch.tensor([
    [-0.8, 2.8],
    [2.6, -1.6],
])
y_test = torch.tensor([0, 1])
# --8<-- [end:toy_data]


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


# --8<-- [start:compute_accuracy]
def compute_accuracy(model, dataloader, device="cpu"):
    model = model.eval()
    correct = 0.0
    total_examples = 0

    for features, labels in dataloader:
        features, labels = features.to(device), labels.to(device)
        with torch.no_grad():
            logits = model(features)

        predictions = torch.argmax(logits, dim=1)
        compare = labels == predictions
        correct += torch.sum(compare)
        total_examples += len(compare)

    return (correct / total_examples).item()
# --8<-- [end:compute_accuracy]


# --8<-- [start:ddp_setup]
def ddp_setup(rank, world_size, backend, timeout):
    # The launcher (at the bottom) set MASTER_ADDR and MASTER_PORT, where rank 0 listens.
    if torch.cuda.is_available():
        torch.cuda.set_device(rank)  # this process uses GPU number `rank`, and only it
    init_process_group(backend=backend, rank=rank, world_size=world_size,  # nccl: GPUs, gloo: CPUs
                       timeout=timedelta(seconds=timeout))  # give up on a missing or stuck rank
# --8<-- [end:ddp_setup]


# --8<-- [start:prepare_dataset]
def prepare_dataset(rank, world_size):
    # Five samples are too few for 8 ranks: 4 noisy copies of the toy data (20 training, 8 test
    # samples), the noise from a generator of its own, so every rank and every run gets the same.
    noise = torch.Generator().manual_seed(123)

    def four_noisy_copies(X, y):
        X = torch.cat([X + torch.randn(X.shape, generator=noise) * 0.1 for _ in range(4)])
        return ToyDataset(X, y.repeat(4))

    train_ds, test_ds = four_noisy_copies(X_train, y_train), four_noisy_copies(X_test, y_test)
    train_loader = DataLoader(train_ds, batch_size=2, drop_last=True, pin_memory=torch.cuda.is_available(),
                              shuffle=False,  # the sampler shuffles; the DataLoader must not do it as well
                              # This rank's share of every epoch, no sample shared with another rank:
                              sampler=DistributedSampler(train_ds, num_replicas=world_size, rank=rank))
    test_loader = DataLoader(test_ds, batch_size=2,  # split too, but not shuffled
                             sampler=DistributedSampler(test_ds, num_replicas=world_size, rank=rank, shuffle=False))
    return train_loader, test_loader
# --8<-- [end:prepare_dataset]


# --8<-- [start:main]
def main(rank, world_size, args):  # every process runs this; mp.spawn passes the rank (0, 1, ...) first
    ddp_setup(rank, world_size, args.backend, args.timeout)
    try:
        train(rank, world_size, args)
    finally:
        destroy_process_group()  # leave the group cleanly, also after an error
    sys.stdout.flush()
    os._exit(0)  # done: skip interpreter shutdown, where Gloo in torch 2.13 sometimes aborts


def train(rank, world_size, args):
    device = torch.device("cuda", rank) if torch.cuda.is_available() else "cpu"
    train_loader, test_loader = prepare_dataset(rank, world_size)

    torch.manual_seed(123)  # in every process: every run starts from the same weights
    model = NeuralNetwork(num_inputs=2, num_outputs=2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    # The wrapper averages the gradients of all ranks in backward(), so the copies stay identical.
    model = DDP(model, device_ids=[rank] if torch.cuda.is_available() else None)  # the network: model.module

    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)  # a new shuffle, the same on all ranks
        model.train()
        lines = []
        for batch_idx, (features, labels) in enumerate(train_loader):
            features, labels = features.to(device), labels.to(device)
            logits = model(features)
            loss = F.cross_entropy(logits, labels)

            optimizer.zero_grad()
            loss.backward()  # this rank's gradients, then their average over all ranks
            optimizer.step()  # the same update on every rank

            lines.append(f"[rank {rank}] Epoch: {epoch+1:03d}/{args.epochs:03d} | Batch {batch_idx+1:03d}/"
                         f"{len(train_loader):03d} | Batchsize {labels.shape[0]:03d} | Train Loss: {loss:.2f}")
            inject_fault(args, rank, epoch, batch_idx)  # does nothing without --fault
        print_in_rank_order(lines)  # rank 0 prints every rank's lines, rank by rank
# --8<-- [end:main]

    # --8<-- [start:accuracy]
    train_acc = compute_accuracy(model.module, train_loader, device=device)  # on this rank's shard
    test_acc = compute_accuracy(model.module, test_loader, device=device)
    if rank == 0:
        print("Accuracy of each rank on its own shard (DistributedSampler pads shards by repeating samples):")
    print_in_rank_order([f"[rank {rank}] Training accuracy {train_acc:.4f} | Test accuracy {test_acc:.4f}"])
    exact = []  # (correct, total) over every sample once: rank r takes samples r, r+W, r+2W, ...
    for dataset in (train_loader.dataset, test_loader.dataset):
        shard = Subset(dataset, range(rank, len(dataset), world_size))
        correct = compute_accuracy(model.module, DataLoader(shard, batch_size=2), device) * len(shard)
        counts = torch.tensor([round(correct), len(shard)], device=device)
        dist.all_reduce(counts)  # sums the counts of all ranks, on every rank
        exact.append(counts.tolist())
    if rank == 0:
        print("Accuracy over all samples, each counted once (counts summed over the ranks with all_reduce):\n"
              + " | ".join(f"{name} accuracy {correct / total:.4f} ({correct}/{total})"
                           for name, (correct, total) in zip(("Training", "Test"), exact)), flush=True)
    # --8<-- [end:accuracy]

    if args.save and rank == 0:  # all ranks hold the same weights; one writes them
        save_atomically(model.module.state_dict(), args.save)
        print(f"Saved the final weights to {args.save}", file=sys.stderr)


def print_in_rank_order(lines):  # rank 0 gathers every rank's lines and prints them: the same every run
    gathered = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(lines, gathered, dst=0)
    if gathered:
        print("\n".join(line for rank_lines in gathered for line in rank_lines), flush=True)


def save_atomically(obj, path):  # a temporary file, then a rename: a crash mid-write leaves the old file
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(obj, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)  # after a failed write; gone after a rename


def inject_fault(args, rank, epoch, batch_idx):  # --fault: rank --fault-rank fails in epoch 2, after batch 1
    if args.fault and (rank, epoch, batch_idx) == (args.fault_rank, 1, 0):
        print(f"[rank {rank}] --fault {args.fault}: failing now, in epoch 2 after batch 1", file=sys.stderr, flush=True)
        if args.fault == "raise":
            raise RuntimeError(f"--fault raise: rank {rank} raised this error on purpose")
        if args.fault == "kill":
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
        time.sleep(args.timeout + 3600)  # "stall": stop responding, as a deadlocked rank would


def parse_args():  # a bad value stops here with one sentence (exit status 2)
    parser = argparse.ArgumentParser(description="Train Appendix A's toy network with DDP.")
    parser.add_argument("--world-size", type=int, help="processes (default: one per GPU, or 2)")
    parser.add_argument("--epochs", type=int, default=3, help="training epochs (default: 3)")
    parser.add_argument("--backend", choices=["nccl", "gloo"], help="default: nccl on GPUs, else gloo")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a rank (60)")
    parser.add_argument("--save", type=Path, help="write the final weights to this file")
    parser.add_argument("--fault", choices=["raise", "kill", "stall"], help="make rank --fault-rank fail in epoch 2")
    parser.add_argument("--fault-rank", type=int, help="the rank --fault breaks (default: the last)")
    args = parser.parse_args()

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    args.world_size = (gpus or 2) if args.world_size is None else args.world_size
    if not 1 <= args.world_size <= 8:  # the 8 test samples: one at least for every rank
        parser.error(f"--world-size {args.world_size}: the toy data is made for 1 to 8 processes.")
    if gpus and args.world_size > gpus:
        parser.error(f"--world-size {args.world_size} needs {args.world_size} GPUs, one per process, "
                     f"but {gpus} are visible; use --world-size {gpus} or fewer.")
    if args.epochs < 1 or not 0 < args.timeout < float("inf"):
        parser.error("--epochs must be at least 1, and --timeout a number of seconds above 0.")
    nccl = gpus > 0 and dist.is_nccl_available()
    if args.backend == "nccl" and not nccl:
        parser.error("--backend nccl needs CUDA GPUs and a PyTorch build with NCCL; use --backend gloo.")
    args.backend = args.backend or ("nccl" if nccl else "gloo")
    args.fault_rank = args.world_size - 1 if args.fault_rank is None else args.fault_rank
    if not 0 <= args.fault_rank < args.world_size or args.fault and args.epochs < 2:
        parser.error(f"--fault strikes in epoch 2 (use --epochs 2 or more) on one of the ranks 0 to "
                     f"{args.world_size - 1} (--fault-rank).")
    if args.save:  # fail now, not after training
        check_path(parser, "--save", args.save)
    return args, parser


def check_path(parser, option, path):  # stop before any work if `path` cannot be written, saying why
    if path.is_dir():
        parser.error(f"{option} {path} is a folder; give a file name, such as {path / 'model.pth'}.")
    folder = next(p for p in path.absolute().parents if p.exists())  # save_atomically makes the rest
    if not folder.is_dir():
        parser.error(f"{option} {path}: {folder} is a file, not a folder; choose another path.")
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        parser.error(f"{option} {path}: the folder {folder} cannot be written to; choose another one.")


def set_master_address(parser):  # where rank 0 listens: MASTER_ADDR/MASTER_PORT if set, else here, a free port
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as PyTorch's store does
        try:
            s.bind(("", int(os.environ.get("MASTER_PORT", "0"))))
        except (ValueError, OverflowError, OSError):
            parser.error(f"MASTER_PORT={os.environ['MASTER_PORT']} is in use or not a port number; "
                         "choose a free port (1 to 65535), or unset MASTER_PORT to get one.")
        os.environ.setdefault("MASTER_PORT", str(s.getsockname()[1]))


def stop(signum, frame):  # Ctrl-C or SIGTERM: end every rank, then exit with 128 + the signal's number
    ranks = mp.active_children()
    for process in ranks:
        process.kill()
    for process in ranks:
        process.join()
    print(f"stopped by {signal.Signals(signum).name}: every rank has ended.", file=sys.stderr)
    sys.exit(128 + signum)


# --8<-- [start:launcher]
if __name__ == "__main__":
    args, parser = parse_args()  # a bad value: exit, say why
    set_master_address(parser)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does: share the cores
    if os.name == "nt":
        os.environ.setdefault("USE_LIBUV", "0")  # PyTorch for Windows has no libuv
    gpus, n = torch.cuda.device_count(), args.world_size
    print(f"PyTorch version: {torch.__version__}\nCUDA available: {torch.cuda.is_available()}\n"
          f"Number of GPUs available: {gpus}\nTraining on {n} {'GPU' if gpus else 'CPU process'}"
          f"{('s' if gpus else 'es') * (n > 1)} (world size {n}) with the {args.backend} backend"
          f" for {args.epochs} epoch{'s' * (args.epochs > 1)}", flush=True)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)  # we say it in one line

    # One process per rank, each running main(rank, args.world_size, args).
    context = mp.spawn(main, args=(args.world_size, args), nprocs=args.world_size, join=False)
    try:
        while not context.join():  # if a rank fails: ends the others, raises naming the rank
            pass
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as error:
        # The last line of the rank's traceback, without Gloo's source location; or how it ended.
        cause = re.sub(r"\[\S+:\d+\] ", "", str(error).strip().splitlines()[-1])
        if isinstance(error, mp.ProcessExitedException):
            cause = f"killed by {error.signal_name}" if error.signal_name else f"exit status {error.exit_code}"
        elif not cause.startswith(("RuntimeError", "torch.distributed")):  # unexpected: show where
            print(str(error).strip(), file=sys.stderr)
        print(f"error: rank {error.error_index} failed: {cause}; the other ranks were stopped.", file=sys.stderr)
        sys.exit(1)
    finally:  # also after a signal (see stop): torch leaves the ranks' tracebacks in the temp folder
        for error_file in context.error_files:
            Path(error_file).unlink(missing_ok=True)
# --8<-- [end:launcher]
