"""Record what every chapter page prints, and the notebooks made of those pages.

    python -m tools.record        # re-record (make outputs; pytest --update-outputs does the same)
    python -m tools.record --gpu  # on a CUDA machine: the GPU outputs (part of make gpu-check)
    python -m tools.record --report FILE  # the same, from check-appendix-a.py's report of a CUDA machine

Each page's download runs alone (tools/page_runner.py), once; what the runs give is written all or nothing.
"""

import os
import re
import signal
import sys
from itertools import zip_longest
from pathlib import Path

from tools import ROOT, page_runner, pages, store
from tools.ddp_runs import SCRIPT_RUNS, run_key, run_script
from tools.editions import EDITIONS
from tools.notebooks import notebook_text
from tools.page_runner import TIME_LIMIT, Failed, TimedOut, compare_text, in_parallel, write_files
from tools.store import GPU_OUTPUTS


def record_page(page: str) -> dict:
    """Run the page's download alone: {"page": its pages.Page, "environment", "outputs", "plots"}, each by section."""
    program = pages.read(page)
    try:
        run = page_runner.run_page(pages.download_text(page, program.sections), pages.download_name(page),
                                   [section.key for section in program.sections], TIME_LIMIT, plots=True)
    except TimedOut as stopped:
        raise store.RecordingError(f"the code of docs/{page} was {stopped}: does it wait for something?") from None
    except Failed as failed:
        raise store.RecordingError(f"the code of docs/{page} does not run alone: {failed}\n{failed.stderr}") from None
    return {**run, "page": program, "plots": {key: {"data": plot["data"], "svg": in_both_palettes(plot["svg"])}
                                              for key, plot in run["plots"].items()}}


def in_both_palettes(svg: str) -> str:
    """Matplotlib's SVG in the colours of the page around it, in both palettes; without the ids every plot has
    (figure_1), its style rule for every element (*) kept to plots."""
    svg = re.sub(r' id="[\w.]+_\d+"', "", svg)
    svg = svg.replace("#000000", "currentColor").replace("fill: #ffffff", "fill: var(--md-default-bg-color, #fff)")
    return svg.replace("<svg ", '<svg fill="currentColor" ', 1).replace("*{", "figure.plot svg *{", 1)


def record(scripts: bool = True) -> store.Recording:
    """Run every chapter page once (and the DDP scripts' recorded runs), and make what is stored."""
    chapter_pages = pages.chapter_pages()
    # All in one pool, a DDP run (the longest jobs) and a page in turn: pages run from the start.
    jobs = [job for pair in zip_longest(SCRIPT_RUNS if scripts else [], chapter_pages) for job in pair if job]
    done = in_parallel(lambda job: (run_script if job in SCRIPT_RUNS else record_page)(job), jobs, os.cpu_count() or 2)
    varying, runs = store.varying_patterns(), {page: done[page] for page in chapter_pages}
    recording = store.Recording(runs=runs)
    if scripts:
        recording.scripts = {name: store.to_store(store.stored_text(store.SCRIPT_OUTPUTS / name), done[name],
                                                  run_key(name), varying) for name in SCRIPT_RUNS}
    recording.manifest = {"environment": next(iter(runs.values()))["environment"], "pages": {}}
    for page, run in runs.items():
        recording.manifest["pages"][page] = {key: {"code": fingerprint, "prints": bool(run["outputs"][key])}
                                             for key, fingerprint in run["page"].fingerprints.items()}
        recording.plots.update(run["plots"])
        for section in run["page"].sections:
            text = run["outputs"][section.key]
            if text and compare_text(recording.outputs.setdefault(section.key, text), text, section.key, varying):
                raise store.RecordingError(f"snippets/{section.module}.py, section '{section.name}' prints "
                                           f"differently on docs/{page} than on an earlier page; a section shown "
                                           "on two pages must print the same on both.")
    for key, text in recording.outputs.items():
        recording.outputs[key] = store.to_store(store.stored_output(key), text, key, varying)
    for key in recording.plots:
        if missing := [edition.name for edition in EDITIONS.values() if f"plot:{key}" not in edition.words]:
            raise store.RecordingError(f"{key} draws a plot, but tools/words.toml has no words 'plot:{key}' (what "
                                       f"the plot shows: its alt text) in {' and '.join(missing)}; add them.")
    recording.notebooks = {edition.notebooks / f"{name}.ipynb": notebook_text(name, recording, edition)
                           for edition in EDITIONS.values() for name in pages.NOTEBOOKS}
    return recording


def summary(recording: store.Recording, changed: list[Path]) -> str:
    """What a recording wrote, as `make outputs` and `pytest --update-outputs` report it."""
    scripts = f" and {len(recording.scripts)} DDP runs" if recording.scripts is not None else ""
    return (f"recorded {len(recording.runs)} pages{scripts}: {len(changed)} file(s) changed"
            + "".join(f"\n  {path.relative_to(ROOT)}" for path in changed))


def record_gpu() -> store.Recording:
    """On a CUDA machine: the machine-dependent outputs of the pages that use a GPU (shown beside the CPU ones)."""
    runs = [record_page(page) for page in pages.GPU_PAGES]  # one after another: one GPU
    environment = runs[0]["environment"]
    if not environment["gpu"]:
        raise store.RecordingError("make gpu-check records GPU outputs, but this torch sees no CUDA GPU; run it "
                                   "on a machine with one (and a CUDA build of torch).")
    return store.Recording(manifest={"environment": environment}, outputs={
        key: text for run in runs for key, text in run["outputs"].items() if text and key in store.varying_patterns()})


def gpu_files(recording: store.Recording) -> dict[Path, str]:
    return recording.files(GPU_OUTPUTS)


def write_gpu(recording: store.Recording) -> list[Path]:
    write_files(files := gpu_files(recording))
    return list(files)


# What a page prints on a CUDA GPU about the device it runs on.
CUDA_LINES = {"a1_what_is_pytorch:cuda_available": "True", "a9_gpu_training:pick_device": "cuda"}


def record_report(path: Path) -> store.Recording:
    """The GPU outputs of a check-appendix-a.py report made on a CUDA machine, as record_gpu() would record
    them; refused if the pages' code has changed since, or if its runs were not made on the GPU it names."""
    report = store.read_report(path)
    device = report.get("device") or {}
    if device.get("device") != "cuda":
        raise store.RecordingError(f"{path} was made on a machine without a CUDA GPU, so it has no GPU outputs "
                                   "to record; the site records them from a report made on an NVIDIA GPU.")
    runs = device["pages"]
    for page in pages.GPU_PAGES:
        if runs.get(page, {}).get("status") != "ran":
            raise store.RecordingError(f"{path} has no run of docs/{page} on the GPU; run the checker on every "
                                       "page (no --page) and attach its report.")
        if {cell["key"]: cell["fingerprint"] for cell in runs[page]["cells"]} != pages.read(page).fingerprints:
            raise store.RecordingError(f"{path} ran an older version of docs/{page}; run the checker downloaded "
                                       "from the site as it is now and attach its new report.")
    environments = [runs[page]["environment"] for page in pages.GPU_PAGES]
    printed = {cell["key"]: cell["output"] for page in pages.GPU_PAGES for cell in runs[page]["cells"]}
    without_cuda = [f"torch {build} is a build without CUDA"  # signs that the runs were made without CUDA
                    for build in sorted({e["torch"] for e in environments if e["torch"].endswith("+cpu")})]
    without_cuda += [] if all(e.get("gpu") for e in environments) else ["torch found no CUDA GPU"]
    without_cuda += [f"{key} printed {printed[key].strip()!r}, not {line!r}" for key, line in CUDA_LINES.items()
                     if printed.get(key, line).strip() != line]
    if without_cuda:
        raise store.RecordingError(f"{path} names the GPU {device.get('gpu')}, but its runs were not made on it "
                                   f"({'; '.join(without_cuda)}), so it has no GPU outputs to record; run the checker "
                                   "with a CUDA build of torch on that GPU and attach its report.")
    varying = store.varying_patterns()
    outputs = {key: text for key, text in printed.items() if text and key in varying}
    for key, text in outputs.items():
        if problem := compare_text(store.stored_output(key) or "", text, key, varying):
            raise store.RecordingError(f"{path}: {key} on the GPU does not have the shape declared in "
                                       f"{store.VARYING.name}, so it is not recorded:\n{problem}")
    recorded_by = f"check-appendix-a.py --report on {report['date']} (checker {report['checker']})"
    return store.Recording(manifest={"environment": {**environments[0], "recorded_by": recorded_by}}, outputs=outputs)


def main() -> int | str:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` blocks run
    report = Path(sys.argv[2]) if sys.argv[1:2] == ["--report"] and len(sys.argv) == 3 else None
    gpu = report or sys.argv[1:] == ["--gpu"]
    try:
        recording = record_report(report) if report else record_gpu() if gpu else record()
    except store.RecordingError as error:
        return str(error)  # sys.exit prints it, status 1
    except (KeyboardInterrupt, SystemExit) as stop:
        print("interrupted: nothing was written", file=sys.stderr)
        return 130 if isinstance(stop, KeyboardInterrupt) else stop.code
    if gpu:
        print("recorded the GPU outputs:" + "".join(f"\n  {path.relative_to(ROOT)}" for path in write_gpu(recording)))
    else:
        print(summary(recording, store.write(recording)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
