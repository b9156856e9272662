"""A.6 Setting up efficient data loaders: Dataset, DataLoader, shuffling and batching."""

from snippets.appendix_a import X_test, X_train, ToyDataset, y_test, y_train  # shown on the page

# --8<-- [start:dataset_length]
train_ds = ToyDataset(X_train, y_train)
test_ds = ToyDataset(X_test, y_test)

print(len(train_ds))
# --8<-- [end:dataset_length]


# --8<-- [start:shuffled_batches]
import torch
from torch.utils.data import DataLoader

torch.manual_seed(123)

train_loader = DataLoader(dataset=train_ds, batch_size=2, shuffle=True, num_workers=0)

for idx, (x, y) in enumerate(train_loader):
    print(f"Batch {idx+1}:", x, y)
# --8<-- [end:shuffled_batches]


from snippets.appendix_a import train_loader

# --8<-- [start:drop_last_batches]
torch.manual_seed(123)

for idx, (x, y) in enumerate(train_loader):
    print(f"Batch {idx+1}:", x, y)
# --8<-- [end:drop_last_batches]


# --8<-- [start:num_workers]
train_loader_with_workers = DataLoader(
    dataset=train_ds,
    batch_size=2,
    shuffle=True,
    num_workers=2,            # two background processes prepare the next batches
    persistent_workers=True,  # keep them alive between epochs
    drop_last=True,
)
# --8<-- [end:num_workers]
