#!/usr/bin/env python3
"""Does this machine print what the site shows? A check of every chapter page
of "Appendix A: Introduction to PyTorch" against the outputs the site shows.

    python check-appendix-a.py                  # every page
    python check-appendix-a.py --page A.7       # one page (or several)
    python check-appendix-a.py --report r.md    # also write a report to share

It needs torch. Each page's code, the page's download, runs alone in a fresh
Python in an empty temporary folder, on the CPU, and what each of its blocks
prints is compared with the site. A block that imports a package this Python
lacks is not run: the check names the package, and checks the other blocks.
Lines that depend on the machine (the torch version, a timing, an unseeded
draw) are compared by their shape and named. On a CUDA or Apple silicon GPU,
the pages with device code (A.9.1, A.9.2, Exercise A.4) then run again on the
GPU, and what they print there is shown, labelled with the device. It exits
with status 0 when nothing differs unexpectedly, and leaves no file or process
behind.
"""

import argparse
import datetime
import importlib
import json
import os
import platform
import re
import signal
import sys
import time
import types

NAME = "check-appendix-a.py"

# ---- embedded when the site is built ----
SITE = {}  # the pages, their code and what the site shows under each block
RUNNER = ""  # the site's page runner, whole: runs a page, compares its output
# ---- end of what is embedded ----
runner = types.ModuleType("page_runner")
exec(compile(RUNNER, "page_runner.py", "exec"), runner.__dict__)

DIFF_LINES = 16  # of the first difference on the screen (the report: all)
GPU_NOTE = ("expected on a GPU: its kernels sum in another order, so seeded "
            "numbers may differ in the last digits")
STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM] + (
    [signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])  # not on Windows


class Stop(Exception):
    """A stop signal, its number the argument: every page run has ended."""


def say(message, status):
    print(f"{NAME}: {message}", file=sys.stderr)
    return status


# ---- the pages ---------------------------------------------------------------

def page_ids():
    return ", ".join(page["id"] for page in SITE["pages"].values())


def page_name(text):
    """--page: a page's id (A.7, a7) or its script's name, as the page."""
    for name, page in SITE["pages"].items():
        aliases = (page["id"], page["id"].replace(".", ""), page["script"],
                   page["script"][:-3], name)
        if text.lower() in (alias.lower() for alias in aliases):
            return name
    raise argparse.ArgumentTypeError(
        f"there is no page {text!r} to check; choose one of {page_ids()}")


def missing_packages():
    """The packages of the pages that a page's run (python -I) cannot import."""
    probe = ("import importlib.util, sys\nprint(*(p for p in sys.argv[1:]"
             " if not importlib.util.find_spec(p)))")
    _, found, _ = runner.run([sys.executable, "-I", "-c", probe,
                              *SITE["packages"]], 60)
    return found.split()


def not_runnable(name, missing):
    """{block's index: the missing packages it imports} for a page."""
    cells = SITE["pages"][name]["cells"]
    return {index: needs for index, cell in enumerate(cells)
            if (needs := [p for p in cell["needs"] if p in missing])}


def run_page(name, timeout, on_device, hide_mps=False, skip=None):
    """Run a page's download alone, all but the blocks in `skip` (not_runnable);
    {"status": "ran", "outputs": [...], "environment": {...}} or
    {"status": "raised"/"timeout", "error": ...}. On the CPU, the GPUs are
    hidden (hide_mps: Apple's too)."""
    page, start = SITE["pages"][name], time.perf_counter()
    parts = page["code"].split("\n# %%\n")  # the docstring, then a part a block
    for index, needs in (skip or {}).items():
        parts[index + 1] = f"# not run here: it needs {', '.join(needs)}\n"
    env = dict(os.environ)
    if not on_device:
        env["CUDA_VISIBLE_DEVICES"] = env["HIP_VISIBLE_DEVICES"] = ""
    try:
        run = runner.run_page("\n# %%\n".join(parts), page["script"], timeout,
                              env, hide_mps=hide_mps, runner=RUNNER)
    except runner.TimedOut as stopped:
        return {"status": "timeout", "seconds": timeout,
                "error": f"{stopped} (a slow machine: raise --timeout)"}
    except runner.Failed as failed:
        return {"status": "raised", "error": str(failed),
                "stderr": failed.stderr,
                "seconds": round(time.perf_counter() - start, 2)}
    del run["plots"]
    return {"status": "ran", "seconds": round(time.perf_counter() - start, 2),
            **run}


def interrupted(signum, frame):
    """Ctrl-C, SIGTERM, a closed terminal: end every page run, then Stop."""
    for each in STOP_SIGNALS:  # one stop is enough
        signal.signal(each, signal.SIG_IGN)
    runner.end_all()
    raise Stop(signum)


def compare_page(name, run, skip=None):
    """The run against the site: "same", "machine" (only lines that depend on
    the machine differ, listed) or "different" (with the first diff); the
    blocks not run (skip) are named, with the packages they need."""
    page, skip = SITE["pages"][name], skip or {}
    verdict = {"status": "same", "lines": [], "skipped": {
        page["cells"][index]["key"]: needs for index, needs in skip.items()}}
    for index, (cell, fresh) in enumerate(zip(page["cells"], run["outputs"])):
        recorded, key = cell["output"], cell["key"]
        if fresh == recorded or index in skip:
            continue
        diff = runner.compare_text(recorded, fresh, key, SITE["varying"])
        if diff:
            return {**verdict, "status": "different", "key": key,
                    "diff": diff}
        pairs = zip(recorded.splitlines(), fresh.splitlines())
        verdict["status"] = "machine"
        verdict["lines"] += [
            {"key": key, "line": number, "site": site, "here": here,
             "why": SITE["varying"][key]["reason"]}
            for number, (site, here) in enumerate(pairs, 1) if site != here]
    return verdict


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
    for package in [p for p in SITE["packages"] if p != "torch"]:  # above
        try:
            machine[package] = importlib.import_module(package).__version__
        except ImportError:
            machine[package] = "not installed"
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


# ---- what it prints ----------------------------------------------------------

def result_text(verdict):
    """What a page's run shows, in a few words."""
    count = len(verdict.get("lines", []))
    depend = f"{count} line{'s' * (count != 1)} that depend{'s' * (count == 1)}"
    return {"same": "the same as the site",
            "machine": f"the same as the site, except {depend} on the machine",
            "different": f"differs from the site in {verdict.get('key')}",
            }.get(verdict["status"], verdict.get("error"))


def recorded_with():
    site = SITE["recorded"]
    return (f"torch {site.get('torch')}, Python {site.get('python')}, "
            f"{site.get('machine')}, {site.get('device')}")


def page_lines(name, verdict, whole=False):
    """A page's line and, under it, the first machine-dependent line of each
    block and the start of the first difference; whole (for the report):
    every such line, the whole diff and what a failed run wrote."""
    marks = {"same": "same", "machine": "machine", "different": "DIFFERENT"}
    status = verdict["status"]
    seconds = f" ({verdict['seconds']:.1f} s)" if status in marks else "."
    out = [f"{marks.get(status, 'FAILED'):10} {SITE['pages'][name]['title']}: "
           f"{result_text(verdict)}{seconds}"]
    lines, width = verdict.get("lines", []), None if whole else 30
    keys = [line["key"] for line in lines]
    if not whole:  # the first line of each block, and how many more
        lines = [lines[keys.index(key)] for key in dict.fromkeys(keys)]
    for line in lines:
        more = 0 if whole else keys.count(line["key"]) - 1
        others = f" (and {more} more)" if more else ""
        out.append(f"    {line['key']} line {line['line']}{others}: "
                   f"{short(line['here'], line['site'], width)} here, "
                   f"{short(line['site'], line['here'], width)} on "
                   f"the site: {line['why']}")
    out += [f"    not run: {key} needs {' and '.join(needs)} "
            f"(pip install {' '.join(needs)})"
            for key, needs in verdict.get("skipped", {}).items()]
    diff = verdict.get("diff", "").splitlines()
    shown = len(diff) if whole else DIFF_LINES
    out += [f"    {line}" for line in diff[:shown]]
    if len(diff) > shown:
        out.append(f"    ... {len(diff) - shown} more lines "
                   "(--report FILE writes them all)")
    if whole:
        stderr = verdict.get("stderr", "").splitlines()
        out += [f"    {line}" for line in stderr]
    return out


def device_lines(name, run, device, cpu_run=None):
    """A page's line on the GPU, then what its blocks printed there that
    differs from cpu_run; for the report (no cpu_run), all they printed."""
    title, whole = SITE["pages"][name]["title"], cpu_run is None
    if run["status"] != "ran":
        stderr = run.get("stderr", "") if whole else ""
        return [f"FAILED     {title} on {device}: {run['error']}.",
                *(f"    {line}" for line in stderr.splitlines())]
    out = [f"on {device:6} {title}: {run['verdict']}"]
    if whole:  # every block that printed something
        on_cpu = [""] * len(run["cells"])
    else:  # the blocks whose output the GPU changed
        on_cpu = cpu_run.get("outputs") or [None] * len(run["cells"])
    for cell, here in zip(run["cells"], on_cpu):
        if cell["output"] != here:
            out.append(f"  {cell['key']} on {device}:")
            out += [f"    {line}" for line in cell["output"].splitlines()]
    return out


def short(text, other, width):
    """`text` in at most `width` characters, from near where it differs."""
    if width is None:
        return repr(text)
    text, other = text.strip(), other.strip()
    same = len(os.path.commonprefix([text, other]))
    start = max(0, min(same - 8, len(text) - width))
    text = ("..." if start else "") + text[start:]
    return repr(text if len(text) <= width else text[:width - 3] + "...")


def summary_line(verdicts):
    total, missing = len(verdicts), sorted({
        package for verdict in verdicts.values()
        for needs in verdict.get("skipped", {}).values() for package in needs})
    not_run = (f" Not run: the blocks that need {' and '.join(missing)} "
               f"(pip install {' '.join(missing)} to check them too)."
               if missing else "")
    bad = [name for name, verdict in verdicts.items()
           if verdict["status"] not in ("same", "machine")]
    if not bad:
        machine = sum(v["status"] == "machine" for v in verdicts.values())
        pages = "the page prints" if total == 1 else f"all {total} pages print"
        but = (f" ({machine} with lines that depend on the machine)"
               if machine else "")
        return f"All the same: {pages} what the site shows{but}.{not_run}"
    names = ", ".join(SITE["pages"][name]["id"] for name in bad)
    return (f"{len(bad)} of {total} page{'s' * (total > 1)} did not print "
            f"what the site shows: {names}.{not_run}")


# ---- the report --------------------------------------------------------------

def fenced(lines):
    text = "\n".join(lines)
    ticks = "`" * max([3, *(len(run) + 1 for run in re.findall("`+", text))])
    return f"{ticks}text\n{text}\n{ticks}\n"


def table_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def report_text(data):
    """The report in Markdown: the machine, then what the screen shows, whole;
    its data at the end, for the site's GPU recordings."""
    out = [f"# {NAME} report\n", f"**{data['summary']}**\n",
           f"Made on {data['date']} in {data['seconds']:.0f} s by "
           f"`{data['command']}` (checker {data['checker']}); the site's "
           f"outputs were recorded with {recorded_with()}.\n",
           "## The machine\n", "| | |", "| --- | --- |",
           *(f"| {label} | {table_cell(text)} |"
             for label, text in data["machine"].items()), "",
           "## The pages\n",
           fenced(line for name, verdict in data["pages"].items()
                  for line in page_lines(name, verdict, whole=True))]
    if device := data["device"]:
        out += [f"## On {device['device']}: {device['gpu']}\n",
                f"The pages with device code ran again on {device['device']}; "
                "what each block printed there is below, and in the data at "
                "the end, for the site's GPU recordings.\n",
                fenced(line for name, run in device["pages"].items()
                       for line in device_lines(name, run, device["device"]))]
    payload = json.dumps(data, indent=1, ensure_ascii=False)
    out += ["<!-- check-appendix-a report data: what the site records from it",
            payload.replace(">", "\\u003e"), "-->", ""]
    return "\n".join(out)


# ---- the run -----------------------------------------------------------------

def report_path(path):
    """--report: a file in a folder that can be written to."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(
            f"{path} is a folder; give a file name, such as "
            f"{os.path.join(path, 'report.md')}")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(
            f"the folder {folder} does not exist or cannot be written to; "
            "choose another path")
    return path


def above_zero(kind):
    """--timeout, --jobs: a number (kind: float or int) above 0."""
    def parse(text):
        try:
            number = kind(text)
        except ValueError:
            number = 0
        if number > 0:
            return number
        whole = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {whole} above 0")
    return parse


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog=f"python {NAME}", description=__doc__.splitlines()[0])
    parser.error = lambda message: sys.exit(say(f"{message}.", 2))
    parser.add_argument("--page", action="append", type=page_name,
                        metavar="PAGE", help=f"check only this page: "
                        f"{page_ids()} (may be given more than once)")
    parser.add_argument("--report", type=report_path, metavar="FILE",
                        help="also write everything to this Markdown file")
    parser.add_argument("--timeout", type=above_zero(float), default=300,
                        metavar="S",
                        help="stop a page that runs longer (default: 300 s)")
    parser.add_argument("--jobs", type=above_zero(int), metavar="N",
                        default=max(1, min(4, (os.cpu_count() or 2) // 2)),
                        help="pages run at the same time on the CPU "
                             "(default: half the cores, at most 4)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    for signum in STOP_SIGNALS:
        signal.signal(signum, interrupted)
    try:
        try:
            import torch
        except ImportError:
            return say("this Python has no torch, and the pages need it: "
                       f"install it (pip install {' '.join(SITE['packages'])}"
                       ", or see "
                       "https://pytorch.org/get-started/locally/) and run "
                       "this again.", 1)
        machine, device, gpu = describe_machine(torch)
        print(f"{NAME}: does this machine print what the site shows?")
        for label, text in machine.items():
            print(f"  {label:7} {text}")
        print(f"  The site: {recorded_with()}.\n", flush=True)
        data = check(args, machine, device, gpu)
        if args.report:
            runner.write_files({args.report: report_text(data)})
            print(f"The report is in {args.report}.")
    except Stop as stop:
        print(f"\n{NAME}: interrupted; every page run has stopped and "
              "nothing was written.", file=sys.stderr)
        return 128 + stop.args[0]
    return 0 if data["summary"].startswith("All the same") else 1


def check(args, machine, device, gpu):
    names = [name for name in SITE["pages"]
             if not args.page or name in args.page]
    start, missing = time.perf_counter(), missing_packages()
    skips = {name: not_runnable(name, missing) for name in names}

    def on_cpu(name):
        page = SITE["pages"][name]
        print(f"[{names.index(name) + 1}/{len(names)}] running {page['id']} "
              f"({page['script']}) ...", file=sys.stderr, flush=True)
        return run_page(name, args.timeout, False, device == "mps", skips[name])

    cpu_runs, verdicts = runner.in_parallel(on_cpu, names, args.jobs), {}
    for name, run in cpu_runs.items():
        verdict = (compare_page(name, run, skips[name])
                   if run["status"] == "ran" else run)
        verdicts[name] = {**verdict, "seconds": run["seconds"]}
        print("\n".join(page_lines(name, verdicts[name])))
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
        data["device"] = check_on_device(on_gpu, cpu_runs, args, device, gpu,
                                         skips)
    data["seconds"] = round(time.perf_counter() - start, 1)
    print(f"\n{summary}")
    return data


def check_on_device(names, cpu_runs, args, device, gpu, skips):
    """The pages with device code, again, on the GPU: one at a time."""
    print(f"\nThe pages with device code, on {device} ({gpu}):", flush=True)

    def on_gpu(name):
        print(f"running {SITE['pages'][name]['id']} on {device} ...",
              file=sys.stderr, flush=True)
        return run_page(name, args.timeout, True, skip=skips[name])

    runs = runner.in_parallel(on_gpu, names, 1)
    for name, run in runs.items():
        run["verdict"] = run.get("error")
        if run["status"] == "ran":
            verdict = compare_page(name, run, skips[name])
            note = f" ({GPU_NOTE})" if verdict["status"] == "different" else ""
            run["verdict"] = result_text(verdict) + note
            run["cells"] = [
                {"key": cell["key"], "fingerprint": cell["fingerprint"],
                 "output": text} for cell, text
                in zip(SITE["pages"][name]["cells"], run.pop("outputs"))]
        print("\n".join(device_lines(name, run, device, cpu_runs[name])))
    return {"device": device, "gpu": gpu, "pages": runs}


if __name__ == "__main__":
    if hasattr(sys.stdout, "reconfigure"):  # a console that lacks a character
        sys.stdout.reconfigure(errors="replace")
    sys.exit(main())
