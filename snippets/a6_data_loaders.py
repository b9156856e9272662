"""A.6 Setting up efficient data loaders: Dataset, DataLoader, shuffling and
batching."""

import torch

from snippets.appendix_a import (  # shown on the page
    X_test, X_train, ToyDataset, train_ds, y_test, y_train,
)

# --8<-- [start:plot_toy_data]
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(5, 3.4), layout="constrained")
for label, colour in [(0, "tab:blue"), (1, "tab:orange")]:
    train, test = X_train[y_train == label], X_test[y_test == label]
    ax.scatter(train[:, 0], train[:, 1], s=60, color=colour,
               label=f"class {label}, training")
    ax.scatter(test[:, 0], test[:, 1], s=60, facecolors="none",
               edgecolors=colour, linewidths=2, label=f"class {label}, test")
ax.set(xlabel="feature 1", ylabel="feature 2")
ax.legend()
fig.savefig("toy-data.png")  # a file to keep
plt.show()                   # and a window, where there is a screen
# --8<-- [end:plot_toy_data]


# --8<-- [start:dataset_length]
print(len(train_ds))
# --8<-- [end:dataset_length]


# --8<-- [start:shuffled_loader]
from torch.utils.data import DataLoader

torch.manual_seed(123)

train_loader = DataLoader(
    dataset=train_ds,
    batch_size=2,
    shuffle=True,
    num_workers=0
)
# --8<-- [end:shuffled_loader]


# --8<-- [start:test_loader]
test_ds = ToyDataset(X_test, y_test)

test_loader = DataLoader(
    dataset=test_ds,
    batch_size=2,
    shuffle=False,
    num_workers=0
)
# --8<-- [end:test_loader]


# --8<-- [start:shuffled_batches]
for idx, (x, y) in enumerate(train_loader):
    print(f"Batch {idx+1}:", x, y)
# --8<-- [end:shuffled_batches]


# --8<-- [start:drop_last]
train_loader = DataLoader(
    dataset=train_ds,
    batch_size=2,
    shuffle=True,
    num_workers=0,
    drop_last=True
)
# --8<-- [end:drop_last]


# --8<-- [start:drop_last_batches]
for idx, (x, y) in enumerate(train_loader):
    print(f"Batch {idx+1}:", x, y)
# --8<-- [end:drop_last_batches]


# --8<-- [start:num_workers]
train_loader_with_workers = DataLoader(
    dataset=train_ds,
    batch_size=2,
    shuffle=True,
    num_workers=2,            # two background processes prepare batches
    persistent_workers=True,  # keep them alive between epochs
    drop_last=True,
)
# --8<-- [end:num_workers]
