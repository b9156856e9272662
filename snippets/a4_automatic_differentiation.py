"""A.4 Automatic differentiation made easy: gradients with grad and backward."""

import torch

# --8<-- [start:autograd_grad]
import torch.nn.functional as F
from torch.autograd import grad

y = torch.tensor([1.0])
x1 = torch.tensor([1.1])
w1 = torch.tensor([2.2], requires_grad=True)
b = torch.tensor([0.0], requires_grad=True)

z = x1 * w1 + b
a = torch.sigmoid(z)

loss = F.binary_cross_entropy(a, y)

grad_L_w1 = grad(loss, w1, retain_graph=True)
grad_L_b = grad(loss, b, retain_graph=True)

print(grad_L_w1)
print(grad_L_b)
# --8<-- [end:autograd_grad]


# --8<-- [start:loss_grad_fn]
print(loss)
# --8<-- [end:loss_grad_fn]


# --8<-- [start:backward]
loss.backward()

print(w1.grad)
print(b.grad)
# --8<-- [end:backward]


# --8<-- [start:gradients_accumulate]
z = x1 * w1 + b                      # a second forward pass ...
loss = F.binary_cross_entropy(torch.sigmoid(z), y)
loss.backward()                      # ... and backward pass add to .grad

print(w1.grad)                       # twice the gradient from above

w1.grad = None                       # what optimizer.zero_grad() does
b.grad = None
loss = F.binary_cross_entropy(torch.sigmoid(x1 * w1 + b), y)
loss.backward()
print(w1.grad)                       # the true gradient again
# --8<-- [end:gradients_accumulate]
