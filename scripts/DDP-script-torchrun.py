# Appendix A.9.3: training on several GPUs (or CPU processes) with
# DistributedDataParallel, started by torchrun, on one machine or several, with a
# snapshot after every epoch so that a restarted job goes on where it stopped.
#
#   torchrun --standalone --nproc_per_node=2 scripts/DDP-script-torchrun.py
#   torchrun --standalone --nproc_per_node=2 --max-restarts=3 \
#       scripts/DDP-script-torchrun.py --fault kill   # a rank dies; the job recovers
#   python scripts/DDP-script-torchrun.py            # no torchrun: a group of one
#
# --8<-- [start:imports]
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

# Run from a checkout without installing: make the `snippets` package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snippets.appendix_a import NeuralNetwork, compute_accuracy  # noqa: E402
from snippets.ddp_common import (  # noqa: E402  (plumbing, not DDP itself)
    enlarged_toy_datasets, exact_accuracy, exit_on_error, exit_without_shutdown, inject_fault,
    note, parse_args, print_accuracy, print_banner, print_in_rank_order, read_snapshot,
    save_atomically, set_master_address, store_for_this_attempt)
# --8<-- [end:imports]


# --8<-- [start:ddp_setup]
def ddp_setup(rank, local_rank, world_size, backend, timeout):
    """Join the process group; returns once every rank has joined."""
    # torchrun set MASTER_ADDR and MASTER_PORT (without torchrun: set_master_address).
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)  # GPUs are numbered per machine: local rank
    init_process_group(
        backend=backend,
        rank=rank,  # the global rank: unique across all machines
        world_size=world_size,
        timeout=timedelta(seconds=timeout),
        store=store_for_this_attempt(timeout),  # keeps torchrun's restarts apart
    )
# --8<-- [end:ddp_setup]


def prepare_dataset(rank, world_size):
    # The data of DDP-script.py: four noisy copies of the toy data, the same on every rank.
    train_ds, test_ds = enlarged_toy_datasets(factor=4)

    train_loader = DataLoader(
        dataset=train_ds,
        batch_size=2,
        shuffle=False,  # the sampler shuffles
        pin_memory=torch.cuda.is_available(),
        drop_last=True,
        sampler=DistributedSampler(train_ds, num_replicas=world_size, rank=rank),
    )
    test_loader = DataLoader(
        dataset=test_ds,
        batch_size=2,
        shuffle=False,
        sampler=DistributedSampler(test_ds, num_replicas=world_size, rank=rank,
                                   shuffle=False),
    )
    return train_loader, test_loader


# --8<-- [start:snapshot]
def save_snapshot(path, model, optimizer, epochs_done):
    """Everything a restarted job needs to go on after `epochs_done` epochs."""
    if dist.get_rank() == 0:  # the copies are identical: one rank writes
        snapshot = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "epochs_done": epochs_done}
        save_atomically(snapshot, path)  # a crash mid-write keeps the last snapshot
    dist.barrier()  # nobody goes on before the snapshot is complete


def load_snapshot(path, model, optimizer):
    """Resume from the snapshot at `path`, if any; return the epochs it has done."""
    # Rank 0 reads the file and sends it to every rank: other machines need no copy.
    box = [read_snapshot(path, model) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    snapshot = box[0]
    if snapshot is None:
        return 0  # no snapshot yet: a fresh start
    model.load_state_dict(snapshot["model"])
    optimizer.load_state_dict(snapshot["optimizer"])
    if dist.get_rank() == 0:
        note(f"resuming from {path} after epoch {snapshot['epochs_done']}")
    return snapshot["epochs_done"]
# --8<-- [end:snapshot]


# --8<-- [start:main]
def main(rank, local_rank, world_size, args):
    ddp_setup(rank, local_rank, world_size, args.backend, args.timeout)
    try:
        train(rank, local_rank, world_size, args)
    finally:
        destroy_process_group()  # leave the group cleanly, also after an error


def train(rank, local_rank, world_size, args):
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else "cpu"
    train_loader, test_loader = prepare_dataset(rank, world_size)

    torch.manual_seed(123)  # in every process: every run starts from the same weights
    model = NeuralNetwork(num_inputs=2, num_outputs=2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    epochs_done = load_snapshot(args.snapshot, model, optimizer)  # 0 on a fresh start

    if torch.cuda.is_available():
        model = DDP(model, device_ids=[local_rank])
    else:
        model = DDP(model)

    for epoch in range(epochs_done, args.epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        lines = []
        for batch_idx, (features, labels) in enumerate(train_loader):
            features, labels = features.to(device), labels.to(device)
            logits = model(features)
            loss = F.cross_entropy(logits, labels)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            lines.append(f"[rank {rank}] Epoch: {epoch + 1:03d}/{args.epochs:03d}"
                         f" | Batch {batch_idx + 1:03d}/{len(train_loader):03d}"
                         f" | Batchsize {labels.shape[0]:03d}"
                         f" | Train Loss: {loss:.2f}")
            inject_fault(args, rank, epoch, batch_idx)  # does nothing without --fault
        print_in_rank_order(lines)
        save_snapshot(args.snapshot, model.module, optimizer, epoch + 1)
# --8<-- [end:main]

    model.eval()
    own = {
        "Training": compute_accuracy(model.module, train_loader, device=device),
        "Test": compute_accuracy(model.module, test_loader, device=device),
    }
    exact = {
        "Training": exact_accuracy(model.module, train_loader.dataset, device),
        "Test": exact_accuracy(model.module, test_loader.dataset, device),
    }
    print_accuracy(rank, own, exact)

    if rank == 0:
        if args.save:
            save_atomically(model.module.state_dict(), args.save)
            note(f"Saved the final weights to {args.save}")
        if args.snapshot_is_default:  # the job is done: the next one starts fresh
            args.snapshot.unlink(missing_ok=True)


# --8<-- [start:launcher]
if __name__ == "__main__":
    # torchrun tells every process who it is; plain `python` makes a group of one.
    rank = int(os.environ.get("RANK", 0))  # global rank, unique across all machines
    local_rank = int(os.environ.get("LOCAL_RANK", 0))  # rank on this machine: its GPU
    world_size = int(os.environ.get("WORLD_SIZE", 1))  # processes on all machines

    with exit_on_error(rank):  # on an error: one line that names this rank, exit 1
        args = parse_args(prepare_dataset, launcher="torchrun",
                          world_size=world_size, local_rank=local_rank)
        # Only without torchrun: a group of one picks a free port; ranks started by hand
        # must all be given the same MASTER_ADDR and MASTER_PORT.
        set_master_address(check_port=rank == 0, pick_free_port=world_size == 1)
        if rank == 0:
            print_banner(args)
        main(rank, local_rank, world_size, args)
    exit_without_shutdown()  # done: skip interpreter shutdown, where Gloo can abort (see ddp_common)
# --8<-- [end:launcher]
