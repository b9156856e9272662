# With FAULT=raise (the fault injection's default rank and step), stages the race a failing run can meet: the rank
# that raises lingers 10 s at exit, and its partner raises a second later, standing in for the error it gets once
# the failed rank's connections close, so join() sees the partner end first.
import os
import runpy
from pathlib import Path

if os.environ.get("FAULT") == "raise":
    import atexit
    import time

    import torch.distributed as dist
    from torch.optim.optimizer import register_optimizer_step_post_hook

    steps = 0

    def stage(optimizer, args, kwargs):  # registered first, so it runs before the fault's hook
        global steps
        steps += 1
        if steps != 6:  # the step after which the fault injection's rank raises
            return
        if dist.get_rank() == dist.get_world_size() - 1:
            atexit.register(time.sleep, 10)
        else:
            time.sleep(1)
            raise RuntimeError(f"rank {dist.get_rank()} lost its partner")

    register_optimizer_step_post_hook(stage)
runpy.run_path(str(Path(__file__).parents[2] / "scripts" / "fault-injection" / "sitecustomize.py"))
