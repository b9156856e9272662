"""A.9.1 and A.9.2: device-agnostic tensors and training on one GPU."""

from snippets.appendix_a import (  # the page shows these on A.5 to A.7
    NeuralNetwork, compute_accuracy, test_loader, train_loader,
)

# --8<-- [start:pick_device]
import torch

if torch.cuda.is_available():
    device = torch.device("cuda")  # an NVIDIA GPU
elif torch.backends.mps.is_available():
    device = torch.device("mps")   # an Apple silicon GPU
else:
    device = torch.device("cpu")
print(device)
# --8<-- [end:pick_device]


# --8<-- [start:add_on_cpu]
tensor_1 = torch.tensor([1., 2., 3.])
tensor_2 = torch.tensor([4., 5., 6.])

print(tensor_1 + tensor_2)
# --8<-- [end:add_on_cpu]


# --8<-- [start:add_on_device]
tensor_1 = tensor_1.to(device)
tensor_2 = tensor_2.to(device)

print(tensor_1 + tensor_2)
# --8<-- [end:add_on_device]


# --8<-- [start:devices_must_match]
# Without a GPU, the "meta" device (shapes, no data) stands in for one.
other_device = "cpu" if device.type != "cpu" else "meta"
tensor_1 = tensor_1.to(other_device)
try:
    print(tensor_1 + tensor_2)
except RuntimeError as error:
    print("RuntimeError:", error)
# --8<-- [end:devices_must_match]


# --8<-- [start:train_on_device]
import torch.nn.functional as F


torch.manual_seed(123)
model = NeuralNetwork(num_inputs=2, num_outputs=2)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu") # NEW
model.to(device) # NEW

optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

num_epochs = 3

for epoch in range(num_epochs):

    model.train()
    for batch_idx, (features, labels) in enumerate(train_loader):

        features, labels = features.to(device), labels.to(device) # NEW
        logits = model(features)
        loss = F.cross_entropy(logits, labels) # Loss function

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        ### LOGGING
        print(f"Epoch: {epoch+1:03d}/{num_epochs:03d}"
              f" | Batch {batch_idx+1:03d}/{len(train_loader):03d}"
              f" | Train/Val Loss: {loss:.2f}")

    model.eval()
    # Optional model evaluation
# --8<-- [end:train_on_device]


# --8<-- [start:accuracy_on_device]
print(compute_accuracy(model, train_loader, device=device))
# --8<-- [end:accuracy_on_device]


# --8<-- [start:test_accuracy_on_device]
print(compute_accuracy(model, test_loader, device=device))
# --8<-- [end:test_accuracy_on_device]


# --8<-- [start:to_on_a_tensor]
features = torch.tensor([[1.0, 2.0]])
features.to(device)             # a tensor on `device`; `features` stays put
print(features.device)
features = features.to(device)  # tensors must be reassigned
print(features.device)
print(features.to(device) is features)  # already there: the same tensor
# --8<-- [end:to_on_a_tensor]
