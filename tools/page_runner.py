"""Run a page's program alone, compare what it prints, say what the machine is.

check-appendix-a.py carries this code: the standard library only (psutil where
installed), 80 characters a line."""

import concurrent.futures
import contextlib
import difflib
import io
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import types
import uuid
from pathlib import Path

TAG = "PAGE_RUNNER_GROUPS"  # the groups a process belongs to, inherited
TIME_LIMIT = 300  # seconds: the tools' limit on one run, a page or a script
RUN_BLOCKS = "--run-blocks"  # run_page's child: this file, or one carrying it
OWN_GROUP = ({"start_new_session": True} if os.name == "posix" else
             {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP})
# The groups now running, and whether a stop has come (in_parallel ends them).
running, lock, stopping = set(), threading.Lock(), threading.Event()


class Failed(Exception):  # a command or page that ended badly; its `stderr`
    def __init__(self, message, stderr=""):
        super().__init__(message)
        self.stderr = stderr


class TimedOut(Failed):
    pass


# ---- process groups -----------------------------------------------------

@contextlib.contextmanager
def process_group(command, **popen):
    """`command` in a group of its own, its tag in the environment of all it
    starts: however the caller leaves, all are ended."""
    tag, process = uuid.uuid4().hex, None
    env = dict(popen.pop("env", None) or os.environ)
    env[TAG] = f"{env.get(TAG, '')} {tag}"
    try:
        with lock:
            if stopping.is_set():
                raise Failed("stopped before it started")
            process = subprocess.Popen(command, env=env, **OWN_GROUP, **popen)
            process.tag = tag
            running.add(process)
        yield process
    finally:
        if process:
            end_group(process)
            process.wait()
            with lock:
                running.discard(process)


def end_group(process):
    """End `process`'s group, and its tagged processes (torchrun's ranks
    run in sessions of their own)."""
    with contextlib.suppress(OSError):  # it has ended already
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    for pid in tagged(process.tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def tagged(tag):
    """{pid: command line} of the running processes tagged `tag`, by psutil."""
    try:
        import psutil
    except ImportError:
        return {}
    return {process.pid: " ".join(process.info["cmdline"] or [])
            for process in psutil.process_iter(["environ", "cmdline", "status"])
            if tag in (process.info["environ"] or {}).get(TAG, "").split()
            and process.info["status"] != psutil.STATUS_ZOMBIE}


def run(command, timeout, **popen):
    """(exit status, stdout, stderr) of `command`, in a group of its own."""
    with process_group(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, text=True, errors="replace",
                       **popen) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimedOut(f"still running after {timeout:g} s, so it was "
                           "stopped") from None
    return child.returncode, stdout, stderr


def in_parallel(function, items, jobs):
    """{item: function(item)}, `jobs` at a time; a failure or a stop ends
    them all. Short waits let a signal be handled at once (Windows too)."""
    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    futures = {item: pool.submit(function, item) for item in items}
    try:
        waiting = futures.values()
        while waiting:
            done, waiting = concurrent.futures.wait(
                waiting, 0.2, concurrent.futures.FIRST_EXCEPTION)
            for future in done:
                future.result()  # a failure, at once
        return {item: future.result() for item, future in futures.items()}
    except BaseException:  # end every group now running, and start no more
        with lock:
            stopping.set()
            for process in list(running):
                end_group(process)
        raise
    finally:
        pool.shutdown(cancel_futures=True)
        stopping.clear()


# ---- a page's program ---------------------------------------------------

def run_page(code, name, keys, timeout, env=None, plots=False,
             hide_mps=False, whole=False):
    """Run a page's download `code` alone as the file `name`: {"outputs":
    {key: what its block printed}, "plots": {key: its plot, with `plots`},
    "environment": {...}}, `keys` naming the blocks in order. `whole`: run
    as `python SCRIPT`, all printed is its one block's (no plots,
    environment None)."""
    with tempfile.TemporaryDirectory(prefix="page-run-") as folder:
        script, result = Path(folder, name), Path(folder, "result.json")
        script.write_text(code, encoding="utf-8")
        env = {**(os.environ if env is None else env),  # torch's caches too
               "TMPDIR": folder, "TEMP": folder, "TMP": folder}
        flags = ["--plots"] * plots + ["--hide-mps"] * hide_mps
        child = [script] if whole else [
            Path(__file__).absolute(), RUN_BLOCKS, script, result, *flags]
        status, stdout, stderr = run([sys.executable, "-I", *child], timeout,
                                     cwd=folder, env=env)
        if status != 0 or not (whole or result.exists()):
            raise Failed(failure(status, stderr), stderr.strip())
        if whole:
            return {"outputs": dict(zip(keys, [stdout])), "environment": None}
        ran = json.loads(result.read_text(encoding="utf-8"))
        # the download's blocks, in order: from here on, each by its key
        return {**ran, "outputs": dict(zip(keys, ran["outputs"], strict=True)),
                "plots": {key: plot for key, plot in zip(keys, ran["plots"])
                          if plot}}


def failure(status, stderr):
    last = (stderr.strip() or "nothing on standard error").splitlines()[-1]
    if where := re.search(r"cell (\d+) raised", stderr):
        return f"block {where[1]} of its code raised {last}"
    if status < 0:
        return f"its Python was ended by signal {-status}"
    return f"its Python exited with status {status}: {last}"


def run_blocks(script, result, *flags):
    """run_page's child: SCRIPT's blocks (`# %%`) in a real __main__ module
    (pickling a class defined in one works), what each printed (and drew:
    --plots) into RESULT. Matplotlib draws off screen, waiting for nobody."""
    import importlib.util
    if importlib.util.find_spec("snippets") is not None:
        sys.exit("this Python can import the project's `snippets` package, "
                 "but a page must run without it; uninstall the project "
                 "from this environment")
    os.environ["MPLBACKEND"] = "Agg"
    if "--hide-mps" in flags:  # a CPU run on Apple silicon uses the CPU
        import torch
        torch.backends.mps.is_available = lambda: False
    text = Path(script).read_text(encoding="utf-8")
    main = types.ModuleType("__main__")
    main.__file__ = script
    sys.modules["__main__"] = main
    outputs, plots, line = [], [], 1
    for number, part in enumerate(text.split("\n# %%\n")):
        code = compile("\n" * (line - 1) + part, script, "exec")  # its lines
        line += part.count("\n") + 2
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                exec(code, main.__dict__)
        except BaseException:
            sys.exit(f"{os.path.basename(script)}: cell {number} raised:\n"
                     f"{traceback.format_exc()}")
        outputs.append(buffer.getvalue())
        pyplot = sys.modules.get("matplotlib.pyplot")
        figures = pyplot.get_fignums() if pyplot else []
        if len(figures) > 1:
            sys.exit(f"cell {number} left {len(figures)} figures open; a "
                     "cell draws one at most")
        plots.append(saved(pyplot.figure(figures[0]), script, number)
                     if figures and "--plots" in flags else None)
        if pyplot:
            pyplot.close("all")
    facts = describe_machine()  # the recordings' part of it
    environment = {"machine": facts["system"], **{key: facts[key] for key in (
        "torch", "python", "cores", "mps", "gpu")}}
    Path(result).write_text(json.dumps({  # part 0: the docstring
        "outputs": outputs[1:], "plots": plots[1:],
        "environment": environment}), encoding="utf-8")


def saved(figure, script, number):
    """{"data": what its axes show (the check compares it, not pixels),
    "svg": it drawn, text as text, its ids the same on every run and unlike
    other plots' (a notebook shows three)."""
    def rounded(rows):
        return [[round(float(value), 4) for value in row] for row in rows]

    data = [{"labels": [axes.get_xlabel(), axes.get_ylabel(), axes.get_title()],
             "legend": [text.get_text() for text in axes.get_legend().texts]
             if axes.get_legend() else [],
             "lines": [rounded(line.get_xydata()) for line in axes.lines],
             "points": [rounded(points.get_offsets())
                        for points in axes.collections],
             "images": [[" ".join(f"{value:.3g}" for value in row)
                         for row in image.get_array()]
                        for image in axes.images]}
            for axes in figure.axes]
    svg, salt = io.StringIO(), f"{os.path.basename(script)}:{number}"
    with sys.modules["matplotlib.pyplot"].rc_context(
            {"svg.fonttype": "none", "svg.hashsalt": salt}):
        figure.savefig(svg, format="svg", transparent=True,
                       metadata={"Date": None})
    return {"data": data, "svg": svg.getvalue()}


# ---- the machine -------------------------------------------------------

def describe_machine():
    """This machine, the one description of it that the recordings, the
    checker and the measured figures use. It imports torch."""
    import torch
    import torch.distributed as dist

    cuda, distributed = torch.cuda.is_available(), dist.is_available()
    gpus = [torch.cuda.get_device_name(index)
            for index in range(torch.cuda.device_count() if cuda else 0)]
    nccl = distributed and dist.is_nccl_available() and "version unknown"
    with contextlib.suppress(Exception):  # where this build can say it
        nccl = nccl and ".".join(map(str, torch.cuda.nccl.version()))
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, TypeError):  # Linux names the model
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            cpu = re.search(r"^model name\s*:(.+)$", file.read(), re.M)[1]
    return {
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "build": f"CUDA {torch.version.cuda}" if torch.version.cuda else
                 f"ROCm {torch.version.hip}" if torch.version.hip else
                 "CPU-only",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.platform(),
        "system": f"{platform.system()} {platform.machine()}",
        "cpu": cpu.strip(), "cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "gpus": gpus, "gpu": gpus[0] if gpus else None,
        "mps": torch.backends.mps.is_available(),
        "mps_built": torch.backends.mps.is_built(),
        "distributed": distributed, "nccl": nccl,
        "gloo": distributed and dist.is_gloo_available()}


# ---- what is stored -----------------------------------------------------

def compare_text(recorded, fresh, key, varying, label=None):
    """None if `fresh` matches `recorded`, else a unified diff. A line that
    differs passes only if a pattern declared for `key` in `varying`
    ({key: {"lines": [regex, ...]}}) matches the whole of both lines."""
    patterns = varying.get(key, {}).get("lines", [])
    old, new = recorded.splitlines(True), fresh.splitlines(True)

    def same_shape(a, b):
        return a.endswith("\n") == b.endswith("\n") and any(
            re.fullmatch(p, a.rstrip("\n")) and re.fullmatch(p, b.rstrip("\n"))
            for p in patterns)

    if len(old) == len(new) and all(a == b or same_shape(a, b)
                                    for a, b in zip(old, new)):
        return None
    label = key if label is None else label
    return "".join(difflib.unified_diff(old, new, f"recorded {label}",
                                        f"fresh run of {label}"))


def write_files(files, removed=()):
    """Write {path: text} beside, then rename into place and delete
    `removed`, with Ctrl-C and SIGTERM held back (not on Windows)."""
    held = {signal.SIGINT, signal.SIGTERM}
    hold = getattr(signal, "pthread_sigmask", lambda *args: None)
    hold(signal.SIG_BLOCK, held)
    staged = []
    try:
        for path, text in files.items():
            path = Path(path).absolute()
            path.parent.mkdir(parents=True, exist_ok=True)
            staged.append((path.with_name(f".{path.name}.writing"), path))
            staged[-1][0].write_text(text, encoding="utf-8")
        for temporary, path in staged:
            os.replace(temporary, path)
        for path in removed:
            os.unlink(path)
    except BaseException:
        for temporary, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise
    finally:
        hold(signal.SIG_UNBLOCK, held)


if __name__ == "__main__" and sys.argv[1:2] == [RUN_BLOCKS]:  # run_page's
    run_blocks(*sys.argv[2:])
