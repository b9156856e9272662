# First on the PYTHONPATH of every DDP job the tests launch (ddp_harness.run_job). Each rank writes
# whole lines: torchrun starts its ranks with `python -u`, where `print` writes a line's pieces
# apart, and another rank's line can fall between them. Then the job's own sitecustomize, if its
# PYTHONPATH has one (the fault injection, or the checks of `alone`), is imported as usual.
import importlib
import os
import sys

sys.stdout.reconfigure(line_buffering=True, write_through=False)
sys.path = [p for p in sys.path if os.path.abspath(p) != os.path.dirname(os.path.abspath(__file__))]
del sys.modules["sitecustomize"]
importlib.import_module("sitecustomize")
