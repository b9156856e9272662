# Copyright (c) Sebastian Raschka under Apache License 2.0 (see LICENSE.txt).
# Source for "Build a Large Language Model From Scratch"
#   - https://www.manning.com/books/build-a-large-language-model-from-scratch
# Code: https://github.com/rasbt/LLMs-from-scratch
# Changed by this site (A.9.3): our DDP-script.py for torchrun, with what a
# long job needs (the banners below)

# Appendix A: Introduction to PyTorch (Part 3)

import argparse
import signal
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

# Ctrl-C, which torchrun passes on to every rank, ends the rank at once, as
# the system does by default, instead of in a KeyboardInterrupt traceback
signal.signal(signal.SIGINT, signal.SIG_DFL)

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

# NEW imports:
import os
import platform
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group


# NEW: function to initialize a distributed process group (1 process / GPU)
# this allows communication among processes
def ddp_setup(rank, local_rank, world_size, timeout):
    """
    Arguments:
        rank: a unique process ID
        world_size: total number of processes in the group
    """
    # MASTER_ADDR and MASTER_PORT, where rank 0 listens: set by torchrun

    # initialize process group
    # nccl: NVIDIA Collective Communication Library (GPUs)
    # gloo: Facebook Collective Communication Library (also CPUs)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if platform.system() == "Windows":
        # Disable libuv because PyTorch for Windows isn't built with support
        os.environ["USE_LIBUV"] = "0"
        # Windows users may have to use "gloo" instead of "nccl" as backend
        backend = "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # GPUs are numbered per machine
    init_process_group(backend=backend, rank=rank, world_size=world_size,
                       timeout=timedelta(seconds=timeout),
                       store=store_for_this_attempt(timeout))
    return backend


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


def prepare_dataset():
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

    # Increase the dataset size to run this script on up to 8 GPUs, with
    # noise that is the same in every process:
    factor = 4
    noise = torch.Generator().manual_seed(123)

    def noisy(X):
        return torch.cat([X + torch.randn(X.shape, generator=noise) * 0.1
                          for _ in range(factor)])
    X_train, y_train = noisy(X_train), y_train.repeat(factor)
    X_test, y_test = noisy(X_test), y_test.repeat(factor)

    train_ds = ToyDataset(X_train, y_train)
    test_ds = ToyDataset(X_test, y_test)

    train_loader = DataLoader(
        dataset=train_ds,
        batch_size=2,
        shuffle=False,  # NEW: False because of DistributedSampler below
        pin_memory=torch.cuda.is_available(),
        drop_last=True,
        # NEW: chunk batches across GPUs without overlapping samples:
        sampler=DistributedSampler(train_ds)  # NEW
    )
    test_loader = DataLoader(
        dataset=test_ds,
        batch_size=2,
        shuffle=False,
    )
    return train_loader, test_loader


# NEW: wrapper
def main(rank, local_rank, world_size, args):

    backend = ddp_setup(rank, local_rank, world_size, args.timeout)  # NEW
    cuda = torch.cuda.is_available()
    device = local_rank if cuda else "cpu"
    if rank == 0:
        print(f"Training on {world_size} processes with {backend}")
    train_loader, test_loader = prepare_dataset()
    torch.manual_seed(123)  # in every process: the same first weights
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    epochs_done = load_snapshot(args.snapshot, model, optimizer,
                                args.epochs)

    # NEW: wrap model with DDP
    model = DDP(model, device_ids=[local_rank] if cuda else None)
    # the core model is now accessible as model.module

    for epoch in range(epochs_done, args.epochs):
        # NEW: Set sampler to ensure each epoch has a different shuffle
        train_loader.sampler.set_epoch(epoch)

        model.train()
        for features, labels in train_loader:

            features, labels = features.to(device), labels.to(device)
            logits = model(features)
            loss = F.cross_entropy(logits, labels)  # Loss function

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            # LOGGING
            print(f"[rank {rank}] Epoch: {epoch+1:03d}/{args.epochs:03d}"
                  f" | Batchsize {labels.shape[0]:03d}"
                  f" | Train/Val Loss: {loss:.2f}")
        save_snapshot(args.snapshot, model.module, optimizer, epoch + 1)

    model.eval()

    train_acc = compute_accuracy(model, train_loader, device=device)
    print(f"[rank {rank}] Training accuracy", train_acc)
    test_acc = compute_accuracy(model, test_loader, device=device)
    print(f"[rank {rank}] Test accuracy", test_acc)
    if args.save and rank == 0:  # every rank holds the same weights
        save_atomically(model.module.state_dict(), args.save)
    if args.snapshot_is_default and rank == 0:  # done: the next job
        args.snapshot.unlink(missing_ok=True)  # starts afresh
    destroy_process_group()  # NEW: cleanly exit distributed mode
    sys.stdout.flush()
    os._exit(0)  # skip the interpreter's shutdown, where Gloo may abort


def compute_accuracy(model, dataloader, device):
    model = model.eval()
    correct = 0.0
    total_examples = 0

    for idx, (features, labels) in enumerate(dataloader):
        features, labels = features.to(device), labels.to(device)

        with torch.no_grad():
            logits = model(features)
        predictions = torch.argmax(logits, dim=1)
        compare = labels == predictions
        correct += torch.sum(compare)
        total_examples += len(compare)
    return (correct / total_examples).item()


# ---- Snapshots: a restarted job goes on from the last finished epoch ----
def save_snapshot(path, model, optimizer, epochs_done):
    if dist.get_rank() == 0:  # the copies are identical: one rank writes
        save_atomically({"model": model.state_dict(),
                         "optimizer": optimizer.state_dict(),
                         "epochs_done": epochs_done}, path)
    dist.barrier()  # nobody goes on before the snapshot is complete


def load_snapshot(path, model, optimizer, epochs):  # return the epochs done
    # Rank 0 reads and checks the file and sends it to every rank: other
    # machines need no copy.
    snapshot = [read_snapshot(path, model, optimizer, epochs)
                if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(snapshot, src=0)
    snapshot = snapshot[0]
    if isinstance(snapshot, str):  # what is wrong with the file: all stop
        raise ValueError(snapshot)
    if snapshot is None:
        return 0  # no snapshot yet: a fresh start
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    if dist.get_rank() == 0:
        print(f"resuming from {path} after epoch {snapshot['epochs_done']}",
              file=sys.stderr)
    return snapshot["epochs_done"]


def read_snapshot(path, model, optimizer, epochs):
    # The snapshot; None if there is none; or a sentence saying what is wrong.
    if not path.exists():
        return None
    try:  # weights_only: tensors and plain data; a pickle that runs code fails
        snapshot = torch.load(path, map_location="cpu", weights_only=True)
        keys = ["epochs_done", "model", "optimizer"]
        if not isinstance(snapshot, dict) or sorted(snapshot) != keys:
            raise ValueError("it needs exactly the keys epochs_done, model"
                             " and optimizer")
        done = snapshot["epochs_done"]
        if type(done) is not int or not 0 <= done <= epochs:
            raise ValueError(f"epochs_done is {done!r}, not a whole number"
                             f" from 0 to --epochs {epochs}")
        if not all(torch.is_tensor(w) and torch.isfinite(w).all()
                   for w in snapshot["model"].values()):
            raise ValueError("its weights are not all finite numbers")
        model.load_state_dict(snapshot["model"])  # names a wrong key or shape
        optimizer.load_state_dict(snapshot["optimizer"])
    except Exception as error:
        gist = " ".join(str(error).split(". ")[0].split())
        why = f"{type(error).__name__}: {gist}"
        return (f"snapshot {path} cannot be resumed from ({why}); delete it"
                " or pass another --snapshot.")
    return snapshot


# ---- Atomic saving: a crash while saving leaves the old file whole ----
SAVING = threading.Lock()  # held while writing (see exit_with_parent)


def save_atomically(obj, path):  # a temporary file, then a rename
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with SAVING:
        try:
            torch.save(obj, temporary)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)  # after a failed write


# ---- Restarts: every attempt meets in keys of its own ----
def store_for_this_attempt(timeout):
    # torchrun's store, with keys of this attempt only: a failed attempt's
    # ranks cannot have touched them. Plain `python`: a group of one, in
    # memory. Ranks started by hand: None, so MASTER_ADDR and MASTER_PORT.
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        store = dist.TCPStore(os.environ["MASTER_ADDR"],
                              int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=timedelta(seconds=timeout))
        attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
        return dist.PrefixStore(f"attempt-{attempt}", store)
    return dist.HashStore() if "WORLD_SIZE" not in os.environ else None


# ---- Stopping: a rank ends when its torchrun agent does ----
def exit_with_parent():  # within a second, even if the agent was killed
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    with SAVING:  # never halfway through a save (a temporary file left)
        os._exit(1)


# ---- Bad input: one sentence, before any work ----
def parse_args(world_size, local_rank):
    parser = argparse.ArgumentParser(description="Train with DDP.")
    add = parser.add_argument
    add("--epochs", type=int, default=3)
    add("--timeout", type=float, default=60, help="seconds to wait for a rank")
    add("--save", type=Path, help="save the final weights to this file")
    add("--snapshot", type=Path, help="resumed from and written after every"
        " epoch (default: one per job, in the temporary folder)")
    args = parser.parse_args()
    gpus = torch.cuda.device_count()
    if not 1 <= world_size <= 8:  # as the book's factor = 4 allows
        parser.error(f"world size {world_size}: the toy data is made"
                     " for 1 to 8 processes.")
    if gpus and local_rank >= gpus:
        parser.error(f"LOCAL_RANK {local_rank} has no GPU: {gpus} are"
                     f" visible; start at most {gpus} processes per machine"
                     " (--nproc_per_node).")
    if args.epochs < 1 or not 0 < args.timeout < float("inf"):
        parser.error("--epochs must be at least 1, and --timeout a number of"
                     " seconds above 0.")
    args.snapshot_is_default = args.snapshot is None
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", f"single-{os.getpid()}")
    temporary = Path(tempfile.gettempdir())
    args.snapshot = args.snapshot or temporary / f"ddp-snapshot-{run_id}.pt"
    for option, path in (("--save", args.save), ("--snapshot", args.snapshot)):
        if path:
            check_path(parser, option, path)
    return args


def check_path(parser, option, path):  # now, not after training
    try:
        if path.is_dir() or not path.parent.is_dir():
            raise OSError
        tempfile.TemporaryFile(dir=path.parent).close()
    except OSError:
        parser.error(f"{option} {path} cannot be written: give a file name"
                     " in a folder that exists and that you can write to.")


if __name__ == "__main__":
    # NEW: torchrun tells every process who it is in environment variables;
    # plain `python` makes a group of one
    rank = int(os.environ.get("RANK", "0"))  # unique across all machines
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))  # on this machine
    world_size = int(os.environ.get("WORLD_SIZE", "1"))  # on all machines
    args = parse_args(world_size, local_rank)
    if "TORCHELASTIC_RUN_ID" in os.environ:  # started by torchrun
        threading.Thread(target=exit_with_parent, daemon=True).start()

    # Only print on rank 0 to avoid duplicate prints from each GPU process
    if rank == 0:
        print("PyTorch version:", torch.__version__)
        print("CUDA available:", torch.cuda.is_available())
        print("Number of GPUs available:", torch.cuda.device_count())
        until = (" (removed when training completes; after a failure it"
                 " stays, to resume with --snapshot)")
        print(f"snapshot file: {args.snapshot}"
              f"{until * args.snapshot_is_default}", file=sys.stderr)

    try:  # an error ends this rank in one line; torchrun stops the others
        main(rank, local_rank, world_size, args)
    except (RuntimeError, ValueError) as error:
        print(f"[rank {rank}] error: {' '.join(str(error).split())}",
              file=sys.stderr)
        sys.stdout.flush()
        os._exit(1)  # as main() ends: no interpreter shutdown (Gloo)
