"""A.2 Understanding tensors: ranks, data types and the everyday operations."""

# --8<-- [start:create_tensors]
import torch
import numpy as np

# create a 0D tensor (scalar) from a Python integer
tensor0d = torch.tensor(1)

# create a 1D tensor (vector) from a Python list
tensor1d = torch.tensor([1, 2, 3])

# create a 2D tensor from a nested Python list
tensor2d = torch.tensor([[1, 2],
                         [3, 4]])

# create a 3D tensor from a nested Python list
tensor3d_1 = torch.tensor([[[1, 2], [3, 4]],
                           [[5, 6], [7, 8]]])

# create a 3D tensor from NumPy array
ary3d = np.array([[[1, 2], [3, 4]],
                  [[5, 6], [7, 8]]])
tensor3d_2 = torch.tensor(ary3d)  # Copies NumPy array
tensor3d_3 = torch.from_numpy(ary3d)  # Shares memory with NumPy array
# --8<-- [end:create_tensors]


# --8<-- [start:tensor_ranks]
for t in (tensor0d, tensor1d, tensor2d, tensor3d_1):
    print(t.ndim, tuple(t.shape))
# --8<-- [end:tensor_ranks]


# --8<-- [start:print_tensor3d]
print(tensor3d_1)
# --8<-- [end:print_tensor3d]


# --8<-- [start:numpy_copy]
ary3d[0, 0, 0] = 999
print(tensor3d_2) # remains unchanged
# --8<-- [end:numpy_copy]


# --8<-- [start:numpy_share]
print(tensor3d_3) # changes because of memory sharing
# --8<-- [end:numpy_share]


# --8<-- [start:integer_dtype]
tensor1d = torch.tensor([1, 2, 3])
print(tensor1d.dtype)
# --8<-- [end:integer_dtype]


# --8<-- [start:float_dtype]
floatvec = torch.tensor([1.0, 2.0, 3.0])
print(floatvec.dtype)
# --8<-- [end:float_dtype]


# --8<-- [start:convert_dtype]
floatvec = tensor1d.to(torch.float32)
print(floatvec.dtype)
# --8<-- [end:convert_dtype]


# --8<-- [start:tensor2d]
tensor2d = torch.tensor([[1, 2, 3],
                         [4, 5, 6]])
print(tensor2d)
# --8<-- [end:tensor2d]


# --8<-- [start:shape]
print(tensor2d.shape)
# --8<-- [end:shape]


# --8<-- [start:reshape]
print(tensor2d.reshape(3, 2))
# --8<-- [end:reshape]


# --8<-- [start:view]
print(tensor2d.view(3, 2))
# --8<-- [end:view]


# --8<-- [start:view_fails]
transposed = tensor2d.T  # same memory, read in a different order
print(transposed.is_contiguous())

try:
    transposed.view(6)
except RuntimeError as error:
    print("view failed:", str(error).split(".")[0])

print(transposed.reshape(6))  # reshape copies when it has to
print(transposed.contiguous().view(6))  # a contiguous copy views fine
# --8<-- [end:view_fails]


# --8<-- [start:transpose]
print(tensor2d.T)
# --8<-- [end:transpose]


# --8<-- [start:matmul]
print(tensor2d.matmul(tensor2d.T))
# --8<-- [end:matmul]


# --8<-- [start:matmul_operator]
print(tensor2d @ tensor2d.T)
# --8<-- [end:matmul_operator]
