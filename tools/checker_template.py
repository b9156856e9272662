#!/usr/bin/env python3
"""Does this machine print what the site shows? A check of every chapter page
of "Appendix A: Introduction to PyTorch" against the outputs the site shows.

    python check-appendix-a.py                  # every page
    python check-appendix-a.py --page A.7       # one page (or several)
    python check-appendix-a.py --report r.md    # also write a report to share

It needs only torch (and numpy). Each page's code, the page's download, runs
alone in a fresh Python in an empty temporary folder, on the CPU, and what each
of its blocks prints is compared with the site. Lines that depend on the
machine (the torch version, a timing, an unseeded draw) are compared by their
shape and named. On a CUDA or Apple silicon GPU, the pages with device code
(A.9.1, A.9.2, Exercise A.4) then run again on the GPU, and what they print
there is shown, labelled with the device. It exits with status 0 when nothing
differs unexpectedly, and leaves no file or process behind.
"""

import argparse
import concurrent.futures
import datetime
import difflib  # noqa: F401 (the embedded compare_text uses it)
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

NAME = "check-appendix-a.py"

# ---- embedded from the repository by tools/checker.py when the site is built ----
SITE = {"pages": {}, "varying": {}, "recorded": {}, "device_pages": [], "version": ""}
RUNNER = ""  # tools/page_runner.py: runs a download cell by cell, stdout per cell


def compare_text(recorded, fresh, patterns, label):  # tools/store.py's compare_text
    raise NotImplementedError("tools/checker.py embeds the real one")
# ---- end of what is embedded ----


DIFF_LINES = 16  # of the first difference, on the screen (the report has it all)
GPU_NOTE = ("expected on a GPU: its kernels sum in another order, so seeded "
            "numbers may differ in the last digits")
# In the child, before the runner: end with the checker, however it ends.
END_WITH_CHECKER = """import sys
if sys.platform == "linux":
    import ctypes, os, signal
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != {parent}:
        os._exit(1)
"""
# In a CPU run on Apple silicon: the pages then pick the CPU, as on the site.
HIDE_MPS = "import torch\ntorch.backends.mps.is_available = lambda: False\n"


class Stop(Exception):
    """Ctrl-C or SIGTERM: stop every page run, leave nothing behind."""


running, lock, stopping = set(), threading.Lock(), threading.Event()


def say(message, status):
    print(f"{NAME}: {message}", file=sys.stderr)
    return status


# ---- the pages ---------------------------------------------------------------

def page_ids():
    return [page["id"] for page in SITE["pages"].values()]


def select_pages(wanted):
    """The pages named (an id such as A.7, or a page's script name), in order;
    None if one is unknown."""
    if not wanted:
        return list(SITE["pages"])
    names = {}
    for name, page in SITE["pages"].items():
        for alias in (page["id"], page["id"].replace(".", ""), page["script"],
                      page["script"][:-3], name):
            names[alias.lower()] = name
    chosen = [names.get(w.lower()) for w in wanted]
    if None in chosen:
        return None
    return [name for name in SITE["pages"] if name in chosen]


def run_page(name, timeout, on_device, parent_has_mps=False):
    """Run a page's download alone; {"status": "ran", "outputs": [...],
    "environment": {...}} or {"status": "raised"/"timeout", "error": ...}."""
    page = SITE["pages"][name]
    start = time.perf_counter()
    env = dict(os.environ)
    code = END_WITH_CHECKER.format(parent=os.getpid())
    if not on_device:
        env["CUDA_VISIBLE_DEVICES"] = env["HIP_VISIBLE_DEVICES"] = ""  # the CPU
        code += HIDE_MPS if parent_has_mps else ""
    code += RUNNER
    if os.name == "posix":
        group = {"start_new_session": True}
    else:
        group = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    with tempfile.TemporaryDirectory(prefix="check-appendix-a-") as folder:
        script = os.path.join(folder, page["script"])
        with open(script, "w", encoding="utf-8") as file:
            file.write(page["code"])
        result = os.path.join(folder, "result.json")
        for variable in ("TMPDIR", "TEMP", "TMP"):  # torch's caches go too
            env[variable] = folder
        with lock:
            if stopping.is_set():
                raise Stop
            child = subprocess.Popen(
                [sys.executable, "-I", "-c", code, script, result, "{}"],
                cwd=folder, env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True, errors="replace", **group)
            running.add(child)
        try:
            _, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            end(child)
            return {"status": "timeout", "seconds": timeout,
                    "error": f"still running after {timeout:g} s, so it was "
                             "stopped (a slow machine: raise --timeout)"}
        finally:
            end(child)
            with lock:
                running.discard(child)
        if stopping.is_set():
            raise Stop
        seconds = round(time.perf_counter() - start, 2)
        if child.returncode != 0 or not os.path.exists(result):
            return {"status": "raised", "seconds": seconds,
                    "error": failure(child.returncode, stderr),
                    "stderr": stderr.strip()}
        with open(result, encoding="utf-8") as file:
            run = json.load(file)
    return {"status": "ran", "seconds": seconds, **run}


def failure(status, stderr):
    """One sentence for a page run that ended badly."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    where = re.search(r"cell (\d+) raised", stderr)
    if where and lines:
        return f"block {where[1]} of its code raised {lines[-1].strip()}"
    if status < 0:
        return f"its Python was ended by signal {-status}"
    last = lines[-1].strip() if lines else "nothing on standard error"
    return f"its Python exited with status {status}: {last}"


def end(child):
    """Stop a page's process and everything it started."""
    if child.poll() is None:
        try:
            if os.name == "posix":
                os.killpg(child.pid, signal.SIGKILL)
            else:
                child.kill()
        except OSError:
            pass
    child.wait()


def compare_page(name, run):
    """The run against the site: "same", "machine" (only lines that depend on
    the machine differ, listed) or "different" (with the first diff)."""
    page, verdict = SITE["pages"][name], {"status": "same", "lines": []}
    for cell, fresh in zip(page["cells"], run["outputs"]):
        recorded, key = cell["output"], cell["key"]
        if fresh == recorded:
            continue
        spec = SITE["varying"].get(key, {})
        diff = compare_text(recorded, fresh, spec.get("lines", []), key)
        if diff:
            return {"status": "different", "key": key, "diff": diff,
                    "lines": verdict["lines"]}
        pairs = zip(recorded.splitlines(), fresh.splitlines())
        verdict["status"] = "machine"
        verdict["lines"] += [
            {"key": key, "line": number, "site": site, "here": here,
             "why": spec.get("reason", "")}
            for number, (site, here) in enumerate(pairs, 1) if site != here]
    return verdict


def in_turn(names, work, jobs):
    """work(name) for every page, `jobs` at a time; yields (name, result) in
    page order. Ctrl-C or SIGTERM stops every run and raises Stop."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(work, name) for name in names]
    try:
        for name, future in zip(names, futures):
            while not concurrent.futures.wait([future], timeout=0.2).done:
                pass
            yield name, future.result()
    except BaseException:
        for signum in (signal.SIGINT, signal.SIGTERM):  # one stop is enough
            signal.signal(signum, signal.SIG_IGN)
        stopping.set()
        with lock:
            for child in running:
                end(child)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


# ---- the machine -------------------------------------------------------------

def describe_machine(torch):
    """What this machine has, as label -> text, and the GPU the pages use."""
    cuda = torch.cuda.is_available()
    mps = torch.backends.mps.is_available()
    build = (f"CUDA {torch.version.cuda} build" if torch.version.cuda else
             f"ROCm {torch.version.hip} build" if torch.version.hip else
             "CPU-only build")
    machine = {
        "torch": f"{torch.__version__} ({build})",
        "Python": f"{platform.python_version()} "
                  f"({platform.python_implementation()})",
        "OS": platform.platform(),
        "CPU": f"{platform.processor() or platform.machine()}, "
               f"{os.cpu_count()} cores",
    }
    if cuda:
        count = torch.cuda.device_count()
        names = [torch.cuda.get_device_name(i) for i in range(count)]
        machine["CUDA"] = f"{count} GPU{'s' * (count > 1)}: {', '.join(names)}"
    else:
        machine["CUDA"] = ("not available: no NVIDIA GPU is visible"
                           if torch.version.cuda else
                           "not available: this torch has no CUDA")
    machine["MPS"] = ("available (Apple silicon GPU)" if mps else
                      "built in, but not available here"
                      if torch.backends.mps.is_built() else "not available")
    machine.update(describe_distributed(torch, cuda))
    try:
        import numpy
        machine["numpy"] = numpy.__version__
    except ImportError:
        machine["numpy"] = "not installed"
    device = "cuda" if cuda else "mps" if mps else "cpu"
    gpu = (names[0] if cuda else "Apple silicon GPU" if mps else None)
    return machine, device, gpu


def describe_distributed(torch, cuda):
    import torch.distributed as dist

    if not dist.is_available():
        return {"DDP": "torch.distributed is not in this build: the DDP "
                       "scripts cannot run here"}
    nccl, gloo = dist.is_nccl_available(), dist.is_gloo_available()
    found = {"NCCL": "not in this build", "Gloo": "available" if gloo
             else "not in this build"}
    if nccl:
        try:
            version = ".".join(map(str, torch.cuda.nccl.version()))
            found["NCCL"] = f"available ({version})"
        except Exception:  # a build without NCCL's version call
            found["NCCL"] = "available"
    if nccl and cuda:
        gpus = torch.cuda.device_count()
        found["DDP"] = (f"the scripts use NCCL here, one process on each of "
                        f"the {gpus} GPU{'s' * (gpus > 1)}")
    elif gloo:
        why = "no CUDA GPU is visible" if nccl else "this torch has no NCCL"
        found["DDP"] = f"the scripts use Gloo on CPU processes here ({why})"
    else:
        found["DDP"] = "neither NCCL nor Gloo: the DDP scripts cannot run"
    return found


# ---- what it prints -----------------------------------------------------------

def result_text(verdict):
    """What a page's run shows, in a few words."""
    status = verdict["status"]
    if status == "same":
        return "the same as the site"
    if status == "machine":
        count = len(verdict["lines"])
        lines = "1 line that depends" if count == 1 else \
            f"{count} lines that depend"
        return f"the same as the site, except {lines} on the machine"
    if status == "different":
        return f"differs from the site in {verdict['key']}"
    return verdict["error"]


def verdict_line(page, verdict):
    mark = {"same": "same", "machine": "machine", "different": "DIFFERENT"}
    status = verdict["status"]
    seconds = f" ({verdict['seconds']:.1f} s)" if status in mark else "."
    return (f"{mark.get(status, 'FAILED'):10} {page['title']}: "
            f"{result_text(verdict)}{seconds}")


def detail_lines(verdict):
    """Under a page's line: the machine-dependent lines, one per block, and
    the start of the first difference."""
    shown, out = set(), []
    for line in verdict.get("lines", []):
        if line["key"] in shown:
            continue
        shown.add(line["key"])
        more = sum(other["key"] == line["key"] for other in verdict["lines"])
        others = f" (and {more - 1} more)" if more > 1 else ""
        out.append(f"    {line['key']} line {line['line']}{others}: "
                   f"{short(line['here'], line['site'])} here, "
                   f"{short(line['site'], line['here'])} on "
                   f"the site: {line['why']}")
    if verdict["status"] == "different":
        diff = verdict["diff"].splitlines()
        out += [f"    {line}" for line in diff[:DIFF_LINES]]
        if len(diff) > DIFF_LINES:
            out.append(f"    ... {len(diff) - DIFF_LINES} more lines "
                       "(--report FILE writes them all)")
    return out


def short(text, other, width=30):
    """`text` in at most `width` characters, from near where it differs."""
    text, other = text.strip(), other.strip()
    same = len(os.path.commonprefix([text, other]))
    start = max(0, min(same - 8, len(text) - width))
    text = ("..." if start else "") + text[start:]
    return repr(text if len(text) <= width else text[:width - 3] + "...")


def summary_line(verdicts):
    total = len(verdicts)
    bad = [v for v in verdicts.values()
           if v["status"] not in ("same", "machine")]
    if not bad:
        machine = sum(v["status"] == "machine" for v in verdicts.values())
        pages = "the page prints" if total == 1 else f"all {total} pages print"
        but = (f" ({machine} with lines that depend on the machine)"
               if machine else "")
        return f"All the same: {pages} what the site shows{but}."
    names = ", ".join(SITE["pages"][n]["id"] for n, v in verdicts.items()
                      if v in bad)
    return (f"{len(bad)} of {total} page{'s' * (total > 1)} did not print "
            f"what the site shows: {names}.")


def device_outputs(name, cpu_run, device_run):
    """The blocks whose output the GPU changed: (key, text)."""
    page = SITE["pages"][name]
    cpu = cpu_run.get("outputs") or [None] * len(page["cells"])
    return [(cell["key"], text) for cell, text, here
            in zip(page["cells"], device_run["outputs"], cpu) if text != here]


# ---- the report ---------------------------------------------------------------

def fenced(text, language=""):
    ticks = "`" * max([3, *(len(run) + 1 for run in re.findall("`+", text))])
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}\n"


def table_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_code(text):
    """A line of output in a table: as code, where it can be."""
    if "`" in text or not text.strip():
        return table_cell(text)
    return f"`{table_cell(text)}`"


def report_text(data):
    """The report in Markdown; its data at the end, for tools/record.py."""
    site = SITE["recorded"]
    out = [f"# {NAME} report\n",
           f"**{data['summary']}**\n",
           f"Made on {data['date']} in {data['seconds']:.0f} s by "
           f"`{data['command']}` (checker "
           f"{data['checker']}); the site's outputs were recorded with torch "
           f"{site.get('torch')}, Python {site.get('python')}, "
           f"{site.get('machine')}, {site.get('device')}.\n",
           "## The machine\n", "| | |", "| --- | --- |"]
    out += [f"| {k} | {table_cell(v)} |" for k, v in data["machine"].items()]
    out += ["", "## The pages\n", "| Page | Result | Seconds |",
            "| --- | --- | --- |"]
    for name, verdict in data["pages"].items():
        out.append(f"| {table_cell(SITE['pages'][name]['title'])} | "
                   f"{table_cell(result_text(verdict))} | "
                   f"{verdict.get('seconds', '')} |")
    out.append("")
    for name, verdict in data["pages"].items():
        out += report_details(SITE["pages"][name]["title"], verdict)
    if data["device"]:
        out += report_device(data["device"])
    payload = json.dumps(data, indent=1, ensure_ascii=False)
    out += ["<!-- check-appendix-a report data: python -m tools.record "
            "--report FILE reads it",
            payload.replace(">", "\\u003e"), "-->", ""]
    return "\n".join(out)


def report_details(title, verdict):
    out = []
    if verdict.get("lines"):
        out += [f"### {title}: lines that depend on the machine\n",
                "| Block | Line | Here | On the site | Why |",
                "| --- | --- | --- | --- | --- |"]
        out += [f"| {line['key']} | {line['line']} | "
                f"{table_code(line['here'])} | {table_code(line['site'])} | "
                f"{table_cell(line['why'])} |" for line in verdict["lines"]]
        out.append("")
    if verdict["status"] == "different":
        out += [f"### {title}: differs in {verdict['key']}\n",
                fenced(verdict["diff"], "diff")]
    if verdict["status"] in ("raised", "timeout"):
        out += [f"### {title}: {verdict['error']}\n",
                fenced(verdict.get("stderr") or verdict["error"], "text")]
    return out


def report_device(device):
    out = [f"## On {device['device']}: {device['gpu']}\n",
           f"The pages with device code ran again on {device['device']}; "
           "what each block printed there is kept below, and in the data "
           "at the end, for the site's GPU recordings.\n"]
    for name, run in device["pages"].items():
        page = SITE["pages"][name]
        out.append(f"### {page['title']}: {run['verdict']}\n")
        if run["status"] != "ran":
            out += [fenced(run.get("stderr") or run["error"], "text")]
            continue
        for cell in run["cells"]:
            if cell["output"]:
                out += [f"`{cell['key']}`\n", fenced(cell["output"], "text")]
    return out


def write_report(path, text):
    """Written beside its place, then renamed: never half a report."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".check-appendix-a-",
                                         dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def report_problem(path):
    """A sentence if `path` cannot take the report, else None."""
    if os.path.isdir(path):
        return f"--report {path} is a folder; give a file name, such as " \
               f"{os.path.join(path, 'report.md')}"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return f"--report {path}: the folder {folder} does not exist or " \
               "cannot be written to; choose another path"
    return None


# ---- the run ------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=f"python {NAME}", description=__doc__.splitlines()[0])
    parser.add_argument("--page", action="append", metavar="PAGE",
                        help="check only this page: " + ", ".join(page_ids())
                        + " (may be given more than once)")
    parser.add_argument("--report", metavar="FILE",
                        help="also write everything to this Markdown file")
    parser.add_argument("--timeout", type=float, default=300, metavar="S",
                        help="stop a page that runs longer (default: 300 s)")
    parser.add_argument("--jobs", type=int, metavar="N",
                        default=max(1, min(4, (os.cpu_count() or 2) // 2)),
                        help="pages run at the same time on the CPU "
                             "(default: half the cores, at most 4)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    names = select_pages(args.page)
    if names is None:
        unknown = next(w for w in args.page if not select_pages([w]))
        return say(f"there is no page {unknown!r} to check; choose one of "
                   f"{', '.join(page_ids())}.", 2)
    if args.timeout <= 0 or args.jobs < 1:
        return say("--timeout must be above 0 seconds and --jobs at least 1.",
                   2)
    if args.report and (problem := report_problem(args.report)):
        return say(f"{problem}.", 2)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    try:
        try:
            import torch
        except ImportError:
            return say("this Python has no torch, and the pages need it: "
                       "install it (pip install torch numpy, or see "
                       "https://pytorch.org/get-started/locally/) and run "
                       "this again.", 1)
        machine, device, gpu = describe_machine(torch)
        print(f"{NAME}: does this machine print what the site shows?")
        for label, text in machine.items():
            print(f"  {label:7} {text}")
        site = SITE["recorded"]
        print(f"  The site: torch {site.get('torch')}, Python "
              f"{site.get('python')}, {site.get('machine')}, "
              f"{site.get('device')}.\n", flush=True)
        data = check(names, args, machine, device, gpu)
        if args.report:
            write_report(args.report, report_text(data))
            print(f"The report is in {args.report}.")
    except Stop as stop:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the line, then out
        print(f"\n{NAME}: interrupted; every page run has stopped and "
              "nothing was written.", file=sys.stderr)
        return 143 if stop.args == ("SIGTERM",) else 130
    return 0 if data["summary"].startswith("All the same") else 1


def interrupted(signum, frame):
    raise Stop(signal.Signals(signum).name)


def check(names, args, machine, device, gpu):
    total, verdicts, start = len(names), {}, time.perf_counter()

    def on_cpu(name):
        page = SITE["pages"][name]
        number = names.index(name) + 1
        print(f"[{number}/{total}] running {page['id']} ({page['script']}) "
              "...", file=sys.stderr, flush=True)
        return run_page(name, args.timeout, False, device == "mps")

    cpu_runs = dict(in_turn(names, on_cpu, args.jobs))
    for name, run in cpu_runs.items():
        verdict = compare_page(name, run) if run["status"] == "ran" else run
        verdict = {**verdict, "seconds": run["seconds"]}
        verdicts[name] = verdict
        print(verdict_line(SITE["pages"][name], verdict))
        for line in detail_lines(verdict):
            print(line)
    summary = summary_line(verdicts)
    data = {"format": 1, "checker": SITE["version"],
            "date": datetime.date.today().isoformat(),
            "command": " ".join(["python", NAME, *sys.argv[1:]]),
            "machine": machine, "recorded": SITE["recorded"],
            "environment": next((r["environment"] for r in cpu_runs.values()
                                 if r["status"] == "ran"), None),
            "pages": verdicts, "device": None, "summary": summary}
    on_gpu = [name for name in names if name in SITE["device_pages"]]
    if device != "cpu" and on_gpu:
        data["device"] = check_on_device(on_gpu, cpu_runs, args, device, gpu)
    data["seconds"] = round(time.perf_counter() - start, 1)
    print(f"\n{summary}")
    return data


def check_on_device(names, cpu_runs, args, device, gpu):
    """The pages with device code, again, on the GPU: one at a time."""
    print(f"\nThe pages with device code, on {device} ({gpu}):", flush=True)
    found = {"device": device, "gpu": gpu, "pages": {}}

    def on_gpu(name):
        print(f"running {SITE['pages'][name]['id']} on {device} ...",
              file=sys.stderr, flush=True)
        return run_page(name, args.timeout, True)

    for name, run in in_turn(names, on_gpu, 1):
        page = SITE["pages"][name]
        if run["status"] != "ran":
            run["verdict"] = run["error"]
            print(f"FAILED     {page['title']} on {device}: {run['error']}.")
            found["pages"][name] = run
            continue
        verdict = compare_page(name, run)
        run["verdict"] = {
            "same": "the same as the site",
            "machine": "the same as the site, except lines that depend on "
                       "the machine",
            "different": f"differs from the site in {verdict.get('key')} "
                         f"({GPU_NOTE})"}[verdict["status"]]
        print(f"on {device:6} {page['title']}: {run['verdict']}")
        for key, text in device_outputs(name, cpu_runs[name], run):
            print(f"  {key} on {device}:")
            print("".join(f"    {line}\n" for line in text.splitlines()),
                  end="")
        run["cells"] = [
            {"key": cell["key"], "fingerprint": cell["fingerprint"],
             "output": text}
            for cell, text in zip(page["cells"], run.pop("outputs"))]
        found["pages"][name] = run
    return found


if __name__ == "__main__":
    if hasattr(sys.stdout, "reconfigure"):  # a console that lacks a character
        sys.stdout.reconfigure(errors="replace")
    sys.exit(main())
