"""A.5 Implementing multilayer neural networks: NeuralNetwork, its parameters,
a forward pass."""

from snippets.appendix_a import NeuralNetwork  # the page shows its definition

# --8<-- [start:print_model]
import torch

model = NeuralNetwork(50, 3)
print(model)
# --8<-- [end:print_model]


# --8<-- [start:count_parameters]
num_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
print("Total number of trainable model parameters:", num_params)
# --8<-- [end:count_parameters]


# --8<-- [start:unseeded_weight]
# Fixed-point notation, so that the layout never depends on the draw:
torch.set_printoptions(sci_mode=False)
print(model.layers[0].weight)
torch.set_printoptions(sci_mode=None)   # back to the default
# --8<-- [end:unseeded_weight]


# --8<-- [start:seeded_weight]
torch.manual_seed(123)
model = NeuralNetwork(50, 3)
print(model.layers[0].weight)
# --8<-- [end:seeded_weight]


# --8<-- [start:weight_shape]
print(model.layers[0].weight.shape)
# --8<-- [end:weight_shape]


# --8<-- [start:forward_pass]
torch.manual_seed(123)
X = torch.rand((1, 50))
out = model(X)
print(out)
# --8<-- [end:forward_pass]


# --8<-- [start:no_grad]
with torch.no_grad():
    out = model(X)
print(out)
# --8<-- [end:no_grad]


# --8<-- [start:softmax]
with torch.no_grad():
    out = torch.softmax(model(X), dim=1)
print(out)
# --8<-- [end:softmax]
