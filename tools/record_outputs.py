"""Record what every snippet section prints, or check it against what is stored.

    python -m tools.record_outputs          # re-record snippets/outputs/ (make outputs)
    python -m tools.record_outputs --check  # compare with a fresh run; exit 1 with diffs

Each module runs in a fresh process, its sections one after another in one namespace,
as a reader's notebook would run them. A section's printed output is stored as
snippets/outputs/MODULE/SECTION.txt; a section that prints nothing gets no file.

Lines that depend on the machine (the torch version, a timing) are declared in
snippets/varying_outputs.toml. The check compares their shape (a regular expression)
instead of their value; every other character must match.
"""

import argparse
import contextlib
import difflib
import io
import json
import os
import platform
import re
import subprocess
import sys
import tomllib
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.sections import OUTPUTS, ROOT, SNIPPETS, read_chunks, recorded_modules

VARYING = SNIPPETS / "varying_outputs.toml"
RECORDED_ON = OUTPUTS / "recorded-on.json"
RERECORD = "make outputs"


class SnippetError(Exception):
    """A snippet module could not be run; the message says which module and section."""


def _cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def environment() -> dict:
    """Where outputs were recorded: shown on the pages next to machine-dependent lines."""
    import torch

    if torch.cuda.is_available():
        device = torch.cuda.get_device_name(0)
    elif torch.backends.mps.is_available():
        device = "Apple MPS"
    else:
        device = f"CPU only ({_cpu_name()}, {os.cpu_count()} cores)"
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "device": device,
    }


def _run_in_this_process(path: Path) -> None:
    """Child side: execute the module's chunks in order and print {section: output} as JSON."""
    # A real __main__ module, as `python snippets/MODULE.py` has, so that pickling a class
    # defined in a section finds it.
    main_module = types.ModuleType("__main__")
    main_module.__file__ = str(path)
    sys.modules["__main__"] = main_module
    namespace = main_module.__dict__
    outputs = {}
    sys.path.insert(0, str(path.parent))  # as `python snippets/MODULE.py` would
    for chunk in read_chunks(path):
        # Pad with blank lines so that tracebacks point at the real line of the file.
        code = compile("\n" * (chunk.first_line - 1) + chunk.code, str(path), "exec")
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                exec(code, namespace)
        except Exception:
            where = f"section '{chunk.name}'" if chunk.name else f"the code at line {chunk.first_line}"
            sys.stderr.write(f"{path.name}: {where} raised:\n{traceback.format_exc()}")
            sys.exit(1)
        if chunk.name is None and buffer.getvalue():
            sys.stderr.write(f"{path.name}: code outside a section (line {chunk.first_line}) prints; "
                             "move it into a section so that the page shows its output\n")
            sys.exit(1)
        if chunk.name and buffer.getvalue():
            outputs[chunk.name] = buffer.getvalue()
    json.dump({"outputs": outputs, "environment": environment()}, sys.__stdout__)


def run_module(path: Path) -> dict:
    """Run one module in a fresh interpreter; return {"outputs": {...}, "environment": {...}}."""
    result = subprocess.run([sys.executable, "-m", "tools.record_outputs", "--run", str(path)],
                            cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SnippetError(result.stderr.strip() or f"{path.name} exited with {result.returncode}")
    return json.loads(result.stdout)


def run_plain_script(path: Path) -> str:
    """What `python snippets/MODULE.py` prints, as a reader would run it."""
    result = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SnippetError(f"python {path.relative_to(ROOT)} failed:\n{result.stderr}")
    return result.stdout


def in_parallel(function, items):
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return list(pool.map(function, items))


def run_all(modules=None) -> dict[str, dict]:
    modules = modules or recorded_modules()
    return dict(zip((m.stem for m in modules), in_parallel(run_module, modules)))


def varying_patterns() -> dict[str, dict]:
    """{"module:section": {"reason": ..., "lines": [regex, ...]}} from varying_outputs.toml."""
    declared = tomllib.loads(VARYING.read_text())
    return {f"{module}:{section}": spec
            for module, sections in declared.items() for section, spec in sections.items()}


def stored_outputs(outputs_dir: Path = OUTPUTS) -> dict[str, str]:
    """{"module:section": text} for every stored output file."""
    return {f"{p.parent.name}:{p.stem}": p.read_text() for p in sorted(outputs_dir.glob("*/*.txt"))}


def compare_text(recorded: str, fresh: str, patterns: list[str], label: str) -> str | None:
    """None if `fresh` matches `recorded`, else a unified diff. A line that differs passes only if
    one of `patterns` matches the whole of both the recorded and the fresh line."""
    old, new = recorded.splitlines(keepends=True), fresh.splitlines(keepends=True)
    if len(old) == len(new) and all(a == b or _same_shape(a, b, patterns) for a, b in zip(old, new)):
        return None
    return "".join(difflib.unified_diff(old, new, f"recorded {label}", f"fresh run of {label}"))


def _same_shape(a: str, b: str, patterns: list[str]) -> bool:
    if a.endswith("\n") != b.endswith("\n"):
        return False
    return any(re.fullmatch(p, a.rstrip("\n")) and re.fullmatch(p, b.rstrip("\n")) for p in patterns)


def find_drift(fresh: dict[str, dict], outputs_dir: Path = OUTPUTS) -> list[str]:
    """Every difference between a fresh run and the stored outputs, each a readable paragraph."""
    stored = stored_outputs(outputs_dir)
    varying = varying_patterns()
    problems = []
    produced = {f"{m}:{s}": text for m, run in fresh.items() for s, text in run["outputs"].items()}
    for key in sorted(set(stored) | set(produced)):
        module, section = key.split(":")
        where = f"snippets/{module}.py, section '{section}'"
        if key not in produced:
            if module in fresh:
                problems.append(f"{where} prints nothing now but has a stored output; run `{RERECORD}`.")
            continue
        if key not in stored:
            problems.append(f"{where} prints output that is not recorded; run `{RERECORD}`.")
            continue
        patterns = varying.get(key, {}).get("lines", [])
        diff = compare_text(stored[key], produced[key], patterns, f"{module}/{section}.txt")
        if diff:
            problems.append(f"{where} prints something other than its recorded output "
                            f"(run `{RERECORD}` if the change is intended):\n{diff}")
    for key, spec in varying.items():
        module, section = key.split(":")
        if module in fresh and key in stored:
            unused = [p for p in spec["lines"]
                      if not any(re.fullmatch(p, line) for line in stored[key].splitlines())]
            if unused:
                problems.append(f"{VARYING.name}: [{module}.{section}] pattern {unused[0]!r} "
                                "matches no recorded line; remove it or fix it.")
        elif module in fresh:
            problems.append(f"{VARYING.name}: [{module}.{section}] names a section with no output.")
    return problems


def record(fresh: dict[str, dict]) -> None:
    varying = varying_patterns()
    for module, run in fresh.items():
        folder = OUTPUTS / module
        folder.mkdir(parents=True, exist_ok=True)
        for stale in set(p.stem for p in folder.glob("*.txt")) - set(run["outputs"]):
            (folder / f"{stale}.txt").unlink()
        for section, text in run["outputs"].items():
            path = folder / f"{section}.txt"
            patterns = varying.get(f"{module}:{section}", {}).get("lines", [])
            # A machine-dependent line that only changed its value (a timing) keeps the recorded
            # value, so that re-recording an unchanged snippet changes no byte.
            if not (path.exists() and compare_text(path.read_text(), text, patterns, "") is None):
                path.write_text(text)
    environments = {json.dumps(run["environment"], sort_keys=True) for run in fresh.values()}
    RECORDED_ON.write_text(json.dumps(json.loads(environments.pop()), indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of recording")
    parser.add_argument("--run", type=Path, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.run:
        _run_in_this_process(args.run)
        return 0
    try:
        fresh = run_all()
    except SnippetError as error:
        print(error, file=sys.stderr)
        return 1
    if args.check:
        problems = find_drift(fresh)
        print("\n\n".join(problems) or "every recorded output matches", file=sys.stderr if problems else sys.stdout)
        return 1 if problems else 0
    record(fresh)
    count = sum(len(run["outputs"]) for run in fresh.values())
    print(f"recorded {count} outputs of {len(fresh)} modules into {OUTPUTS.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
