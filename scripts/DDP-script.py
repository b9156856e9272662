# Copyright (c) Sebastian Raschka under Apache License 2.0 (see LICENSE.txt).
# Source for "Build a Large Language Model From Scratch"
#   - https://www.manning.com/books/build-a-large-language-model-from-scratch
# Code: https://github.com/rasbt/LLMs-from-scratch
# Changed by this site (A.9.3): runs on GPUs with NCCL and on CPUs with Gloo

# Appendix A: Introduction to PyTorch (Part 3)

import argparse
import pickle
import signal
import socket
import sys
import tempfile
from pathlib import Path

# From here on Ctrl-C ends the process at once, as the system does by
# default (also while torch loads), not in a KeyboardInterrupt traceback
signal.signal(signal.SIGINT, signal.SIG_DFL)

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

# NEW imports:
import os
import platform
import torch.multiprocessing as mp
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group


# NEW: function to initialize a distributed process group (1 process / GPU)
# this allows communication among processes
def ddp_setup(rank, world_size):
    """
    Arguments:
        rank: a unique process ID
        world_size: total number of processes in the group
    """
    # MASTER_ADDR and MASTER_PORT, where rank 0 listens: see parse_args

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
        torch.cuda.set_device(rank)  # first, so that NCCL starts on this GPU
    init_process_group(backend=backend, rank=rank, world_size=world_size)
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
def main(rank, world_size, num_epochs, save):

    backend = ddp_setup(rank, world_size)  # NEW: initialize process groups
    cuda = torch.cuda.is_available()
    device = rank if cuda else "cpu"
    if rank == 0:
        print(f"Training on {world_size} processes with {backend}")
    train_loader, test_loader = prepare_dataset()
    torch.manual_seed(123)  # in every process: the same first weights
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    # NEW: wrap model with DDP
    model = DDP(model, device_ids=[rank] if cuda else None)
    # the core model is now accessible as model.module

    for epoch in range(num_epochs):
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
            print(f"[rank {rank}] Epoch: {epoch+1:03d}/{num_epochs:03d}"
                  f" | Batchsize {labels.shape[0]:03d}"
                  f" | Train/Val Loss: {loss:.2f}")

    model.eval()

    train_acc = compute_accuracy(model, train_loader, device=device)
    print(f"[rank {rank}] Training accuracy", train_acc)
    test_acc = compute_accuracy(model, test_loader, device=device)
    print(f"[rank {rank}] Test accuracy", test_acc)
    if save and rank == 0:  # every rank holds the same weights
        torch.save(model.module.state_dict(), save)
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


def parse_args():  # a bad value stops here, in one sentence
    parser = argparse.ArgumentParser(description="Train with DDP.")
    add = parser.add_argument
    add("--world-size", type=int, help="default: one per GPU, or 2")
    add("--epochs", type=int, default=3)
    add("--save", type=Path, help="save the final weights to this file")
    args = parser.parse_args()
    gpus = torch.cuda.device_count()
    if args.world_size is None:
        args.world_size = gpus or 2
    if not 1 <= args.world_size <= 8:  # as the book's factor = 4 allows
        parser.error(f"--world-size {args.world_size}: the toy data is made"
                     " for 1 to 8 processes.")
    if gpus and args.world_size > gpus:
        parser.error(f"--world-size {args.world_size} needs {args.world_size}"
                     f" GPUs, one per process, but {gpus} are visible;"
                     f" use --world-size {gpus} or fewer.")
    # MASTER_PORT if set, else a free one: another job may hold 12345
    os.environ.setdefault("MASTER_ADDR", "localhost")
    with socket.socket() as s:
        try:
            s.bind(("", int(os.environ.get("MASTER_PORT", "0"))))
        except (ValueError, OverflowError, OSError):
            parser.error(f"MASTER_PORT={os.environ['MASTER_PORT']} is in use"
                         " or not a port number; choose a free port (1 to"
                         " 65535), or unset MASTER_PORT to get one.")
        os.environ.setdefault("MASTER_PORT", str(s.getsockname()[1]))
    if args.save:
        check_path(parser, "--save", args.save)
    return args


def check_path(parser, option, path):  # now, not after training
    try:
        if path.is_dir() or not path.parent.is_dir():
            raise OSError
        tempfile.TemporaryFile(dir=path.parent).close()
    except OSError:
        parser.error(f"{option} {path} cannot be written: give a file name"
                     " in a folder that exists and that you can write to.")


def stop(signum, frame):  # Ctrl-C or SIGTERM: end every rank, then exit
    for process in mp.active_children():
        process.kill()
        process.join()
    print(f"stopped by {signal.Signals(signum).name}: every rank has ended.",
          file=sys.stderr)
    sys.exit(128 + signum)


if __name__ == "__main__":
    args = parse_args()
    print("PyTorch version:", torch.__version__)
    print("CUDA available:", torch.cuda.is_available())
    print("Number of GPUs available:", torch.cuda.device_count())
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # processes share cores
    signal.signal(signal.SIGTERM, stop)
    # Ctrl-C reaches every process in the terminal. A rank ignores it (SIG_IGN,
    # inherited) until its SIG_DFL line; stop() ends any rank still running
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    # NEW: spawn new processes
    # note that spawn will automatically pass the rank
    context = mp.spawn(main, args=(args.world_size, args.epochs, args.save),
                       nprocs=args.world_size, join=False)
    # nprocs=world_size spawns one process per GPU
    signal.signal(signal.SIGINT, stop)
    try:  # if a rank fails, join() ends the others and raises
        while not context.join():
            pass
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as error:
        rank, message = error.error_index, str(error)
        if isinstance(error, mp.ProcessRaisedException):
            # a partner fails once the failed rank exits and its connections
            # close, and join() may see that partner end first; the failed
            # rank's error was written before it exited: take the first file
            written = [f for f in context.error_files if os.path.exists(f)]
            first = min(written, key=os.path.getmtime)
            rank = context.error_files.index(first)
            with open(first, "rb") as file:  # torch pickles the traceback
                message = pickle.load(file)
        print(f"error: rank {rank} failed:"
              f" {message.strip().splitlines()[-1]}", file=sys.stderr)
        sys.exit(1)
    finally:  # torch leaves each rank's error in a file
        for error_file in context.error_files:
            Path(error_file).unlink(missing_ok=True)
