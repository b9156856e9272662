# On the PYTHONPATH of a DDP script run alone (ddp_harness.run_alone): this project's packages cannot be imported,
# and a process that ends well (os._exit(0), as the scripts do) without destroy_process_group() says so and fails.
import os
import sys


class Blocked:  # asked before the other finders
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("snippets", "tools"):
            raise ImportError(f"a DDP script must run alone, without this project's {name}")


def checked_exit(code, exit=os._exit):
    dist = sys.modules.get("torch.distributed")
    if code == 0 and dist is not None and dist.is_available() and dist.is_initialized():
        print("the process group was not destroyed before the process exited", file=sys.stderr, flush=True)
        code = 3
    exit(code)


sys.meta_path.insert(0, Blocked())
os._exit = checked_exit
