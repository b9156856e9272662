"""A.9.1 and A.9.2: device-agnostic tensors and training NeuralNetwork on one GPU."""

from snippets.appendix_a import (  # the page shows these on A.5 to A.7
    NeuralNetwork, compute_accuracy, test_loader, train_loader, train_model,
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


# --8<-- [start:add_on_device]
tensor_1 = torch.tensor([1.0, 2.0, 3.0]).to(device)
tensor_2 = torch.tensor([4.0, 5.0, 6.0]).to(device)
print(tensor_1 + tensor_2)
# --8<-- [end:add_on_device]


# --8<-- [start:devices_must_match]
# Without a GPU, the "meta" device (shapes without data) stands in for one.
other_device = torch.device("cpu") if device.type != "cpu" else torch.device("meta")
tensor_on_other = torch.tensor([4.0, 5.0, 6.0]).to(other_device)
try:
    tensor_1 + tensor_on_other
except RuntimeError as error:
    print("RuntimeError:", error)
# --8<-- [end:devices_must_match]


# --8<-- [start:to_returns_a_copy]
features = torch.tensor([[1.0, 2.0]])
features.to(device)             # returns a moved copy; `features` itself stays put
print(features.device)
features = features.to(device)  # tensors must be reassigned
print(features.device)
# --8<-- [end:to_returns_a_copy]


# --8<-- [start:train_on_device]
torch.manual_seed(123)
model = NeuralNetwork(num_inputs=2, num_outputs=2)
model.to(device)  # moves the parameters in place: no reassignment needed for modules
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

train_model(model, train_loader, optimizer, num_epochs=3, device=device)
# --8<-- [end:train_on_device]


# --8<-- [start:accuracy_on_device]
print(compute_accuracy(model, train_loader, device=device))
print(compute_accuracy(model, test_loader, device=device))
# --8<-- [end:accuracy_on_device]
