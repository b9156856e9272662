# Appendix A.9.3: DDP-script.py for torchrun, on one machine or several; what changed is marked NEW.
# A snapshot after every epoch lets `torchrun --max-restarts` resume a failed job.
#   torchrun --standalone --nproc_per_node=2 DDP-script-torchrun.py [--help]

import argparse
import os
import signal
import sys
import tempfile
import threading  # NEW
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
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
def ddp_setup(rank, local_rank, world_size, backend, timeout):  # NEW: local_rank
    # torchrun set MASTER_ADDR and MASTER_PORT, where its store listens.
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # NEW: GPUs are numbered per machine
    init_process_group(backend=backend, rank=rank, world_size=world_size,  # NEW: rank is global
                       timeout=timedelta(seconds=timeout),  # give up on a missing or stuck rank
                       store=store_for_this_attempt(timeout))  # NEW: keeps torchrun's restarts apart


def store_for_this_attempt(timeout):  # NEW
    # torchrun's store, with keys of this attempt only: a failed attempt's ranks cannot have touched
    # them. Plain `python`: a group of one, in memory. Ranks started by hand: MASTER_ADDR/MASTER_PORT.
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                              is_master=False, timeout=timedelta(seconds=timeout))
        return dist.PrefixStore(f"attempt-{os.environ['TORCHELASTIC_RESTART_COUNT']}", store)
    return dist.HashStore() if "WORLD_SIZE" not in os.environ else None
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
def main(rank, local_rank, world_size, args):  # every process runs this; NEW: local_rank
    ddp_setup(rank, local_rank, world_size, args.backend, args.timeout)
    try:
        train(rank, local_rank, world_size, args)
    finally:
        destroy_process_group()  # leave the group cleanly, also after an error
    sys.stdout.flush()
    os._exit(0)  # done: skip interpreter shutdown, where Gloo in torch 2.13 sometimes aborts


def train(rank, local_rank, world_size, args):
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else "cpu"  # NEW
    train_loader, test_loader = prepare_dataset(rank, world_size)

    torch.manual_seed(123)  # in every process: every run starts from the same weights
    model = NeuralNetwork(num_inputs=2, num_outputs=2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    epochs_done = load_snapshot(args.snapshot, model, optimizer, args.epochs)  # NEW: 0 if none
    # The wrapper averages the gradients of all ranks in backward(), so the copies stay identical.
    model = DDP(model, device_ids=[local_rank] if torch.cuda.is_available() else None)  # the network: model.module

    for epoch in range(epochs_done, args.epochs):  # NEW: from the snapshot on
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
        save_snapshot(args.snapshot, model.module, optimizer, epoch + 1)  # NEW
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
    if args.snapshot_is_default and rank == 0:  # NEW: the job is done, the next starts afresh
        args.snapshot.unlink(missing_ok=True)


# --8<-- [start:snapshot]
def save_snapshot(path, model, optimizer, epochs_done):  # NEW: all a restarted job needs to go on
    if dist.get_rank() == 0:  # the copies are identical: one rank writes
        save_atomically({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                         "epochs_done": epochs_done}, path)
    dist.barrier()  # nobody goes on before the snapshot is complete


def load_snapshot(path, model, optimizer, epochs):  # NEW: resume from `path`; return the epochs done
    # Rank 0 reads and checks the file and sends it to every rank: other machines need no copy.
    snapshot = [read_snapshot(path, model, optimizer, epochs) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(snapshot, src=0)
    snapshot = snapshot[0]
    if isinstance(snapshot, str):  # what is wrong with the file: every rank stops
        raise ValueError(snapshot)
    if snapshot is None:
        return 0  # no snapshot yet: a fresh start
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    if dist.get_rank() == 0:
        print(f"resuming from {path} after epoch {snapshot['epochs_done']}", file=sys.stderr)
    return snapshot["epochs_done"]


def read_snapshot(path, model, optimizer, epochs):  # NEW: the snapshot, None if there is none, or why not
    if not path.exists():
        return None
    try:  # weights_only: tensors and plain data only; a pickle that would run code is refused
        snapshot = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(snapshot, dict) or sorted(snapshot) != ["epochs_done", "model", "optimizer"]:
            raise ValueError("it needs exactly the keys epochs_done, model and optimizer")
        done = snapshot["epochs_done"]
        if type(done) is not int or not 0 <= done <= epochs:
            raise ValueError(f"epochs_done is {done!r}, not a whole number from 0 to --epochs {epochs}")
        if not all(torch.is_tensor(w) and torch.isfinite(w).all() for w in snapshot["model"].values()):
            raise ValueError("its weights are not all finite numbers")
        model.load_state_dict(snapshot["model"])  # names a missing key or a wrong shape
        optimizer.load_state_dict(snapshot["optimizer"])
    except Exception as error:
        why = f"{type(error).__name__}: " + " ".join(str(error).split(". ")[0].split())  # the gist
        return f"snapshot {path} cannot be resumed from ({why}); delete it or pass another --snapshot."
    return snapshot
# --8<-- [end:snapshot]


def exit_with_parent():  # NEW: end this rank within a second if torchrun's agent dies, not at --timeout
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


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
    restarted = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"  # NEW: so that a restart recovers
    if args.fault and (rank, epoch, batch_idx) == (args.fault_rank, 1, 0) and not restarted:
        print(f"[rank {rank}] --fault {args.fault}: failing now, in epoch 2 after batch 1", file=sys.stderr, flush=True)
        if args.fault == "raise":
            raise RuntimeError(f"--fault raise: rank {rank} raised this error on purpose")
        if args.fault == "kill":
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
        time.sleep(args.timeout + 3600)  # "stall": stop responding, as a deadlocked rank would


def parse_args(world_size, local_rank):  # a bad value stops here with one sentence (exit status 2)
    parser = argparse.ArgumentParser(description="Train Appendix A's toy network with DDP.")
    parser.add_argument("--epochs", type=int, default=3, help="training epochs (default: 3)")
    parser.add_argument("--backend", choices=["nccl", "gloo"], help="default: nccl on GPUs, else gloo")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a rank (60)")
    parser.add_argument("--save", type=Path, help="write the final weights to this file")
    parser.add_argument("--fault", choices=["raise", "kill", "stall"], help="make rank --fault-rank fail in epoch 2")
    parser.add_argument("--fault-rank", type=int, help="the rank --fault breaks (default: the last)")
    parser.add_argument("--snapshot", type=Path, help="resumed from and written after every epoch "
                        "(default: one per job in the temporary folder)")  # NEW
    args = parser.parse_args()

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    args.world_size = world_size  # NEW: from torchrun
    if not 1 <= args.world_size <= 8:  # the 8 test samples: one at least for every rank
        parser.error(f"world size {args.world_size}: the toy data is made for 1 to 8 processes.")
    if gpus and local_rank >= gpus:  # NEW
        parser.error(f"LOCAL_RANK {local_rank} has no GPU: {gpus} are visible; start at most "
                     f"{gpus} processes per machine (--nproc_per_node).")
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
    args.snapshot_is_default = args.snapshot is None  # NEW: one file per torchrun job
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", f"single-{os.getpid()}")
    args.snapshot = args.snapshot or Path(tempfile.gettempdir()) / f"ddp-snapshot-{run_id}.pt"
    check_path(parser, "--snapshot", args.snapshot)
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


# --8<-- [start:launcher]
if __name__ == "__main__":
    # NEW: torchrun tells every process who it is; plain `python` makes a group of one.
    rank = int(os.environ.get("RANK", "0"))  # global rank, unique across all machines
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))  # rank on this machine: its GPU
    world_size = int(os.environ.get("WORLD_SIZE", "1"))  # processes on all machines
    args, parser = parse_args(world_size, local_rank)  # a bad value: exit, say why
    if "TORCHELASTIC_RUN_ID" in os.environ:  # NEW: end with torchrun's agent, not at --timeout
        threading.Thread(target=exit_with_parent, daemon=True).start()
    gpus, n = torch.cuda.device_count(), args.world_size
    if rank == 0:  # NEW
        print(f"PyTorch version: {torch.__version__}\nCUDA available: {torch.cuda.is_available()}\n"
              f"Number of GPUs available: {gpus}\nTraining on {n} {'GPU' if gpus else 'CPU process'}"
              f"{('s' if gpus else 'es') * (n > 1)} (world size {n}) with the {args.backend} backend"
              f" for {args.epochs} epoch{'s' * (args.epochs > 1)}", flush=True)
        until = " (removed when training completes; after a failure it stays, to resume with --snapshot)"
        print(f"snapshot file: {args.snapshot}{until * args.snapshot_is_default}", file=sys.stderr)
    try:  # NEW: an error ends this rank with one line; torchrun then stops the others
        main(rank, local_rank, world_size, args)
    except (RuntimeError, ValueError) as error:  # a bad file or setting, --fault, a lost rank
        print(f"[rank {rank}] error: {' '.join(str(error).split())}", file=sys.stderr)
        sys.stdout.flush()
        os._exit(1)  # as main() ends: without the interpreter shutdown where Gloo may abort
# --8<-- [end:launcher]
