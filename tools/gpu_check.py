"""`make gpu-check`: on a CUDA machine, record what only a GPU shows, all or nothing: the pages' GPU outputs
(snippets/outputs/gpu/); DDP-script.py with NCCL on every visible GPU (at most 8), which must train fully and save a
Gloo run's weights within 1e-5; with 2 GPUs, ddp-inside.py with NCCL, which must keep DDP's promises."""

import datetime
import json
import os
import sys
import tempfile

import torch

from tools import ROOT, record
from tools.ddp_runs import ddp_environment as environment
from tools.ddp_runs import in_rank_order, inside_problems, trained_fully
from tools.page_runner import TIME_LIMIT, TimedOut, describe_machine, run, write_files
from tools.store import SCRIPT_OUTPUTS

GPU_RUNS = SCRIPT_OUTPUTS / "gpu"  # the DDP scripts on GPUs (the pages' GPU outputs: store.GPU_OUTPUTS)


def run_script(what, arguments, env):
    """What `python ARGUMENTS` printed, run in the repository; or exit, saying how `what` failed."""
    try:
        status, stdout, stderr = run([sys.executable, *arguments], TIME_LIMIT, cwd=ROOT, env=env)
    except TimedOut as stopped:
        sys.exit(f"gpu-check: {what} was {stopped}")
    if status != 0:
        sys.exit(f"gpu-check: {what} failed (exit status {status}):\n{stdout}{stderr}")
    return stdout


def gpu_environment():
    """ddp_environment(), which hides the GPUs, with those the caller lets it see."""
    every = ",".join(map(str, range(torch.cuda.device_count())))
    return environment(CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", every))


def check_ddp_with_nccl():
    """Train with NCCL and with Gloo (on the CPU); compare the weights; (the NCCL run's output, its command)."""
    world_size = min(torch.cuda.device_count(), 8)  # the toy data feeds at most 8 ranks
    command = ["scripts/DDP-script.py", "--world-size", str(world_size)]
    with tempfile.TemporaryDirectory() as tmp:
        nccl = in_rank_order(run_script("the nccl run", [*command, "--save", f"{tmp}/nccl.pt"], gpu_environment()))
        run_script("the gloo run", [*command, "--save", f"{tmp}/gloo.pt"], environment())
        if "with nccl" not in nccl or not trained_fully(nccl, world_size):
            sys.exit(f"gpu-check: the NCCL run did not train to full accuracy:\n{nccl}")
        nccl_weights = torch.load(f"{tmp}/nccl.pt", map_location="cpu", weights_only=True)
        gloo_weights = torch.load(f"{tmp}/gloo.pt", map_location="cpu", weights_only=True)
    torch.testing.assert_close(nccl_weights, gloo_weights, atol=1e-5, rtol=1e-5,  # names the tensor that differs
                               msg=lambda message: f"gpu-check: NCCL and Gloo weights differ: {message}")
    print(f"gpu-check: NCCL on {world_size} GPU(s) trained and matches Gloo within 1e-5")
    return nccl, f"python {' '.join(command)}"


def check_ddp_inside():
    """ddp-inside.py with NCCL: (its output, its command); None with fewer than 2 GPUs, one a process."""
    if (gpus := torch.cuda.device_count()) < 2:
        print(f"gpu-check: ddp-inside.py needs 2 GPUs for NCCL, one a process, and this machine shows {gpus}: "
              "not run with NCCL")
        return None
    stdout = run_script("ddp-inside.py with NCCL", ["scripts/ddp-inside.py"], gpu_environment())
    if not stdout.startswith("DDP: 2 processes, nccl\n"):
        sys.exit(f"gpu-check: ddp-inside.py did not run with NCCL:\n{stdout}")
    if problems := inside_problems(stdout):
        sys.exit("gpu-check: ddp-inside.py with NCCL broke DDP's promises:\n" + "\n".join(problems) + f"\n{stdout}")
    print("gpu-check: ddp-inside.py with NCCL: the same weights, the mean of the gradients")
    return stdout, "python scripts/ddp-inside.py"


def main():
    if not torch.cuda.is_available():
        sys.exit(f"gpu-check needs a CUDA GPU, and torch {torch.__version__} sees none on this machine; "
                 "run `make gpu-check` on a machine with an NVIDIA GPU and a CUDA build of torch.")
    facts = describe_machine()
    label = {"gpu": facts["gpu"], "gpus": len(facts["gpus"]), **{key: facts[key] for key in ("torch", "cuda", "nccl")},
             "python": facts["python"], "date": datetime.date.today().isoformat()}
    # The pages' device outputs (shown beside the CPU ones), then DDP with NCCL; recorded: {file: its command}.
    files = record.gpu_files(record.record_gpu())
    recorded = {str(path.relative_to(ROOT)): "python -m tools.record --gpu" for path in files}
    files[GPU_RUNS / "DDP-script-nccl.txt"], recorded["DDP-script-nccl.txt"] = check_ddp_with_nccl()
    if inside := check_ddp_inside():
        files[GPU_RUNS / "ddp-inside-nccl.txt"], recorded["ddp-inside-nccl.txt"] = inside
    files[GPU_RUNS / "recorded-on.json"] = json.dumps({**label, "recorded": recorded}, indent=2) + "\n"
    write_files(files)  # all or nothing
    print("gpu-check: recorded" + "".join(f"\n  {path.relative_to(ROOT)}" for path in files))


if __name__ == "__main__":
    main()
