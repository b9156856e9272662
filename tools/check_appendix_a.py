#!/usr/bin/env python3
"""Does this machine print what the site shows? A check of every chapter page
of "Appendix A: Introduction to PyTorch" (and of A.9.3's DDP program).

    python check-appendix-a.py                  # every page
    python check-appendix-a.py --page A.7       # one page (or several)
    python check-appendix-a.py --report r.md    # also write a report to share

It needs only torch. Each page's download runs alone in a fresh Python, on
the CPU, in an empty temporary folder, and what each block prints is compared
with the site: lines that depend on the machine by their shape, and a block
that needs a package this Python lacks is named, not run. On a GPU, the pages
with device code run there too. It exits with 0 when every page runs and
nothing differs unexpectedly, and leaves no file or process behind.
"""

import argparse
import contextlib
import importlib.util
import json
import os
import re
import signal
import sys
import time

from tools.page_runner import (
    RUN_BLOCKS,
    Failed,
    TimedOut,
    compare_text,
    describe_machine,
    in_parallel,
    run,
    run_blocks,
    run_page,
    write_files,
)

NAME = "check-appendix-a.py"
MISSING = "--missing"  # missing()'s child: which packages a page's run lacks
SITE = {}  # the pages, their code and what the site shows under each block

DIFF_LINES = 16  # of the first difference on the screen (the report: all)
GPU_NOTE = ("expected on a GPU: its kernels sum in another order, so seeded "
            "numbers may differ in the last digits")
STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM] + (
    [signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])  # not on Windows


class Stop(Exception):
    """A stop signal (its number the argument): every page run has ended."""


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


def missing():
    """The packages the pages need that python -I, as a page's run, lacks."""
    return run([sys.executable, "-I", __file__, MISSING, *SITE["packages"]],
               60)[1].split()


def run_download(name, timeout, on_device, lacks):
    """Run a page's download alone, on the device or with every GPU hidden,
    but the blocks needing a package it `lacks`: its outputs, or why not."""
    page, start = SITE["pages"][name], time.perf_counter()
    whole, skipped = page.get("whole", False), {}  # whole: not in blocks
    parts = page["code"].split("\n# %%\n")  # the docstring, then a part a block
    for index, cell in [] if whole else enumerate(page["cells"], 1):
        if needs := [package for package in cell["needs"] if package in lacks]:
            skipped[cell["key"]] = needs
            parts[index] = f"# not run here: it needs {', '.join(needs)}\n"
    hide = () if on_device else ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
    try:
        ran = {"status": "ran", **run_page(
            "\n# %%\n".join(parts), page["script"],
            [cell["key"] for cell in page["cells"]], timeout,
            {**os.environ, **dict.fromkeys(hide, "")},
            hide_mps=not on_device, whole=whole)}
    except Failed as failed:
        slow = " (a slow machine: raise --timeout)" * isinstance(
            failed, TimedOut)
        ran = {"status": "failed", "error": f"{failed}{slow}",
               "stderr": failed.stderr}
    return {**ran, "seconds": round(time.perf_counter() - start, 2),
            "skipped": skipped}


def interrupted(signum, frame):
    """Ctrl-C, SIGTERM, a closed terminal: Stop (in_parallel ends the runs)."""
    for each in STOP_SIGNALS:  # one stop is enough
        signal.signal(each, signal.SIG_IGN)
    raise Stop(signum)


def compare_page(name, ran):
    """The run's verdict: "same", "machine" (only machine-dependent lines
    differ: listed by block) or "different" (the first diff)."""
    verdict = {"status": "same", "lines": {}, "seconds": ran["seconds"],
               "skipped": ran["skipped"]}
    for cell in SITE["pages"][name]["cells"]:
        recorded, key = cell["output"], cell["key"]
        fresh = ran["outputs"][key]
        if fresh == recorded or key in ran["skipped"]:
            continue
        if diff := compare_text(recorded, fresh, key, SITE["varying"]):
            return {**verdict, "status": "different", "key": key, "diff": diff}
        pairs = zip(recorded.splitlines(), fresh.splitlines())
        verdict["status"] = "machine"
        verdict["lines"][key] = [
            {"line": number, "site": site, "here": here}
            for number, (site, here) in enumerate(pairs, 1) if site != here]
    return verdict


# ---- the machine -------------------------------------------------------------

def machine_lines(facts, lacks):
    """{label: text} of this machine, which `lacks` some packages."""
    gpus, nccl = facts["gpus"], facts["nccl"]
    machine = {
        "torch": f"{facts['torch']} ({facts['build']} build)",
        "Python": f"{facts['python']} ({facts['implementation']})",
        "OS": facts["os"], "CPU": f"{facts['cpu']}, {facts['cores']} cores",
        "CUDA": f"{counted(len(gpus), 'GPU')}: {', '.join(gpus)}" if gpus else
                "not available: no NVIDIA GPU is visible" if facts["cuda"]
                else "not available: this torch has no CUDA",
        "MPS": "available (Apple silicon GPU)" if facts["mps"] else
               "built in, but not available here" if facts["mps_built"]
               else "not available",
        "NCCL": f"available ({nccl})" if nccl else "not in this build",
        "Gloo": "available" if facts["gloo"] else "not in this build"}
    machine["DDP"] = (
        "torch.distributed is not in this build: the DDP scripts cannot run "
        "here" if not facts["distributed"] else
        "the scripts use NCCL here, one process on each of the "
        f"{counted(len(gpus), 'GPU')}" if nccl and gpus else
        "the scripts use Gloo on CPU processes here" if facts["gloo"]
        else "neither NCCL nor Gloo: the DDP scripts cannot run")
    for package in [p for p in SITE["packages"] if p != "torch"]:  # above
        machine[package] = "not installed" if package in lacks else (
            importlib.import_module(package).__version__)
    return machine


# ---- what it prints ----------------------------------------------------------

def counted(number, noun):
    return f"{number} {noun}{'s' * (number != 1)}"


def result_text(verdict):
    """What a page's run shows, in a few words."""
    count = sum(map(len, verdict.get("lines", {}).values()))
    depend = f"{counted(count, 'line')} that depend{'s' * (count == 1)}"
    return {"same": "the same as the site",
            "machine": f"the same as the site, except {depend} on the machine",
            "different": f"differs from the site in {verdict.get('key')}",
            }.get(verdict["status"], verdict.get("error"))


def page_lines(name, verdict, whole=False, where=""):
    """A page's line, then each block's first machine-dependent line and the
    diff's start; whole (the report): all of them and a failed run's stderr."""
    status = verdict["status"]
    mark = status if status in ("same", "machine") else status.upper()
    seconds = "." if status == "failed" else f" ({verdict['seconds']:.1f} s)"
    out = [f"{mark:10} {SITE['pages'][name]['title']}{where}: "
           f"{result_text(verdict)}{seconds}"]
    for key, lines in verdict.get("lines", {}).items():
        why = SITE["varying"][key]["reason"]
        more = f" (and {len(lines) - 1} more)" * (len(lines) > 1 and not whole)
        out += [f"{key} line {line['line']}{more}: {line['here']!r} here, "
                f"{line['site']!r} on the site: {why}"
                for line in (lines if whole else lines[:1])]  # screen: first
    out += [f"not run: {key} needs {' and '.join(needs)} "
            f"(pip install {' '.join(needs)})"
            for key, needs in verdict.get("skipped", {}).items()]
    diff = verdict.get("diff", "").splitlines()
    if whole:  # and what a failed run wrote
        diff += verdict.get("stderr", "").splitlines()
    elif len(diff) > DIFF_LINES:
        diff[DIFF_LINES:] = [f"... {len(diff) - DIFF_LINES} more lines "
                             "(--report FILE writes them all)"]
    return out[:1] + [f"    {line}" for line in out[1:] + diff]


def device_lines(name, ran, device, cpu_run=None):
    """A page's line on the GPU, then what its blocks printed there unlike
    on cpu_run (for the report, no cpu_run: all they printed)."""
    if ran["status"] != "ran":
        return page_lines(name, ran, cpu_run is None, f" on {device}")
    out = [f"on {device:6} {SITE['pages'][name]['title']}: {ran['verdict']}"]
    on_cpu = cpu_run.get("outputs") if cpu_run else {}
    for cell in ran["cells"]:
        if on_cpu is None or cell["output"] != on_cpu.get(cell["key"], ""):
            out.append(f"  {cell['key']} on {device}:")
            out += [f"    {line}" for line in cell["output"].splitlines()]
    return out


def summary_line(verdicts):
    total, missing = len(verdicts), sorted({
        package for verdict in verdicts.values()
        for needs in verdict.get("skipped", {}).values() for package in needs})
    not_run = (f" Not run: the blocks that need {' and '.join(missing)} "
               f"(pip install {' '.join(missing)} to check them too)."
               if missing else "")
    bad = [SITE["pages"][name]["id"] for name, verdict in verdicts.items()
           if verdict["status"] not in ("same", "machine")]
    if bad:
        return (f"{len(bad)} of {counted(total, 'page')} did not print what "
                f"the site shows: {', '.join(bad)}.{not_run}")
    machine = sum(v["status"] == "machine" for v in verdicts.values())
    pages = "the page prints" if total == 1 else f"all {total} pages print"
    but = f" ({machine} with lines that depend on the machine)" * bool(machine)
    return f"All the same: {pages} what the site shows{but}.{not_run}"


# ---- the report --------------------------------------------------------------

def fenced(lines):
    text = "\n".join(lines)
    ticks = "`" * max([3, *(len(rule) + 1 for rule in re.findall("`+", text))])
    return f"{ticks}text\n{text}\n{ticks}\n"


def report_text(data):
    """The report in Markdown: the machine, the screen's lines in full, and
    its data at the end for the site's GPU recordings."""
    out = [f"# {NAME} report\n", f"**{data['summary']}**\n",
           f"Made on {data['date']} in {data['seconds']:.0f} s by "
           f"`{data['command']}` (checker {data['checker']}); the site's "
           f"outputs were recorded with {SITE['recorded']}.\n",
           "## The machine\n", "| | |", "| --- | --- |",
           *("| {} | {} |".format(label, text.replace("|", "\\|"))
             for label, text in data["machine"].items()), "",
           "## The pages\n",
           fenced(line for name, verdict in data["pages"].items()
                  for line in page_lines(name, verdict, whole=True))]
    if device := data["device"]:
        out += [f"## On {device['device']}: {device['gpu']}\n",
                fenced(line for name, ran in device["pages"].items()
                       for line in device_lines(name, ran, device["device"]))]
    payload = json.dumps(data, indent=1, ensure_ascii=False)
    out += ["<!-- check-appendix-a report data: what the site records from it",
            payload.replace(">", "\\u003e"), "-->", ""]
    return "\n".join(out)


# ---- the run -----------------------------------------------------------------

def report_path(path):
    """--report: a file in a folder that can be written to."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not (os.path.isdir(folder)
                                   and os.access(folder, os.W_OK)):
        raise argparse.ArgumentTypeError(
            f"cannot write a report to {path}: give a file in a folder that "
            "exists and can be written to")
    return path


def above_zero(kind):
    """--timeout, --jobs: a number (kind: float or int) above 0."""
    def parse(text):
        with contextlib.suppress(ValueError):
            if (number := kind(text)) > 0:
                return number
        whole = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {whole} above 0")
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog=f"python {NAME}", description=__doc__.split("\n\n")[0])
    parser.error = lambda message: parser.exit(2, f"{NAME}: {message}.\n")
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
    args = parser.parse_args(argv)
    for signum in STOP_SIGNALS:
        signal.signal(signum, interrupted)
    try:
        try:
            facts = describe_machine()
        except ImportError:
            parser.exit(1, f"{NAME}: this Python has no torch, and the pages "
                        "need it: install it (pip install "
                        f"{' '.join(SITE['packages'])}, or see https://pytorch"
                        ".org/get-started/locally/) and run this again.\n")
        lacks = missing()
        machine = machine_lines(facts, lacks)
        print(f"{NAME}: does this machine print what the site shows?",
              *(f"  {label:7} {text}" for label, text in machine.items()),
              f"  The site: {SITE['recorded']}.\n", sep="\n", flush=True)
        data = check(args, facts, machine, lacks)
        if args.report:
            write_files({args.report: report_text(data)})
            print(f"The report is in {args.report}.")
    except Stop as stop:
        print(f"\n{NAME}: interrupted; every page run has stopped and "
              "nothing was written.", file=sys.stderr)
        return 128 + stop.args[0]
    return 0 if data["summary"].startswith("All the same") else 1


def check(args, facts, machine, lacks):
    """The pages on the CPU, --jobs at a time, then on the GPU one at a time,
    but the blocks that need a package this machine `lacks`."""
    device = "cuda" if facts["gpus"] else "mps" if facts["mps"] else "cpu"
    gpu = facts["gpu"] or ("Apple silicon GPU" if facts["mps"] else None)
    names = [n for n in SITE["pages"] if not args.page or n in args.page]
    start = time.perf_counter()

    def run_one(name, on_device=False):
        page = SITE["pages"][name]
        print(f"running {page['id']} on {device} ..." if on_device else
              f"[{names.index(name) + 1}/{len(names)}] running {page['id']} "
              f"({page['script']}) ...", file=sys.stderr, flush=True)
        return run_download(name, args.timeout, on_device, lacks)

    cpu_runs, verdicts = in_parallel(run_one, names, args.jobs), {}
    for name, ran in cpu_runs.items():
        verdicts[name] = (compare_page(name, ran)
                          if ran["status"] == "ran" else ran)
        print("\n".join(page_lines(name, verdicts[name])))
    data = {"format": 1, "checker": SITE["version"],
            "date": time.strftime("%Y-%m-%d"),
            "command": " ".join(["python", NAME, *sys.argv[1:]]),
            "machine": machine, "recorded": SITE["recorded"],
            "environment": facts, "pages": verdicts, "device": None,
            "summary": summary_line(verdicts)}
    if device != "cpu" and (on_gpu := [
            name for name in names if name in SITE["device_pages"]]):
        print(f"\nThe pages with device code, on {device} ({gpu}):", flush=True)
        runs = in_parallel(lambda name: run_one(name, True), on_gpu, 1)
        for name, ran in runs.items():
            if ran["status"] == "ran":
                verdict = compare_page(name, ran)
                ran["verdict"] = result_text(verdict) + f" ({GPU_NOTE})" * (
                    verdict["status"] == "different")
                outputs = ran.pop("outputs")  # as the site's cells, with these
                ran["cells"] = [{**cell, "output": outputs[cell["key"]]}
                                for cell in SITE["pages"][name]["cells"]]
            print("\n".join(device_lines(name, ran, device, cpu_runs[name])))
        data["device"] = {"device": device, "gpu": gpu, "pages": runs}
        if failed := [SITE["pages"][name]["id"] for name, ran in runs.items()
                      if ran["status"] != "ran"]:  # a difference is normal
            data["summary"] = (f"{', '.join(failed)} failed on {device}. On "
                               "the CPU, " + data["summary"].removeprefix(
                                   "All the same: "))
    data["seconds"] = round(time.perf_counter() - start, 1)
    print(f"\n{data['summary']}")
    return data


if __name__ == "__main__" and sys.argv[1:2] == [RUN_BLOCKS]:  # run_page's
    run_blocks(*sys.argv[2:])
elif __name__ == "__main__" and sys.argv[1:2] == [MISSING]:  # missing()'s
    print(*(p for p in sys.argv[2:] if not importlib.util.find_spec(p)))
elif __name__ == "__main__":
    sys.stdout.reconfigure(errors="replace")  # a console lacking a character
    sys.exit(main())
