"""A.5 Implementing multilayer neural networks: NeuralNetwork, its parameters,
a forward pass."""

import torch

from snippets.appendix_a import NeuralNetwork  # the page shows its definition

# --8<-- [start:new_model]
model = NeuralNetwork(50, 3)
# --8<-- [end:new_model]


# --8<-- [start:print_model]
print(model)
# --8<-- [end:print_model]


# --8<-- [start:count_parameters]
num_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
print("Total number of trainable model parameters:", num_params)
# --8<-- [end:count_parameters]


# --8<-- [start:fixed_point]
# Print in fixed-point notation (0.0001, not 1.0000e-04): with random
# weights, the default picks one notation or the other by chance
torch.set_printoptions(sci_mode=False)
# --8<-- [end:fixed_point]


# --8<-- [start:unseeded_weight]
print(model.layers[0].weight)
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
