"""A.3 Seeing models as computation graphs: a logistic regression forward
pass."""

import torch

# --8<-- [start:forward_pass]
import torch.nn.functional as F

y = torch.tensor([1.0])  # true label
x1 = torch.tensor([1.1]) # input feature
w1 = torch.tensor([2.2]) # weight parameter
b = torch.tensor([0.0])  # bias unit

z = x1 * w1 + b          # net input
a = torch.sigmoid(z)     # activation & output

loss = F.binary_cross_entropy(a, y)
print(loss)
# --8<-- [end:forward_pass]
