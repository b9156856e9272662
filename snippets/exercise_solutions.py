"""Solutions to the exercises of Appendix A."""

# --8<-- [start:a1_python_version]
import sys

print(sys.version_info >= (3, 10))
# --8<-- [end:a1_python_version]


# --8<-- [start:a2_versions]
from importlib.metadata import PackageNotFoundError, version

# The appendix's code needs torch, numpy and, for its plots, matplotlib;
# JupyterLab opens its notebooks on your own machine.
packages = ["torch", "numpy", "matplotlib", "jupyterlab"]
for package in packages:
    try:
        print(f"{package:20} {version(package)}")
    except PackageNotFoundError:
        print(f"{package:20} not installed")
# --8<-- [end:a2_versions]


from snippets.appendix_a import NeuralNetwork

# --8<-- [start:a3_parameter_count]
model = NeuralNetwork(2, 2)

num_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
print("Total number of trainable model parameters:", num_params)
# --8<-- [end:a3_parameter_count]


# --8<-- [start:a3_parameter_breakdown]
for name, parameter in model.named_parameters():
    print(f"{name:16} {str(tuple(parameter.shape)):10} {parameter.numel():4d}")
# --8<-- [end:a3_parameter_breakdown]


# --8<-- [start:a4_matrices]
import torch

a = torch.rand(100, 200)
b = torch.rand(200, 300)
# --8<-- [end:a4_matrices]


# --8<-- [start:a4_matmul_timing]
import timeit

runs = 1000
seconds = timeit.timeit(lambda: a @ b, number=runs) / runs
threads = torch.get_num_threads()  # the CPU cores torch computes with
print(f"CPU: {seconds * 1e6:8.1f} µs per product (torch threads: {threads})")

if torch.cuda.is_available():
    a_gpu, b_gpu = a.to("cuda"), b.to("cuda")

    def product_on_gpu():
        a_gpu @ b_gpu
        # GPU kernels run asynchronously: wait for the result
        torch.cuda.synchronize()

    product_on_gpu()  # warm-up: the first call pays for CUDA initialization
    seconds = timeit.timeit(product_on_gpu, number=runs) / runs
    print(f"GPU: {seconds * 1e6:8.1f} µs per product")
else:
    print("GPU: none available")
# --8<-- [end:a4_matmul_timing]
