# Appendix A.9.3: DDP-script.py for torchrun, on one machine or several.
#   torchrun --standalone --nproc_per_node=2 DDP-script-torchrun.py [--help]
# NEW (torchrun): every line that differs from our DDP-script.py is marked so.
# torchrun starts, addresses and stops the processes, so that script's
# mp.spawn, port and signal handling are gone; a snapshot after every epoch
# lets `torchrun --max-restarts` resume a failed job.
#
# It follows the book's script of the same name top to bottom, in the book's
# order and with its names; `# NEW` marks what the book marks as new for DDP.
# What is ours says so: `# Ours` on a line, a `# ---- Ours ... ----` banner.
# It needs nothing but PyTorch.

import argparse
import os  # NEW
import signal
import sys
import tempfile
import threading  # NEW (torchrun)
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group  # NEW
from torch.nn.parallel import DistributedDataParallel as DDP  # NEW
from torch.utils.data import DataLoader, Dataset, Subset
from torch.utils.data.distributed import DistributedSampler  # NEW


# --8<-- [start:ddp_setup]
# NEW: function to initialize a distributed process group (1 process / GPU)
# this allows communication among processes
def ddp_setup(rank, local_rank, world_size, backend, timeout):
    # NEW (torchrun): torchrun set MASTER_ADDR and MASTER_PORT, where its store
    # listens; parse_args chose the backend: nccl on GPUs, gloo on CPUs.
    if torch.cuda.is_available():
        # NEW (torchrun): GPUs are numbered per machine, by local rank
        torch.cuda.set_device(local_rank)  # Ours: first, for NCCL
    init_process_group(
        backend=backend,
        rank=rank,  # NEW (torchrun): the global rank, unique on all machines
        world_size=world_size,
        timeout=timedelta(seconds=timeout),  # Ours: give up on a stuck rank
        store=store_for_this_attempt(timeout),  # NEW (torchrun)
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
def main(rank, local_rank, world_size, args):  # NEW (torchrun): local_rank
    ddp_setup(rank, local_rank, world_size, args.backend, args.timeout)  # NEW
    # Ours: the book's device is the rank, a GPU; here it can be the CPU
    cuda = torch.cuda.is_available()
    # NEW (torchrun): this machine's GPU number local_rank
    device = torch.device("cuda", local_rank) if cuda else "cpu"
    try:  # Ours: so that destroy_process_group() below runs on every path
        train_loader, test_loader = prepare_dataset(rank, world_size)
        torch.manual_seed(123)  # Ours: here, in every process
        model = NeuralNetwork(num_inputs=2, num_outputs=2)
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        # NEW (torchrun): go on from the snapshot, if there is one
        epochs_done = load_snapshot(args.snapshot, model, optimizer,
                                    args.epochs)

        # NEW: wrap model with DDP (a CPU model takes no device_ids)
        # NEW (torchrun): device_ids=[local_rank]
        model = DDP(model, device_ids=[local_rank] if cuda else None)
        # the core model is now accessible as model.module

        for epoch in range(epochs_done, args.epochs):  # NEW (torchrun)
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
            # NEW (torchrun): all a restarted job needs to go on
            save_snapshot(args.snapshot, model.module, optimizer, epoch + 1)
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
        if args.snapshot_is_default and rank == 0:  # NEW (torchrun): done, so
            args.snapshot.unlink(missing_ok=True)  # the next job starts afresh
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
    # NEW (torchrun): only before a restart, so that the restart recovers
    restarted = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"
    if (args.fault and (rank, epoch, batch_idx) == (args.fault_rank, 1, 0)
            and not restarted):
        print(f"[rank {rank}] --fault {args.fault}: failing now, in epoch 2"
              " after batch 1", file=sys.stderr, flush=True)
        if args.fault == "raise":
            raise RuntimeError(
                f"--fault raise: rank {rank} raised this error on purpose")
        if args.fault == "kill":
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
        time.sleep(args.timeout + 3600)  # "stall": as a deadlocked rank would


# ---- NEW (torchrun), ours: snapshots, so that a restarted job goes on ----
# --8<-- [start:snapshot]
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
# --8<-- [end:snapshot]


# ---- NEW (torchrun), ours: every restart meets in keys of its own ----
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


# ---- NEW (torchrun), ours: a rank ends when its torchrun agent does ----
def exit_with_parent():  # within a second, even if the agent was killed
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


# ---- Ours, not in the book: the command line, checked before any work ----
def parse_args(world_size, local_rank):  # NEW (torchrun): from torchrun
    # A bad value stops here with one sentence (exit status 2).
    parser = argparse.ArgumentParser(
        description="Train Appendix A's toy network with DDP.")
    add = parser.add_argument
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
    add("--snapshot", type=Path,  # NEW (torchrun)
        help="resumed from and written after every epoch (default: one per"
        " job in the temporary folder)")
    args = parser.parse_args()

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    args.world_size = world_size  # NEW (torchrun)
    if not 1 <= args.world_size <= 8:  # the 8 test samples: 1 or more a rank
        parser.error(f"world size {args.world_size}: the toy data is made"
                     " for 1 to 8 processes.")  # NEW (torchrun): no option
    if gpus and local_rank >= gpus:  # NEW (torchrun)
        parser.error(f"LOCAL_RANK {local_rank} has no GPU: {gpus} are"
                     f" visible; start at most {gpus} processes per machine"
                     " (--nproc_per_node).")
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
    # NEW (torchrun): by default, one snapshot file per torchrun job
    args.snapshot_is_default = args.snapshot is None
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", f"single-{os.getpid()}")
    temporary = Path(tempfile.gettempdir())
    args.snapshot = args.snapshot or temporary / f"ddp-snapshot-{run_id}.pt"
    check_path(parser, "--snapshot", args.snapshot)
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


# --8<-- [start:launcher]
if __name__ == "__main__":
    # NEW (torchrun): torchrun tells every process who it is in environment
    # variables; plain `python` makes a group of one.
    rank = int(os.environ.get("RANK", "0"))  # unique across all machines
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))  # on this machine
    world_size = int(os.environ.get("WORLD_SIZE", "1"))  # on all machines
    args, parser = parse_args(world_size, local_rank)  # Ours: exit, say why
    if "TORCHELASTIC_RUN_ID" in os.environ:  # NEW (torchrun): end with the
        # torchrun agent that started this process, not at --timeout
        threading.Thread(target=exit_with_parent, daemon=True).start()
    # Only print on rank 0 to avoid duplicate prints from each GPU process
    if rank == 0:  # NEW (torchrun)
        print("PyTorch version:", torch.__version__)
        print("CUDA available:", torch.cuda.is_available())
        print("Number of GPUs available:", torch.cuda.device_count())
        gpus, n = torch.cuda.device_count(), args.world_size  # Ours: one line
        kind = "GPU" if gpus else "CPU process"
        plural = ("s" if gpus else "es") * (n > 1)
        print(f"Training on {n} {kind}{plural} (world size {n}) with the"
              f" {args.backend} backend for {args.epochs}"
              f" epoch{'s' * (args.epochs > 1)}", flush=True)
        until = (" (removed when training completes; after a failure it"
                 " stays, to resume with --snapshot)")
        print(f"snapshot file: {args.snapshot}"
              f"{until * args.snapshot_is_default}", file=sys.stderr)
    # The book seeds here; main() does, as in DDP-script.py.

    try:  # NEW (torchrun): an error ends this rank with one line, and
        main(rank, local_rank, world_size, args)  # torchrun stops the others
    except (RuntimeError, ValueError) as error:  # a bad file or setting,
        # --fault, a lost rank
        print(f"[rank {rank}] error: {' '.join(str(error).split())}",
              file=sys.stderr)
        sys.stdout.flush()
        os._exit(1)  # as main() ends: no interpreter shutdown (Gloo)
# --8<-- [end:launcher]
