"""check-appendix-a.py, the download that checks a reader's machine against the site: tools/page_runner.py and
tools/check_appendix_a.py as one file, the site's data in place of the empty SITE, so it needs nothing but torch.

    python -m tools.checker versions [PYTHON...]  # make checker-versions: run it with each Python and add what
                                                  # it found to measured/checker.json, which Setup renders
"""

import ast
import datetime
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from packaging.version import Version

from tools import ROOT, check_appendix_a, page_runner, pages, store
from tools.ddp_runs import SCRIPT_RUNS, run_key
from tools.editions import EDITIONS, ENGLISH
from tools.page_runner import run, write_files

NAME = check_appendix_a.NAME
VERSIONS = ROOT / "measured" / "checker.json"
VERSIONS_MARK = "<!-- checker versions -->"

# The recorded DDP runs that the checker runs too, as a reader would: {page that shows it: its run's name}.
WHOLE_PROGRAMS = {run.page: name for name, run in SCRIPT_RUNS.items() if run.page}


def site_data() -> dict:
    """What the checker embeds: the pages, their recorded outputs, the machine-dependent lines."""
    environment = json.loads(store.MANIFEST.read_text())["environment"]  # of the site's recordings
    recorded = "torch {torch}, Python {python}, {machine}, ".format_map(environment) + ENGLISH.device(environment)
    whole = {run_key(name) for name in WHOLE_PROGRAMS.values()}
    site = {"pages": {}, "recorded": recorded, "device_pages": list(pages.GPU_PAGES), "packages": pages.all_needs(),
            "varying": {key: {"reason": spec["reason"], "lines": spec["lines"]}
                        for key, spec in store.varying_patterns().items()
                        if not key.startswith("scripts:") or key in whole}}
    for page in sorted([*pages.chapter_pages(), *WHOLE_PROGRAMS]):  # in the nav's order: their file names sort in it
        title = pages.title(page)
        entry = site["pages"][page] = {"id": title.split(" ")[0], "title": title,
                                       **(whole_program(page) if page in WHOLE_PROGRAMS else page_program(page))}
        # a page's version: all the checker compares it with
        entry["version"] = digest([entry, [site["varying"].get(cell["key"]) for cell in entry["cells"]]])
    site["version"] = digest(site)
    return site


def page_program(page: str) -> dict:
    """A chapter page: its download, run block by block, and what each block printed when recorded."""
    program = pages.read(page)
    return {"script": pages.download_name(page), "code": pages.download_text(page, program.sections),
            "cells": [{"key": cell.key, "fingerprint": program.fingerprints[cell.key],
                       "needs": pages.imports(cell.code),
                       "output": path.read_text() if (path := store.output_path(cell.key, ".txt")).exists() else ""}
                      for cell in program.sections]}


def whole_program(page: str) -> dict:
    """A page's DDP program, run whole (`python SCRIPT`), as one block that printed its recorded run."""
    name = WHOLE_PROGRAMS[page]
    code = (script := ROOT / SCRIPT_RUNS[name].args[0]).read_text()
    return {"script": script.name, "code": code, "whole": True,
            "cells": [{"key": run_key(name), "fingerprint": digest(code), "needs": pages.imports(code),
                       "output": (store.SCRIPT_OUTPUTS / name).read_text()}]}


def digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def page_versions(site: dict | None = None) -> dict[str, str]:
    return {page: entry["version"] for page, entry in (site or site_data())["pages"].items()}


def generate(site: dict | None = None) -> str:
    """check-appendix-a.py: the page runner's code, then the checker's, with `site` (default: the repository's)
    in place of the checker's empty SITE, under one set of imports."""
    def parts(module) -> tuple[str, set[str], str]:  # (what is above its imports, they, the code below them)
        text = Path(module.__file__).read_text()
        lines = text.splitlines(keepends=True)
        imports = [node for node in ast.parse(text).body if isinstance(node, (ast.Import, ast.ImportFrom))]
        return ("".join(lines[:imports[0].lineno - 1]),
                {"".join(lines[node.lineno - 1:node.end_lineno]) for node in imports
                 if not getattr(node, "module", "").startswith("tools")},
                "".join(lines[imports[-1].end_lineno:]))

    _, runner_imports, runner = parts(page_runner)
    head, imports, program = parts(check_appendix_a)
    site_json = json.dumps(site_data() if site is None else site, indent=1, ensure_ascii=False)
    literal = repr(site_json) if "'''" in site_json else f"r'''{site_json}'''"
    return (head + "".join(sorted(imports | runner_imports)) + runner.split('\nif __name__ == "__main__"')[0].rstrip()
            + "\n\n" + program.replace("\nSITE = {}", f"\nSITE = json.loads({literal})", 1))


# ---- the torch versions the check has passed with here ---------------------------------------

def versions_md(results: dict, language: str = "en", current: dict | None = None) -> str:
    """The table of pages against torch versions, from measured/checker.json; a page whose version is
    not `current` (default: the repository's now) is marked as checked against an earlier one."""
    words = EDITIONS[language].words
    current = page_versions() if current is None else current
    versions = sorted(results, key=Version)
    checked = {page: [results[v]["pages"].get(page, {"status": "failed", "error": "not run"}) for v in versions]
               for version in versions for page in results[version]["pages"]}
    earlier = any(entry.get("version") != current.get(page) for page, entries in checked.items() for entry in entries)

    def cell(page: str, entry: dict) -> str:
        text = words[f"checker_{entry['status']}"].format(**{"key": "", "error": "", **entry}).replace("|", "\\|")
        return text if entry.get("version") == current.get(page) else words["checker_earlier"].format(result=text)

    rows = [[f"[{pages.title(page, EDITIONS[language].docs).split(' ')[0]}]({page})",
             *(cell(page, entry) for entry in entries)] for page, entries in checked.items()]
    passed = all(p["status"] in ("same", "machine") for v in versions for p in results[v]["pages"].values())
    lead = (words["checker_changed"] + "\n\n" if earlier else
            words["checker_all"].format(versions=words["bench_and"].join(versions)) + "\n\n" if passed else "")
    labels = [words["checked_by"].format(**{**results[v], "machine": words["checked_on"].format(
        **{**results[v]["machine"], "gpu": results[v]["machine"]["gpu"] or words["no_gpu"]})}) for v in versions]
    table = pages.table([words["checker_page"], *(f"torch {v}" for v in versions)], rows)
    return lead + table + "\n\n" + "\n\n".join(labels) + "\n"


def run_checker(python: str, site: dict) -> dict:
    """Run the checker of `site` with `python` alone, in an empty folder; the report's data."""
    with tempfile.TemporaryDirectory(prefix="checker-versions-") as folder:
        (Path(folder) / NAME).write_text(generate(site))
        status, stdout, stderr = run([python, "-I", NAME, "--report", "report.md", "--jobs", "2"], 3600, cwd=folder)
        if not (report := Path(folder) / "report.md").exists():
            sys.exit(f"checker-versions: {python} {NAME} wrote no report (exit status {status}):\n{stderr}")
        print(stdout, file=sys.stderr)
        return store.read_report(report)


def versions_entry(data: dict, versions: dict[str, str]) -> dict:
    """What measured/checker.json keeps of a report's `data`, with the `versions` of the pages it checked."""
    facts = data["environment"]  # what the checker found this machine to be
    return {"command": "make checker-versions", "date": data["date"], **{k: facts[k] for k in ("torch", "python")},
            "machine": {"system": facts["system"], "cores": facts["cores"], "gpu": ", ".join(facts["gpus"]) or None},
            "seconds": data["seconds"], "checker": data["checker"], "summary": data["summary"],
            "pages": {page: {"id": pages.title(page).split(" ")[0], "status": v["status"],
                             **{k: v[k] for k in ("key", "error") if k in v}, "seconds": v.get("seconds"),
                             "version": versions[page]}
                      for page, v in data["pages"].items()}}


def main(argv: list[str]) -> int:
    """Run the checker with each Python; add what it found, and which version of each page, to
    measured/checker.json."""
    if argv[:1] != ["versions"]:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    # a path stays a path from the empty folder the checker runs in (a venv's python is not resolved)
    pythons = [os.path.abspath(python) if os.sep in python else python for python in argv[1:]] or [sys.executable]
    print(f"checker-versions: running {NAME} with {', '.join(pythons)} ({datetime.date.today()})", file=sys.stderr)
    results = json.loads(VERSIONS.read_text()) if VERSIONS.exists() else {}
    versions = page_versions(site := site_data())
    for python in pythons:
        entry = versions_entry(run_checker(python, site), versions)
        results[entry["torch"]] = entry
    write_files({VERSIONS: json.dumps(results, indent=1, ensure_ascii=False) + "\n"})
    print("wrote measured/checker.json: "
          + ", ".join(f"torch {v}: {r['summary']}" for v, r in results.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
