"""What is stored, and how a fresh run is compared with it: the recorded outputs, the manifest, the
machine-dependent lines (snippets/varying_outputs.toml) and the drift report. The recorder writes here;
the hooks, the tests and the checker read here, running nothing."""

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tools import ROOT, tomllib
from tools.editions import EDITIONS
from tools.page_runner import compare_text, write_files
from tools.sections import SNIPPETS

VARYING = SNIPPETS / "varying_outputs.toml"
OUTPUTS = SNIPPETS / "outputs"  # what the pages printed when recorded, by module and section
MANIFEST = OUTPUTS / "recorded.json"
GPU_OUTPUTS = OUTPUTS / "gpu"  # what `make gpu-check` recorded on a CUDA machine
SCRIPT_OUTPUTS = ROOT / "scripts" / "outputs"  # the DDP scripts' recorded runs
RERECORD = "make outputs"
# Lines that no declared pattern may accept: a pattern that matches one of them accepts too much.
CANARIES = ["", "ERROR", "Traceback (most recent call last):", "Segmentation fault (core dumped)"]
NOTEBOOK_PLOT = re.compile(r'("text/html": )(?:"(?:[^"\\]|\\.)*"|\[[^\]]*\])')


class RecordingError(Exception):
    """A page's code failed, or the declarations are wrong; the message says where."""


@cache  # the hooks ask on every page; serving, each rebuild reads the tools afresh (tools/hooks/serve.py)
def varying_patterns(path: Path = VARYING) -> dict[str, dict]:
    """{"module:section": {"reason": ..., "lines": [regex, ...]}}; a pattern that accepts anything is refused."""
    declared = tomllib.loads(path.read_text())
    specs = {f"{module}:{section}": spec for module, sections in declared.items()
             for section, spec in sections.items()}
    for key, spec in specs.items():
        for pattern in spec["lines"]:  # the entry's own wrong lines: recordings of the right shape that are wrong
            if accepted := [c for c in CANARIES + spec.get("wrong", []) if re.fullmatch(pattern, c)]:
                raise RecordingError(f"{path.name}: [{key.replace(':', '.')}] pattern {pattern!r} also accepts "
                                     f"{accepted[0]!r}, so it would hide a broken output; make it match only "
                                     "the line it is for.")
    return specs


def to_store(stored: str | None, fresh: str, key: str, varying: dict[str, dict]) -> str:
    """What to store: a value that changes from run to run (a timing, an unseeded draw) keeps the stored one where
    only that value changed; a line that depends on the machine is what this machine prints."""
    spec = varying.get(key, {})
    keep = stored is not None and (spec.get("random") or spec.get("each_run"))
    return stored if keep and compare_text(stored, fresh, key, varying) is None else fresh


@dataclass
class Recording:  # everything `make outputs` writes, in memory
    outputs: dict[str, str] = field(default_factory=dict)  # "module:section" -> printed text
    manifest: dict = field(default_factory=dict)
    plots: dict[str, dict] = field(default_factory=dict)  # "module:section" -> {data, svg}
    notebooks: dict[Path, str] = field(default_factory=dict)  # docs/notebooks/NAME.ipynb (and docs-zh/…) -> text
    scripts: dict[str, str] | None = None  # scripts/outputs/NAME -> text; None: not run this time
    runs: dict[str, dict] = field(default_factory=dict)  # page -> record_page(page)

    def files(self, folder: Path = OUTPUTS) -> dict[Path, str]:  # into GPU_OUTPUTS: make gpu-check's
        files = {output_path(key, ".txt", folder): text for key, text in self.outputs.items()}
        for key, plot in self.plots.items():  # the same drawing in both editions: the code's labels are English
            files[output_path(key, ".plot.json", folder)] = json.dumps(plot["data"], indent=1) + "\n"
            files[output_path(key, ".svg", folder)] = plot["svg"]
        files[folder / MANIFEST.name] = json.dumps(self.manifest, indent=2, sort_keys=True) + "\n"
        scripts = {SCRIPT_OUTPUTS / name: text for name, text in (self.scripts or {}).items()}
        return {**files, **self.notebooks, **scripts}


def output_path(key: str, suffix: str, folder: Path = OUTPUTS) -> Path:
    module, section = key.split(":")
    return folder / module / f"{section}{suffix}"


def stored_text(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def stored_output(key: str) -> str | None:
    return stored_text(output_path(key, ".txt"))


def stored_files(scripts: bool = False) -> dict[Path, str]:
    """What is committed now, in the places a recording writes (with `scripts`, the DDP runs' too)."""
    recorded = [path for path in OUTPUTS.glob("*/*") if path.parent != GPU_OUTPUTS  # recorded by gpu-check
                and path.name.endswith((".txt", ".plot.json", ".svg"))]
    paths = [*recorded, MANIFEST,
             *(path for edition in EDITIONS.values() for path in edition.notebooks.glob("*.ipynb")),
             *(SCRIPT_OUTPUTS.glob("*.txt") if scripts else [])]
    return {path: path.read_text() for path in paths if path.exists()}


def drift(recording: Recording, stored: dict[Path, str] | None = None) -> list[str]:
    """Every difference between a fresh recording and what is committed, each a readable paragraph."""
    varying, problems, fresh = varying_patterns(), [], recording.files()
    stored = stored_files(recording.scripts is not None) if stored is None else stored
    for path in sorted(set(fresh) | set(stored)):
        name = path.relative_to(ROOT)
        if path not in fresh:
            problems.append(f"{name} is stored but nothing prints it any more; run `{RERECORD}`.")
        elif path not in stored:
            problems.append(f"{name} is not recorded; run `{RERECORD}`.")
        elif fresh[path] != stored[path] and path.suffix != ".svg":  # a plot: its data, not its drawing
            old, new = (NOTEBOOK_PLOT.sub(r"\1...", text) for text in (stored[path], fresh[path]))
            if diff := compare_text(old, new, f"{path.parent.name}:{path.stem}", varying, str(name)):
                problems.append(f"{name} differs from a fresh run (run `{RERECORD}` if the change is "
                                f"intended):\n{diff}")
    for key, spec in varying.items():  # a declaration must still be needed (the DDP runs': checked with them)
        where = f"{VARYING.name}: [{key.replace(':', '.')}]"
        if key.startswith("scripts:"):
            continue
        if key not in recording.outputs:
            problems.append(f"{where} names a section that prints nothing; remove the entry.")
        elif unused := [p for p in spec["lines"]
                        if not any(re.fullmatch(p, line) for line in recording.outputs[key].splitlines())]:
            problems.append(f"{where} pattern {unused[0]!r} matches no line it prints; remove it or fix it.")
    return problems


def write(recording: Recording) -> list[Path]:
    """Make the stored files what `recording` says; return the paths that changed."""
    fresh, stored = recording.files(), stored_files(recording.scripts is not None)
    changed = {path: text for path, text in fresh.items() if stored.get(path) != text}
    removed = [path for path in stored if path not in fresh]
    write_files(changed, removed)
    return [*changed, *removed]


def read_report(path: Path) -> dict:
    """The data a report of check-appendix-a.py --report carries (its last lines, in a comment)."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.rfind("<!-- check-appendix-a report data")
    try:
        return json.loads(text[text.index("\n", start):text.rindex("-->")])
    except ValueError:
        raise RecordingError(f"{path} is not a report of check-appendix-a.py --report (its data at the end "
                             "is missing or cut); attach the whole file it wrote.") from None
