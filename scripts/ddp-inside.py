# Ours (A.9.3): DDP seen from the inside, on the book's toy data and
# network (ToyDataset and NeuralNetwork: Sebastian Raschka, Apache License
# 2.0, from "Build a Large Language Model From Scratch", Appendix A).
"""Two processes train the book's toy network with DDP, as the book's
DDP-script.py does (3 epochs of one step each), and rank 0 prints what
every rank held: its weights before and after DDP(...), then at each step
the examples it got, its own gradient of the output layer's bias, the
average that the all-reduce gave back, and a checksum of its weights.

    python ddp-inside.py    # NCCL on 2 GPUs, else Gloo on the CPU
"""

import os
import platform
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

WORLD_SIZE = 2


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


def checksum(model):
    """The sum of all the weights, to 4 decimals (its last digits would
    differ from one kind of CPU to another)."""
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    return f"{weights.double().sum().item():+.4f}"


def text(tensor, digits):  # a string per number
    return [f"{x:+.{digits}f}" for x in tensor.tolist()]


def watch(state, bucket):
    """A DDP communication hook. During backward(), DDP calls it with each
    bucket of gradients (one flat tensor) as soon as that bucket's are all
    computed, and writes what the returned future holds into the parameters'
    .grad. This one runs torch's stock allreduce_hook (the same result as DDP
    with no hook) and keeps the bias's gradient as the bucket holds it
    before, and as the future holds it after."""
    start = 0  # where the bias's gradient lies in the bucket
    for param, grad in zip(bucket.parameters(), bucket.gradients()):
        if param is state["bias"]:
            break
        start += grad.numel()
    else:  # not in this bucket
        return default_hooks.allreduce_hook(None, bucket)
    part = slice(start, start + state["bias"].numel())
    own = bucket.buffer()[part].clone()  # this rank's, before the all-reduce

    def after(future):
        averaged = future.value()  # the bucket: / 2, summed over ranks
        state["seen"].append((own, averaged[part].clone()))
        return averaged

    return default_hooks.allreduce_hook(None, bucket).then(after)


def train(rank, device):
    """Train as the book does. What this rank saw: (title, {label: a string
    a line}) for each section: before and after DDP(...), each step."""
    X_train = torch.tensor([
        [-1.2, 3.1],
        [-0.9, 2.9],
        [-0.5, 2.6],
        [2.3, -1.1],
        [2.7, -1.5]
    ])
    y_train = torch.tensor([0, 0, 0, 1, 1])
    dataset = ToyDataset(X_train, y_train)
    sampler = DistributedSampler(dataset)  # the same shuffle in every rank
    loader = DataLoader(dataset, batch_size=2, shuffle=False,
                        drop_last=True, sampler=sampler)

    # Each rank draws its own first weights, as the book's processes do
    # (never seeded); seeded by rank, so that every run prints the same.
    torch.manual_seed(rank)
    model = NeuralNetwork(num_inputs=2, num_outputs=2).to(device)
    bias = model.layers[-1].bias  # the output layer's: 2 numbers
    seen = [("before DDP(...):", {"checksum": [checksum(model)],
                                  "b": text(bias, 4)})]
    model = DDP(model, device_ids=[rank] if device.type == "cuda" else None)
    seen.append(("after DDP(...):", {"checksum": [checksum(model)],
                                     "b": text(bias, 4)}))  # rank 0's
    state = {"bias": bias, "seen": []}
    model.register_comm_hook(state, watch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    for epoch in range(3):
        sampler.set_epoch(epoch)
        examples = list(sampler)  # this rank's, in the loader's order
        for step, (features, labels) in enumerate(loader):
            features, labels = features.to(device), labels.to(device)
            loss = F.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()  # DDP calls watch() in here
            optimizer.step()
            own, averaged = state["seen"].pop()
            batch = examples[2 * step:2 * step + 2]  # batch size 2
            seen.append((f"step {len(seen) - 1} (epoch {epoch + 1}):", {
                "examples": [", ".join(map(str, batch))],
                "own b.grad": text(own, 7), "all-reduce": text(averaged, 7),
                "checksum": [checksum(model)]}))
    return seen


def show(seen, backend):
    """Print every rank's sections side by side, in short lines."""
    def row(label, cells):  # 11 characters, then 12 a rank
        line = f"{label:11}" + "".join(f"{cell:12}" for cell in cells)
        print(line.rstrip())

    print(f"DDP: {WORLD_SIZE} processes, {backend}")
    print("b: the output layer's bias")
    print("checksum: the sum of all the weights")
    row("", [f"rank {rank}" for rank in range(WORLD_SIZE)])
    for sections in zip(*seen):  # a section, as each rank saw it
        print(sections[0][0])
        for label in sections[0][1]:
            cells = [rows[label] for _, rows in sections]
            for line, strings in enumerate(zip(*cells)):
                row(label if line == 0 else "", strings)


def main(rank):
    cuda = torch.cuda.device_count() >= WORLD_SIZE  # one GPU a process
    backend = "nccl" if cuda else "gloo"
    if platform.system() == "Windows":  # no NCCL there, and no libuv
        os.environ["USE_LIBUV"] = "0"
        backend = "gloo"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)  # first, so that NCCL starts on it
    dist.init_process_group(backend, rank=rank, world_size=WORLD_SIZE)
    try:
        seen = train(rank, device)
        everyone = [None] * WORLD_SIZE if rank == 0 else None
        dist.gather_object(seen, everyone, dst=0)  # to rank 0, to print
        if rank == 0:
            show(everyone, backend)
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # skip the interpreter's shutdown, where Gloo may abort


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "localhost")
    with socket.socket() as s:  # a free port for rank 0 to listen on
        s.bind(("", 0))
        os.environ.setdefault("MASTER_PORT", str(s.getsockname()[1]))
    mp.spawn(main, nprocs=WORLD_SIZE)
