# Makes one rank of a DDP run fail, from outside the script: Python imports
# this file in every process that has its folder on PYTHONPATH, and it hooks
# the optimizer step. Nothing in the DDP scripts knows about it.
#   PYTHONPATH=fault-injection FAULT=stall torchrun ... DDP-script-torchrun.py
# FAULT: raise, kill or stall. FAULT_RANK: which rank (default: the last).
# FAULT_STEP: after which optimizer step (default 6, the first of epoch 2 with
# 2 ranks). Under torchrun only the first attempt fails, so a restart recovers.
import os

if (os.environ.get("FAULT")
        and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"):
    import signal
    import sys
    import time

    import torch.distributed as dist
    from torch.optim.optimizer import register_optimizer_step_post_hook

    steps = 0

    def fail(optimizer, args, kwargs):
        global steps
        steps += 1
        rank, last = dist.get_rank(), dist.get_world_size() - 1
        if (rank != int(os.environ.get("FAULT_RANK", last))
                or steps != int(os.environ.get("FAULT_STEP", "6"))):
            return
        fault = os.environ["FAULT"]
        print(f"[rank {rank}] fault {fault}: after step {steps}",
              file=sys.stderr, flush=True)
        if fault == "raise":
            raise RuntimeError(f"rank {rank} raised this error on purpose")
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(24 * 3600)  # "stall": as a deadlocked rank would

    register_optimizer_step_post_hook(fail)
