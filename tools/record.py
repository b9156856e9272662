"""Record what every chapter page prints, and the notebooks made of those pages.

    python -m tools.record        # re-record (make outputs; pytest --update-outputs does the same)
    python -m tools.record --gpu  # on a CUDA machine: the GPU outputs (part of make gpu-check)
    python -m tools.record --report FILE  # the same, from check-appendix-a.py's report of a CUDA machine

Each page's download runs alone (tools/page_runner.py), once, for at most TIME_LIMIT seconds, and
gives all that is stored: what each section printed and drew (snippets/outputs/), where and from
which code it was recorded (recorded.json), the notebooks of both editions, and the DDP scripts'
runs (scripts/outputs/), all or nothing. A declared timing or unseeded draw keeps its stored value
where only the value changed, so an unchanged tree re-records to the same bytes.
"""

import json
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
    """Run the page's download alone: {"page": its pages.Page, "environment": {...}, "outputs": {"module:section":
    what it printed}, "plots": {"module:section": {data, svg}}}: the figure a section's code draws, as it is shown."""
    program = pages.read(page)
    try:
        run = page_runner.run_page(pages.download_text(page, program.sections), pages.download_name(page),
                                   [section.key for section in program.sections], TIME_LIMIT, plots=True)
    except TimedOut as stopped:
        raise store.RecordingError(f"the code of docs/{page} was {stopped}: does it wait for something?") from None
    except Failed as failed:
        raise store.RecordingError(f"the code of docs/{page} does not run alone: {failed}\n{failed.stderr}") from None
    return {"page": program, "environment": run["environment"], "outputs": run["outputs"],
            "plots": {key: {"data": plot["data"], "svg": in_both_palettes(plot["svg"])}
                      for key, plot in run["plots"].items()}}


def in_both_palettes(svg: str) -> str:
    """Matplotlib's SVG in the colour of the text around it (black becomes currentColor, the legend's white
    the page's background), as it is inline in both palettes; without the ids every plot has (figure_1), and
    its style rule for every element (*) kept to plots."""
    svg = re.sub(r' id="[\w.]+_\d+"', "", svg)
    svg = svg.replace("#000000", "currentColor").replace("fill: #ffffff", "fill: var(--md-default-bg-color, #fff)")
    svg = svg.replace("<svg ", '<svg fill="currentColor" ', 1)
    return svg.replace("*{", "figure.plot svg *{", 1)


def record(scripts: bool = True) -> store.Recording:
    """Run every chapter page once (and the DDP scripts' recorded runs), and make what is stored."""
    chapter_pages = pages.chapter_pages()
    # All in one pool, a DDP run (the longest jobs) and a page in turn: pages run from the start.
    jobs = [job for pair in zip_longest(SCRIPT_RUNS if scripts else [], chapter_pages) for job in pair if job]
    done = in_parallel(lambda job: (run_script if job in SCRIPT_RUNS else record_page)(job), jobs, os.cpu_count() or 2)
    runs = {page: done[page] for page in chapter_pages}
    varying = store.varying_patterns()
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
            module, section = key.split(":")
            raise store.RecordingError(f"snippets/{module}.py, section '{section}' draws a plot, but "
                                       f"tools/words.toml has no words 'plot:{key}' (what the plot shows: its "
                                       f"alt text) in {' and '.join(missing)}; add them.")
    for edition in EDITIONS.values():  # one notebook per language: the same cells, the text of its edition
        for name in pages.NOTEBOOKS:
            recording.notebooks[edition.notebooks / f"{name}.ipynb"] = notebook_text(
                name, recording.outputs, recording.plots, edition)
    return recording


def summary(recording: store.Recording, changed: list[Path]) -> str:
    """What a recording wrote, as `make outputs` and `pytest --update-outputs` report it."""
    scripts = f" and {len(recording.scripts)} DDP runs" if recording.scripts is not None else ""
    return (f"recorded {len(recording.runs)} pages{scripts}: {len(changed)} file(s) changed"
            + "".join(f"\n  {path.relative_to(ROOT)}" for path in changed))


def record_gpu() -> store.Recording:
    """On a CUDA machine: the machine-dependent outputs of the pages that use a GPU, into
    snippets/outputs/gpu/ (the pages show them beside the CPU ones, labelled with the GPU)."""
    runs = dict(zip(pages.GPU_PAGES, map(record_page, pages.GPU_PAGES)))  # one after another: one GPU
    environment = next(iter(runs.values()))["environment"]
    if not environment["gpu"]:
        raise store.RecordingError("make gpu-check records GPU outputs, but this torch sees no CUDA GPU; run it "
                                   "on a machine with one (and a CUDA build of torch).")
    varying = store.varying_patterns()
    return store.Recording(runs=runs, manifest={"environment": environment}, outputs={
        key: text for run in runs.values() for key, text in run["outputs"].items() if text and key in varying})


def gpu_files(recording: store.Recording) -> dict[Path, str]:
    files = {store.output_path(key, ".txt", GPU_OUTPUTS): text for key, text in recording.outputs.items()}
    files[GPU_OUTPUTS / "recorded.json"] = json.dumps(recording.manifest, indent=2, sort_keys=True) + "\n"
    return files


def write_gpu(recording: store.Recording) -> list[Path]:
    write_files(files := gpu_files(recording))
    return list(files)


# What a page prints about the device it runs on, and what it prints on a CUDA GPU.
CUDA_LINES = {"a1_what_is_pytorch:cuda_available": "True", "a9_gpu_training:pick_device": "cuda"}


def signs_of_no_cuda(runs: dict) -> list[str]:
    """What, in a report's device runs, says they ran without CUDA: the torch build, the GPU torch saw,
    the device lines the pages printed."""
    environments = [runs[page]["environment"] for page in pages.GPU_PAGES]
    misfits = [f"torch {build} is a build without CUDA"
               for build in sorted({e["torch"] for e in environments if e["torch"].endswith("+cpu")})]
    if not all(e.get("gpu") for e in environments):
        misfits.append("torch found no CUDA GPU")
    return misfits + [f"{cell['key']} printed {cell['output'].strip()!r}, not {CUDA_LINES[cell['key']]!r}"
                      for page in pages.GPU_PAGES for cell in runs[page]["cells"]
                      if cell["key"] in CUDA_LINES and cell["output"].strip() != CUDA_LINES[cell["key"]]]


def record_report(path: Path) -> store.Recording:
    """The GPU outputs of a check-appendix-a.py report made on a CUDA machine, as record_gpu() would record
    them; refused if the pages' code has changed since, or if its runs were not made on the GPU it names."""
    report = store.read_report(path)
    device = report.get("device") or {}
    if device.get("device") != "cuda":
        raise store.RecordingError(f"{path} was made on a machine without a CUDA GPU, so it has no GPU outputs "
                                   "to record; the site records them from a report made on an NVIDIA GPU.")
    varying, runs = store.varying_patterns(), device["pages"]
    for page in pages.GPU_PAGES:
        if runs.get(page, {}).get("status") != "ran":
            raise store.RecordingError(f"{path} has no run of docs/{page} on the GPU; run the checker on every "
                                       "page (no --page) and attach its report.")
    if misfits := signs_of_no_cuda(runs):
        raise store.RecordingError(f"{path} names the GPU {device.get('gpu')}, but its runs were not made on it "
                                   f"({'; '.join(misfits)}), so it has no GPU outputs to record; run the checker "
                                   "with a CUDA build of torch on that GPU and attach its report.")
    recording = store.Recording(runs=runs, manifest={"environment": {
        **runs[pages.GPU_PAGES[0]]["environment"],
        "recorded_by": f"check-appendix-a.py --report on {report['date']} (checker {report['checker']})"}})
    for page in pages.GPU_PAGES:
        run = runs[page]
        if {cell["key"]: cell["fingerprint"] for cell in run["cells"]} != pages.read(page).fingerprints:
            raise store.RecordingError(f"{path} ran an older version of docs/{page}; run the checker downloaded "
                                       "from the site as it is now and attach its new report.")
        for cell in run["cells"]:
            key, text = cell["key"], cell["output"]
            if text and key in varying:
                if problem := compare_text(store.stored_output(key) or "", text, key, varying):
                    raise store.RecordingError(f"{path}: {key} on the GPU does not have the shape declared in "
                                               f"{store.VARYING.name}, so it is not recorded:\n{problem}")
                recording.outputs[key] = text
    return recording


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` blocks run
    gpu = sys.argv[1:] == ["--gpu"] or sys.argv[1:2] == ["--report"] and len(sys.argv) == 3
    try:
        if gpu:
            changed = write_gpu(record_report(Path(sys.argv[2])) if sys.argv[2:] else record_gpu())
        else:
            recording = record()
    except store.RecordingError as error:
        print(error, file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit) as stop:
        print("interrupted: nothing was written", file=sys.stderr)
        return 130 if isinstance(stop, KeyboardInterrupt) else stop.code
    if gpu:
        print("recorded the GPU outputs:" + "".join(f"\n  {path.relative_to(ROOT)}" for path in changed))
    else:
        print(summary(recording, store.write(recording)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
