"""Record what every chapter page prints, and the notebooks made of those pages.

    python -m tools.record        # re-record (make outputs; pytest --update-outputs does the same)
    python -m tools.record --gpu  # on a CUDA machine: the GPU outputs (part of make gpu-check)
    python -m tools.record --report FILE  # the same, from check-appendix-a.py's report of a CUDA machine

Each page's program (tools/pages.py) runs as the page's download, alone: in an empty folder,
under `python -I`, in a Python that cannot import this project, cell by cell in one namespace.
That single run gives everything that is stored:

- snippets/outputs/MODULE/SECTION.txt, what each section printed (pages show it under the code);
- snippets/outputs/recorded.json, where it was recorded and, for each cell of each page, a
  fingerprint of the code it ran after (the build refuses an output whose code has changed since);
- docs/notebooks/*.ipynb, the pages' text and code with these outputs, and docs-zh/notebooks/*.ipynb,
  the same cells with the Chinese edition's text;
- scripts/outputs/*.txt, what the DDP scripts print on 2 CPU processes with Gloo (the DDP tests
  compare their own launches with these).

Lines that depend on the machine (a version, a timing, an unseeded weight) are declared in
snippets/varying_outputs.toml; the check compares their shape, and re-recording keeps the stored
value of a line that only changed its value, so an unchanged tree re-records to the same bytes.
Writing is all or nothing: every file is written beside its target and renamed into place at the
end, with Ctrl-C held back for those milliseconds.
"""

import contextlib
import difflib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the backport, pinned for it in requirements-site.in
    import tomli as tomllib

from tools import pages, plots
from tools.editions import EDITIONS, Edition
from tools.sections import OUTPUTS, ROOT, SNIPPETS

VARYING = SNIPPETS / "varying_outputs.toml"
MANIFEST = OUTPUTS / "recorded.json"
RERECORD = "make outputs"
KERNEL = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# Lines that no declared pattern may accept: a pattern that matches one of them accepts too much.
CANARIES = ["", "ERROR", "Traceback (most recent call last):", "Segmentation fault (core dumped)"]


class RecordingError(Exception):
    """A page's code failed, or the declarations are wrong; the message says where."""


# Runs in the child, `python -I -c RUNNER SCRIPT RESULT PLOTTERS`: the download's cells one by one in a real
# __main__ module (pickling a class defined in a cell then works as in a script), stdout per cell.
RUNNER = r"""
import contextlib, importlib.util, io, json, os, platform, sys, traceback, types
script, result, plots = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
# {index of the cell: its plotter's source}, {language: the plots' words in that edition}
plotters, plot_words = plots.get("plotters", {}), plots.get("words", {})
if importlib.util.find_spec("snippets") is not None:
    sys.exit("this Python can import the project's `snippets` package, but a page must run without it; "
             "uninstall the project from this environment (pip uninstall appendix-a-executable-book)")
text = open(script, encoding="utf-8").read()
main = types.ModuleType("__main__")
main.__file__ = script
sys.modules["__main__"] = main
outputs, line = [], 1
for number, part in enumerate(text.split("\n# %%\n")):
    code = compile("\n" * (line - 1) + part, script, "exec")  # tracebacks name the real line
    line += part.count("\n") + 2
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            exec(code, main.__dict__)
    except BaseException:
        sys.exit(f"{os.path.basename(script)}: cell {number} raised:\n{traceback.format_exc()}")
    outputs.append(buffer.getvalue())
    if str(number - 1) in plotters:  # cell 0 is the header; a maintainer's plot of what this cell made
        import matplotlib
        matplotlib.rcParams["svg.hashsalt"] = "appendix-a"  # the same ids in the SVG on every run
        matplotlib.rcParams["svg.fonttype"] = "none"  # text as text, not glyph outlines: a third of the size
        # Chinese labels are laid out with a CJK font where one is installed (fonts-wqy-microhei); the
        # SVG keeps the text as text, which the reader's browser draws with its own fonts.
        matplotlib.rcParams["font.family"] = ["DejaVu Sans", "WenQuanYi Micro Hei"]
        plot = {}
        exec(plotters[str(number - 1)], plot)
        plotter = plot[next(k for k in plot if not k.startswith("__"))]
        for language, words in plot_words.items():
            figure, title, data = plotter(main.__dict__, outputs[-1], words)
            figure.savefig(f"{result}.{number - 1}.{language}.svg", format="svg", metadata={"Date": None})
        outputs[-1] = {"text": outputs[-1], "plot": {"title": title, "data": data}}
import torch
environment = {"torch": torch.__version__, "python": platform.python_version(),
               "machine": f"{platform.system()} {platform.machine()}", "cores": os.cpu_count(),
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
               "mps": torch.backends.mps.is_available()}
with open(result, "w") as file:
    json.dump({"outputs": outputs[1:], "environment": environment}, file)
"""


def _die_with_parent():
    """In the child: be killed when the recorder dies, however it dies (Linux)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


running = set()  # the children now running, stopped at once if the recording is interrupted


def run_page(page: str) -> dict:
    """Run the page's download alone; {"cells": [...], "outputs": [text per cell], "environment": {...}}."""
    cells = pages.program(page)
    with tempfile.TemporaryDirectory(prefix="page-run-") as folder:
        script = Path(folder) / pages.download_name(page)
        script.write_text(pages.download_text(page, cells))
        result = Path(folder) / "result.json"
        plot_words = {language: {key: text for key, text in edition.words.items() if key.startswith("plot_")}
                      for language, edition in EDITIONS.items()}
        to_plot = json.dumps({"plotters": plots.plotters_for(page, cells), "words": plot_words})
        child = subprocess.Popen([sys.executable, "-I", "-c", RUNNER, str(script), str(result), to_plot],
                                 cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "MPLBACKEND": "Agg"},
                                 preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        running.add(child)
        try:
            _, stderr = child.communicate()
        finally:
            running.discard(child)
        if child.returncode != 0:
            raise RecordingError(f"the code of docs/{page} does not run alone:\n{stderr.strip()}")
        run = json.loads(result.read_text())
        run["plots"] = {}
        for index, output in enumerate(run["outputs"]):
            if isinstance(output, dict):
                svg = {language: Path(f"{result}.{index}.{language}.svg").read_text() for language in EDITIONS}
                run["plots"][cells[index].key] = {**output["plot"], "svg": svg}
                run["outputs"][index] = output["text"]
    return {"cells": cells, **run}


def in_parallel(function, items) -> list:
    """function(item) for every item, on every core; an interruption stops the children at once."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        try:
            return list(pool.map(function, items))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            for child in list(running):  # a DDP launch gets SIGTERM first, so that it can clean up
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM) if os.getpgid(child.pid) == child.pid else child.kill()
            for child in list(running):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(5)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL) if os.getpgid(child.pid) == child.pid else child.kill()
            raise


# ---------------------------------------------------------------------------------------------
# The DDP scripts' runs

SCRIPT_OUTPUTS = ROOT / "scripts" / "outputs"
SCRIPT_TIME_LIMIT = 300  # seconds for one run; past it its process group is killed


@dataclass(frozen=True)
class ScriptRun:
    """A recorded run: the command a reader types, the arguments after `python`, what is kept.
    A run that trains is recorded from stdout, where the scripts print the same bytes on every run
    (notes that change, such as where a snapshot is, go to stderr); a failing one from stderr."""

    command: str
    args: tuple
    stream: str = "stdout"
    status: int = 0  # the exit status the run must have


SCRIPT_RUNS = {
    "DDP-script.txt": ScriptRun("python scripts/DDP-script.py", ("scripts/DDP-script.py",)),
    "DDP-script-torchrun.txt": ScriptRun(
        "torchrun --standalone --nproc_per_node=2 scripts/DDP-script-torchrun.py",
        ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "scripts/DDP-script-torchrun.py")),
    "DDP-script-fault-stall.txt": ScriptRun(
        "python scripts/DDP-script.py --fault stall --timeout 5",
        ("scripts/DDP-script.py", "--fault", "stall", "--timeout", "5"), stream="stderr", status=1),
}


def ddp_environment(**extra) -> dict:
    """The caller's environment on the CPU, without what would steer a DDP launch: the same
    recording on every machine."""
    steering = {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                "GROUP_RANK", "USE_LIBUV", "OMP_NUM_THREADS", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items()
           if k not in steering and not k.startswith(("TORCHELASTIC_", "TORCH_DISABLE_SHARE"))}
    return {**env, "CUDA_VISIBLE_DEVICES": "", **extra}


def run_script(name: str) -> str:
    """What SCRIPT_RUNS[name] prints on its recorded stream; RecordingError if it ends otherwise."""
    run = SCRIPT_RUNS[name]
    with tempfile.TemporaryDirectory(prefix="ddp-run-") as tmp:  # torchrun's files go, however it ends
        child = subprocess.Popen([sys.executable, *run.args], cwd=ROOT, env=ddp_environment(TMPDIR=tmp),
                                 text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        running.add(child)
        try:
            stdout, stderr = child.communicate(timeout=SCRIPT_TIME_LIMIT)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            raise RecordingError(f"`{run.command}` ran for more than {SCRIPT_TIME_LIMIT} s and was stopped.") from None
        finally:
            running.discard(child)
    if child.returncode != run.status:
        raise RecordingError(f"`{run.command}` exited with status {child.returncode}, not {run.status}. "
                             f"Its standard error:\n{stderr}")
    return stdout if run.stream == "stdout" else stderr


# ---------------------------------------------------------------------------------------------
# Machine-dependent lines

def varying_patterns(path: Path = VARYING) -> dict[str, dict]:
    """{"module:section": {"reason": ..., "lines": [regex, ...]}}; a pattern that accepts anything is refused."""
    declared = tomllib.loads(path.read_text())
    specs = {f"{module}:{section}": spec for module, sections in declared.items()
             for section, spec in sections.items()}
    for key, spec in specs.items():
        for pattern in spec["lines"]:
            if accepted := [c for c in CANARIES if re.fullmatch(pattern, c)]:
                raise RecordingError(f"{path.name}: [{key.replace(':', '.')}] pattern {pattern!r} also accepts "
                                     f"{accepted[0]!r}, so it would hide a broken output; make it match only "
                                     "the line it is for.")
    return specs


def compare_text(recorded: str, fresh: str, patterns: list[str], label: str) -> str | None:
    """None if `fresh` matches `recorded`, else a unified diff. A line that differs passes only if one
    of `patterns` matches the whole of both the recorded and the fresh line."""
    old, new = recorded.splitlines(keepends=True), fresh.splitlines(keepends=True)
    if len(old) == len(new) and all(a == b or _same_shape(a, b, patterns) for a, b in zip(old, new)):
        return None
    return "".join(difflib.unified_diff(old, new, f"recorded {label}", f"fresh run of {label}"))


def _same_shape(a: str, b: str, patterns: list[str]) -> bool:
    if a.endswith("\n") != b.endswith("\n"):
        return False
    a, b = a.rstrip("\n"), b.rstrip("\n")
    return any(re.fullmatch(p, a) and re.fullmatch(p, b) for p in patterns)


# ---------------------------------------------------------------------------------------------
# A recording: everything `make outputs` writes, in memory

@dataclass
class Recording:
    outputs: dict[str, str] = field(default_factory=dict)  # "module:section" -> printed text
    manifest: dict = field(default_factory=dict)
    plots: dict[str, dict] = field(default_factory=dict)  # "module:section" -> {title, data, svg: {language: svg}}
    notebooks: dict[Path, str] = field(default_factory=dict)  # docs/notebooks/NAME.ipynb (and docs-zh/…) -> text
    scripts: dict[str, str] | None = None  # scripts/outputs/NAME -> text; None: not run this time
    runs: dict[str, dict] = field(default_factory=dict)  # page -> run_page()

    def files(self) -> dict[Path, str]:
        files = {output_path(key, ".txt"): text for key, text in self.outputs.items()}
        for key, plot in self.plots.items():
            files[output_path(key, ".plot.json")] = json.dumps(
                {"title": plot["title"], "data": plot["data"]}, indent=1) + "\n"
            for edition in EDITIONS.values():
                files[output_path(key, edition.plot_suffix)] = plot["svg"][edition.language]
        files[MANIFEST] = json.dumps(self.manifest, indent=2, sort_keys=True) + "\n"
        files.update(self.notebooks)
        files.update({SCRIPT_OUTPUTS / name: text for name, text in (self.scripts or {}).items()})
        return files


def output_path(key: str, suffix: str) -> Path:
    module, section = key.split(":")
    return OUTPUTS / module / f"{section}{suffix}"


def record(scripts: bool = True) -> Recording:
    """Run every chapter page once (and the DDP scripts' recorded runs), and make what is stored."""
    chapter_pages = pages.chapter_pages()
    # All in one pool, a DDP run (the longest jobs) and a page in turn: pages run from the start.
    jobs = [job for pair in zip_longest(SCRIPT_RUNS if scripts else [], chapter_pages) for job in pair if job]
    done = dict(zip(jobs, in_parallel(lambda job: (run_script if job in SCRIPT_RUNS else run_page)(job), jobs)))
    runs = {page: done[page] for page in chapter_pages}
    varying = varying_patterns()
    recording = Recording(runs=runs)
    if scripts:
        recording.scripts = {name: done[name] for name in SCRIPT_RUNS}
        for name, text in recording.scripts.items():  # a value that only changed keeps the stored one
            stored = SCRIPT_OUTPUTS / name
            patterns = varying.get(f"scripts:{Path(name).stem}", {}).get("lines", [])
            if stored.exists() and compare_text(stored.read_text(), text, patterns, name) is None:
                recording.scripts[name] = stored.read_text()
    recording.manifest = {"environment": next(iter(runs.values()))["environment"], "pages": {}}
    for page, run in runs.items():
        cells = run["cells"]
        recording.manifest["pages"][page] = {
            cell.key: {"code": fingerprint, "prints": bool(text)}
            for cell, fingerprint, text in zip(cells, pages.fingerprints(cells), run["outputs"])}
        recording.plots.update(run["plots"])
        for cell, text in zip(cells, run["outputs"]):
            if not text:
                continue
            earlier = recording.outputs.setdefault(cell.key, text)
            patterns = varying.get(cell.key, {}).get("lines", [])
            if compare_text(earlier, text, patterns, cell.key):
                raise RecordingError(f"snippets/{cell.module}.py, section '{cell.section}' prints differently "
                                     f"on docs/{page} than on an earlier page; a section shown on two pages "
                                     "must print the same on both.")
    for key, text in recording.outputs.items():  # a value that only changed keeps the stored one
        stored = _stored_output(key)
        patterns = varying.get(key, {}).get("lines", [])
        if stored is not None and stored != text and compare_text(stored, text, patterns, key) is None:
            recording.outputs[key] = stored
    for edition in EDITIONS.values():  # one notebook per language: the same cells, the text of its edition
        for name in pages.NOTEBOOKS:
            recording.notebooks[edition.notebooks / f"{name}.ipynb"] = notebook_text(
                name, runs, recording.outputs, edition)
    return recording


def _stored_output(key: str) -> str | None:
    module, section = key.split(":")
    path = OUTPUTS / module / f"{section}.txt"
    return path.read_text() if path.exists() else None


def stored_files(scripts: bool = False) -> dict[Path, str]:
    """What is committed now, in the places a recording writes (with `scripts`, the DDP runs' too)."""
    paths = [*OUTPUTS.glob("[!g]*/*.txt"), *OUTPUTS.glob("*/*.plot.json"), *OUTPUTS.glob("*/*.svg"), MANIFEST,
             *(path for edition in EDITIONS.values() for path in edition.notebooks.glob("*.ipynb")),
             *(SCRIPT_OUTPUTS.glob("*.txt") if scripts else [])]
    return {path: path.read_text() for path in paths if path.exists()}


def drift(recording: Recording, stored: dict[Path, str] | None = None) -> list[str]:
    """Every difference between a fresh recording and what is committed, each a readable paragraph."""
    varying, problems = varying_patterns(), []
    fresh = recording.files()
    stored = stored_files(recording.scripts is not None) if stored is None else stored
    for path in sorted(set(fresh) | set(stored)):
        name = path.relative_to(ROOT)
        if path not in fresh:
            problems.append(f"{name} is stored but nothing prints it any more; run `{RERECORD}`.")
        elif path not in stored:
            problems.append(f"{name} is not recorded; run `{RERECORD}`.")
        elif fresh[path] != stored[path] and path.suffix != ".svg":  # a plot's data is checked, not its pixels
            key = f"{path.parent.name}:{path.stem}"
            old, new = (_without_images(text) for text in (stored[path], fresh[path]))
            diff = compare_text(old, new, varying.get(key, {}).get("lines", []), str(name))
            if diff:
                problems.append(f"{name} differs from a fresh run (run `{RERECORD}` if the change is "
                                f"intended):\n{diff}")
    for key, spec in varying.items():  # a declaration must still be needed, or it goes
        where = f"{VARYING.name}: [{key.replace(':', '.')}]"
        if key.split(":")[0] == "scripts":
            continue  # the DDP scripts' runs, checked with them
        if key not in recording.outputs:
            problems.append(f"{where} names a section that prints nothing; remove the entry.")
        elif unused := [p for p in spec["lines"]
                        if not any(re.fullmatch(p, line) for line in recording.outputs[key].splitlines())]:
            problems.append(f"{where} pattern {unused[0]!r} matches no line it prints; remove it or fix it.")
    return problems


def _without_images(text: str) -> str:
    """A notebook's text with its plots' pixels left out (their data is compared in .plot.json)."""
    return re.sub(r'("image/svg\+xml": )(?:"(?:[^"\\]|\\.)*"|\[[^\]]*\])', r"\1...", text)


# ---------------------------------------------------------------------------------------------
# Notebooks: the pages' text and code, with the outputs of the pages' runs

ADMONITION = re.compile(r'^(?:!!!|\?\?\?\+?|===) ?(\w*)(?: *"([^"]*)")?\s*$')
FENCE = re.compile(r"^(`{3,})(\w*)")
LOCAL_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://)[^)]*\)")


def _markdown_and_code(page: str, edition: Edition):
    """The page as a list of ("markdown", line) and ("code", index in its program, from the earlier-code block)."""
    text = re.sub(r"\A---\n.*?\n---\n", "", pages.page_text(page, edition.docs), flags=re.S)
    text = re.sub(r"<figure.*?</figure>\n?", "", text, flags=re.S)
    items, fence, language, include, earlier = [], None, "", 0, False
    for line in text.splitlines():
        line = re.sub(r"^(?: {4})+", "", line)  # bodies of admonitions and tabs become plain text
        if fence:
            if line.startswith(fence):
                fence, earlier = None, False
                items.append(("markdown", {"math": "$$", "python": None}.get(language, line)))
            elif pages.INCLUDE.match(line):
                items.append(("code", include, earlier))
                include += 1
            elif language != "python":
                items.append(("markdown", line))
            continue
        if match := FENCE.match(line):
            fence, language = match.groups()
            items.append(("markdown", {"math": "$$", "python": None}.get(language, line)))
        elif match := ADMONITION.match(line):
            heading = match[2] if match[2] is not None else match[1].capitalize()
            earlier = heading == edition.words["earlier_code"]
            items.append(("markdown", None if earlier or not heading else f"**{heading}**\n"))
        elif not (earlier or line.startswith("<") or "--8<--" in line):
            if heading := re.match(r"^(#{1,5}) (.*?)(?: \{ *#[\w-]+ *\})?$", line):
                # one level down; no code marks (the TOC) and no `{ #anchor }`, which Jupyter shows as text
                line = f"#{heading[1]} {heading[2].replace('`', '')}"
            items.append(("markdown", LOCAL_LINK.sub(r"\1", line)))
    return [item for item in items if item[1] is not None]


def _markdown_cell(lines: list[str]):
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return [nbformat.v4.new_markdown_cell(text)] if text else []


def notebook_text(name: str, runs: dict[str, dict], outputs: dict[str, str], edition: Edition) -> str:
    """The notebook `name` as it is stored: text cells from its pages in `edition`, code cells with outputs."""
    notebook_pages, words = pages.NOTEBOOKS[name], edition.words
    plot_of = {(page, key): plot for page in notebook_pages for key, plot in runs[page]["plots"].items()}
    chapters = [pages.title(page, edition.docs).split(" ")[0] for page in notebook_pages]
    if len(chapters) > 1:
        chapters = [words["chapter_range"].format(first=chapters[0], last=chapters[-1])]
    intro = edition.spaced(words["notebook_intro"].format(chapters=chapters[0]))
    cells = [nbformat.v4.new_markdown_cell(f"# {words[name]}\n\n{intro}")]
    seen = set()
    for page in notebook_pages:
        program, markdown, noted = runs[page]["cells"], [], False
        for item in _markdown_and_code(page, edition):
            if item[0] == "markdown":
                markdown.append(item[1])
                continue
            cell, earlier = program[item[1]], item[2]
            if cell.key in seen:
                continue  # an earlier page of this notebook defined it already
            if earlier and not noted:
                markdown.append(f"\n{words['earlier_code_cell']}")
                noted = True
            cells += _markdown_cell(markdown)
            markdown = []
            seen.add(cell.key)
            code = nbformat.v4.new_code_cell(cell.code)
            code.metadata["section"] = cell.key
            if cell.key in outputs:
                code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=outputs[cell.key])]
            if plot := plot_of.get((page, cell.key)):
                code.outputs.append(nbformat.v4.new_output(
                    "display_data", data={"image/svg+xml": plot["svg"][edition.language],
                                          "text/plain": words.get(plot["title"], plot["title"])}))
            cells.append(code)
        cells += _markdown_cell(markdown)
    count = 0
    for number, cell in enumerate(cells):
        cell.id = f"cell-{number:03d}"  # stable ids: re-recording changes no byte
        if cell.cell_type == "code":
            count += 1
            cell.execution_count = count
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNEL,
                                                               "language_info": {"name": "python"}})
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"


# ---------------------------------------------------------------------------------------------
# Writing, all or nothing

@contextlib.contextmanager
def signals_held():
    """Hold Ctrl-C and SIGTERM back while files are renamed into place; they arrive afterwards."""
    held = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def replace_files(files: dict[Path, str], removed=()) -> None:
    """Write every file beside its target, then rename them all into place and delete `removed`,
    with Ctrl-C held back: the set changes all at once or not at all."""
    with signals_held():
        staged = []
        try:
            for path, text in files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                temporary = path.with_name(f".{path.name}.recording")
                temporary.write_text(text)
                staged.append((temporary, path))
        except BaseException:
            for temporary, _ in staged:
                temporary.unlink(missing_ok=True)
            raise
        for temporary, path in staged:
            os.replace(temporary, path)
        for path in removed:
            path.unlink()


def write(recording: Recording) -> list[Path]:
    """Make the stored files what `recording` says; return the paths that changed."""
    fresh, stored = recording.files(), stored_files(recording.scripts is not None)
    changed = {path: text for path, text in fresh.items() if stored.get(path) != text}
    removed = [path for path in stored if path not in fresh]
    replace_files(changed, removed)
    return [*changed, *removed]


GPU_PAGES = ["a1-what-is-pytorch.md", "a9-gpu-training.md", "exercises.md"]
GPU_OUTPUTS = OUTPUTS / "gpu"


def record_gpu() -> Recording:
    """On a CUDA machine: the machine-dependent outputs of the pages that use a GPU, into
    snippets/outputs/gpu/ (the pages show them beside the CPU ones, labelled with the GPU)."""
    runs = dict(zip(GPU_PAGES, map(run_page, GPU_PAGES)))  # one after another: one GPU
    environment = next(iter(runs.values()))["environment"]
    if not environment["gpu"]:
        raise RecordingError("make gpu-check records GPU outputs, but this torch sees no CUDA GPU; run it on a "
                             "machine with one (and a CUDA build of torch).")
    varying = varying_patterns()
    recording = Recording(runs=runs)
    recording.manifest = {"environment": environment}
    for run in runs.values():
        for cell, text in zip(run["cells"], run["outputs"]):
            if text and cell.key in varying:
                recording.outputs[cell.key] = text
    return recording


def write_gpu(recording: Recording) -> list[Path]:
    files = {GPU_OUTPUTS / f"{key.replace(':', '/')}.txt": text for key, text in recording.outputs.items()}
    files[GPU_OUTPUTS / "recorded.json"] = json.dumps(recording.manifest, indent=2, sort_keys=True) + "\n"
    replace_files(files)
    return list(files)


REPORT_DATA = "<!-- check-appendix-a report data"


def read_report(path: Path) -> dict:
    """The data a report of check-appendix-a.py --report carries (its last lines, in a comment)."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.rfind(REPORT_DATA)
    try:
        return json.loads(text[text.index("\n", start):text.rindex("-->")])
    except ValueError:
        raise RecordingError(f"{path} is not a report of check-appendix-a.py --report (its data at the end "
                             "is missing or cut); attach the whole file it wrote.") from None


def record_report(path: Path) -> Recording:
    """The GPU outputs of a check-appendix-a.py report made on a CUDA machine, as record_gpu() would
    record them there, with where they come from; refused if the pages' code has changed since."""
    report = read_report(path)
    device = report.get("device") or {}
    if device.get("device") != "cuda":
        raise RecordingError(f"{path} was made on a machine without a CUDA GPU, so it has no GPU outputs to "
                             "record; the site records them from a report made on an NVIDIA GPU.")
    varying, runs = varying_patterns(), device["pages"]
    for page in GPU_PAGES:
        if runs.get(page, {}).get("status") != "ran":
            raise RecordingError(f"{path} has no run of docs/{page} on the GPU; run the checker on every page "
                                 "(no --page) and attach its report.")
    recording = Recording(runs=runs)
    recording.manifest = {"environment": {**runs[GPU_PAGES[0]]["environment"], "recorded_by": (
        f"check-appendix-a.py --report on {report['date']} (checker {report['checker']})")}}
    for page in GPU_PAGES:
        run, cells = runs[page], pages.program(page)
        if [(c["key"], c["fingerprint"]) for c in run["cells"]] != list(
                zip((cell.key for cell in cells), pages.fingerprints(cells))):
            raise RecordingError(f"{path} ran an older version of docs/{page}; run the checker downloaded from "
                                 "the site as it is now and attach its new report.")
        for cell in run["cells"]:
            key, text = cell["key"], cell["output"]
            if text and key in varying:
                problem = compare_text(_stored_output(key) or "", text, varying[key]["lines"], key)
                if problem:
                    raise RecordingError(f"{path}: {key} on the GPU does not have the shape declared in "
                                         f"{VARYING.name}, so it is not recorded:\n{problem}")
                recording.outputs[key] = text
    return recording


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` blocks run
    if sys.argv[1:] == ["--gpu"] or sys.argv[1:2] == ["--report"] and len(sys.argv) == 3:
        try:
            changed = write_gpu(record_report(Path(sys.argv[2])) if sys.argv[2:] else record_gpu())
        except RecordingError as error:
            print(error, file=sys.stderr)
            return 1
        print("recorded the GPU outputs:" + "".join(f"\n  {path.relative_to(ROOT)}" for path in changed))
        return 0
    from matplotlib import font_manager  # the Chinese plots' labels are laid out with a CJK font

    try:
        font_manager.findfont("WenQuanYi Micro Hei", fallback_to_default=False)
    except ValueError:
        print("note: no WenQuanYi Micro Hei font here, so the Chinese plots' labels are measured with a "
              "Latin font and may not fit their boxes; install it first (Debian: apt-get install "
              "fonts-wqy-microhei).", file=sys.stderr)
    try:
        recording = record()
    except RecordingError as error:
        print(error, file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit) as stop:
        print("interrupted: nothing was written", file=sys.stderr)
        return 130 if isinstance(stop, KeyboardInterrupt) else stop.code
    changed = write(recording)
    print(f"recorded {len(recording.runs)} pages and {len(recording.scripts)} DDP runs: {len(changed)} file(s) changed"
          + "".join(f"\n  {path.relative_to(ROOT)}" for path in changed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
