# Appendix A.9.3: training on several GPUs (or CPU processes) with
# DistributedDataParallel, one process per device, started by mp.spawn.
#
#   python scripts/DDP-script.py                 # one process per GPU, or 2 on a CPU
#   python scripts/DDP-script.py --world-size 4  # 4 processes
#   python scripts/DDP-script.py --help          # all options; --fault breaks a rank
#
# --8<-- [start:imports]
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

# Run from a checkout without installing: make the `snippets` package importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from snippets.appendix_a import NeuralNetwork, compute_accuracy  # noqa: E402
from snippets.ddp_common import (  # noqa: E402  (plumbing, not DDP itself)
    enlarged_toy_datasets, exact_accuracy, exit_without_shutdown, inject_fault, parse_args,
    print_accuracy, print_banner, print_in_rank_order, save_atomically, set_master_address,
    wait_for_ranks)
# --8<-- [end:imports]


# --8<-- [start:ddp_setup]
def ddp_setup(rank, world_size, backend, timeout):
    """Join the process group; returns once every rank has joined."""
    # The launcher (at the bottom) set MASTER_ADDR and MASTER_PORT, where rank 0 listens.
    if torch.cuda.is_available():
        torch.cuda.set_device(rank)  # this process uses GPU number `rank`, and only it
    init_process_group(
        backend=backend,  # "nccl" between GPUs, "gloo" between CPU processes
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout),  # give up on a missing or stuck rank
    )
# --8<-- [end:ddp_setup]


# --8<-- [start:prepare_dataset]
def prepare_dataset(rank, world_size):
    # Five samples are too few for eight ranks: use four noisy copies of the toy data
    # (20 training and 8 test samples), the same on every rank and in every run.
    train_ds, test_ds = enlarged_toy_datasets(factor=4)

    train_loader = DataLoader(
        dataset=train_ds,
        batch_size=2,
        shuffle=False,  # the sampler shuffles; the DataLoader must not do it as well
        pin_memory=torch.cuda.is_available(),
        drop_last=True,
        # This rank's share of every epoch, no sample shared with another rank:
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
# --8<-- [end:prepare_dataset]


# --8<-- [start:main]
def main(rank, world_size, args):
    """What every process runs; mp.spawn passes the rank (0, 1, ...) first."""
    ddp_setup(rank, world_size, args.backend, args.timeout)
    try:
        train(rank, world_size, args)
    finally:
        destroy_process_group()  # leave the group cleanly, also after an error
    exit_without_shutdown()  # done: skip interpreter shutdown, where Gloo can abort (see ddp_common)


def train(rank, world_size, args):
    device = torch.device("cuda", rank) if torch.cuda.is_available() else "cpu"
    train_loader, test_loader = prepare_dataset(rank, world_size)

    torch.manual_seed(123)  # in every process: every run starts from the same weights
    model = NeuralNetwork(num_inputs=2, num_outputs=2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    # The wrapper averages the gradients of all ranks in backward(), so the copies
    # stay identical. The network itself is now model.module.
    if torch.cuda.is_available():
        model = DDP(model, device_ids=[rank])
    else:
        model = DDP(model)  # on the CPU: no device_ids

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

            lines.append(f"[rank {rank}] Epoch: {epoch + 1:03d}/{args.epochs:03d}"
                         f" | Batch {batch_idx + 1:03d}/{len(train_loader):03d}"
                         f" | Batchsize {labels.shape[0]:03d}"
                         f" | Train Loss: {loss:.2f}")
            inject_fault(args, rank, epoch, batch_idx)  # does nothing without --fault
        print_in_rank_order(lines)  # rank 0 prints every rank's lines, rank by rank
# --8<-- [end:main]

    # --8<-- [start:accuracy]
    model.eval()
    own = {  # on this rank's shard; model.module, since evaluating needs no averaging
        "Training": compute_accuracy(model.module, train_loader, device=device),
        "Test": compute_accuracy(model.module, test_loader, device=device),
    }
    exact = {  # (correct, total) over every sample once, summed over the ranks
        "Training": exact_accuracy(model.module, train_loader.dataset, device),
        "Test": exact_accuracy(model.module, test_loader.dataset, device),
    }
    print_accuracy(rank, own, exact)
    # --8<-- [end:accuracy]

    if args.save and rank == 0:  # all ranks hold the same weights; one writes them
        save_atomically(model.module.state_dict(), args.save)
        print(f"Saved the final weights to {args.save}", file=sys.stderr)


# --8<-- [start:launcher]
if __name__ == "__main__":
    args = parse_args(prepare_dataset, launcher="spawn")  # a bad value: exit, say why
    set_master_address()  # MASTER_ADDR/MASTER_PORT if set, else here and a free port
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # as torchrun does: share the cores
    print_banner(args)

    # Start one process per rank; each runs main(rank, args.world_size, args).
    context = mp.spawn(main, args=(args.world_size, args), nprocs=args.world_size,
                       join=False)
    wait_for_ranks(context)  # if a rank fails: stop the others, say why, exit 1
# --8<-- [end:launcher]
