"""A.1 What is PyTorch? Checking the installation."""

# --8<-- [start:version]
import torch

print(torch.__version__)
# --8<-- [end:version]


# --8<-- [start:cuda_available]
print(torch.cuda.is_available())
# --8<-- [end:cuda_available]


# --8<-- [start:mps_available]
print(torch.backends.mps.is_available())
# --8<-- [end:mps_available]
