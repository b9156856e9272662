"""Measure the book and write the figures that the pages and README show.

Every figure is a median of repeated runs; what is compared (our build against plain Material, DDP against one plain
process) is measured in turns in the same run."""

import argparse
import datetime
import functools
import gzip
import hashlib
import json
import logging
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import yaml

from tools import ROOT, page_runner
from tools.ddp_runs import training_data
from tools.editions import EDITIONS, ENGLISH
from tools.pages import table

SECTIONS = ("builds", "pages", "matmul", "ddp", "tests")
QUICK = ("builds", "pages", "matmul")
EPOCHS = 5  # per DDP launch: an epoch's cost is the median gap between consecutive epochs
README_START, README_END = "<!-- bench:start -->", "<!-- bench:end -->"
# What each section's figures measure: once one of these changes, the figures are of an earlier version of it, and
# say so (the matmul measures torch alone, whose version its label names).
SITE = ("mkdocs.yml", "overrides", "tools/hooks", "docs", "snippets", "scripts")  # what the pages show, included
MEASURES = {"builds": SITE, "pages": SITE,
            "ddp": ("scripts/DDP-script.py", "scripts/DDP-script-torchrun.py"), "tests": ("tests",)}
MKDOCS = [sys.executable, "-m", "mkdocs", "build"]


def in_turns(measures, rounds):
    """{name: [each round's result]}: every measure runs once per round, so all see the same load."""
    results = [{name: measure() for name, measure in measures.items()} for _ in range(rounds)]
    return {name: [each[name] for each in results] for name in measures}


def seconds(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(command):
    """Run `command` in the repository, in a process group of its own; raise if it fails."""
    status, _, stderr = page_runner.run(command, 1800, cwd=ROOT)
    if status != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed (exit status {status}):\n{stderr}")


def build_in_process(config_file, site_dir, strict):
    """A full build as `mkdocs serve` does after an edit: a fresh config, modules already imported."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(config_file=str(config_file), site_dir=str(site_dir), strict=strict)
    config.plugins.on_startup(command="serve", dirty=False)
    build(config)
    config.plugins.on_shutdown()


def measure_builds(work, repeats):
    from mkdocs.config import load_config

    # The same docs/ and Markdown extensions with the Material theme alone: no plugins, no hooks.
    config = load_config(config_file=str(ROOT / "mkdocs.yml"))
    extensions = [{name: config["mdx_configs"].get(name, {})} for name in config["markdown_extensions"]]
    plain, site = work / "plain.yml", work / "site"
    plain.write_text(yaml.safe_dump({"site_name": "plain", "docs_dir": str(ROOT / "docs"), "plugins": [],
                                     "theme": {"name": "material"}, "markdown_extensions": extensions}))
    ours = [*MKDOCS, "--strict", "--site-dir", site]

    def cold():
        shutil.rmtree(ROOT / ".cache" / "mkdocs-jupyter", ignore_errors=True)  # as in a fresh clone
        run(ours)

    builds = {"cold": cold, "repeat": lambda: run(ours),
              "plain": lambda: run([*MKDOCS, "--config-file", plain, "--site-dir", site]),
              "rebuild": lambda: build_in_process(ROOT / "mkdocs.yml", site, True),
              "plain_rebuild": lambda: build_in_process(plain, site, False)}
    for warm_up in ("rebuild", "plain_rebuild"):  # imports, warm caches
        builds[warm_up]()
    times = in_turns({name: functools.partial(seconds, build) for name, build in builds.items()}, repeats)
    return {**{name: statistics.median(values) for name, values in times.items()}, "runs": repeats}


def measure_pages(work):
    site = work / "pages"
    run([*MKDOCS, "--strict", "--site-dir", site])
    pages = {page: page.stat().st_size for page in site.rglob("*.html")}
    largest = max(pages, key=pages.get)
    return {"pages": len(pages), "largest": largest.relative_to(site).parent.as_posix(),
            "largest_kb": pages[largest] / 1000,
            "largest_gzip_kb": len(gzip.compress(largest.read_bytes())) / 1000,
            "over_200_kb": sum(size > 200_000 for size in pages.values())}


def microseconds(fn, repeats):
    """One call's median time, over `repeats` runs of as many calls as fill 0.2 s."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return statistics.median(timer.repeat(repeat=repeats, number=number)) / number * 1e6


def measure_matmul(repeats):
    import torch

    a, b = torch.rand(100, 200), torch.rand(200, 300)
    threads = torch.get_num_threads()
    result = {"cpu_us": microseconds(lambda: a @ b, repeats), "threads": threads, "gpu": None}
    torch.set_num_threads(1)
    result["cpu_1_thread_us"] = microseconds(lambda: a @ b, repeats)
    torch.set_num_threads(threads)
    if torch.cuda.is_available():
        a, b = a.cuda(), b.cuda()

        def on_gpu():
            a @ b
            torch.cuda.synchronize()  # or only the launch is timed

        on_gpu()  # the first call initialises CUDA
        result.update(gpu=torch.cuda.get_device_name(), gpu_us=microseconds(on_gpu, repeats))
    return result


def plain_training(epochs):
    """The book's own training loop in one process, on the DDP scripts' data, batch size and learning rate."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader

    from snippets.appendix_a import NeuralNetwork

    torch.set_num_threads(1)  # as the DDP scripts do: one thread per process
    torch.manual_seed(123)
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = DataLoader(training_data(), batch_size=2, shuffle=True, drop_last=True)
    for epoch in range(epochs):
        model.train()
        for features, labels in loader:
            loss = F.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"Epoch: {epoch + 1}", flush=True)


def launch(command, steps):
    """One launch's wall time, start-up and step. A DDP script's ranks print a line after every step, in lockstep
    (each waits for the all-reduce): an epoch ends at the last line that names it, and lasts the median gap."""
    start, ends = time.perf_counter(), {}
    with page_runner.process_group(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}) as process:
        for line in process.stdout:
            if match := re.search(r"Epoch: (\d+)", line):
                ends[int(match[1])] = time.perf_counter() - start
    if process.returncode != 0 or len(ends) != EPOCHS:
        raise RuntimeError(f"{' '.join(map(str, command))} failed (exit status {process.returncode})")
    wall, ends = time.perf_counter() - start, [ends[epoch] for epoch in sorted(ends)]
    epoch = statistics.median(later - earlier for earlier, later in zip(ends, ends[1:]))
    return {"wall": wall, "startup": ends[0] - epoch, "step_ms": epoch / steps * 1e3}


def measure_ddp(rounds):
    samples = len(training_data())
    launchers = {"spawn": lambda n: ["scripts/DDP-script.py", "--world-size", str(n)],
                 "torchrun": lambda n: ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
                                        "scripts/DDP-script-torchrun.py"]}
    arguments = {"plain": (["-m", "tools.bench", "--plain-training"], samples // 2), **{
        # (arguments, steps per epoch): DistributedSampler pads to equal shares; batches of 2
        f"{launcher} {n}": ([*launcher_arguments(n), "--epochs", str(EPOCHS)], math.ceil(samples / n) // 2)
        for launcher, launcher_arguments in launchers.items() for n in (1, 2, 4, 8)}}
    launches = in_turns({name: functools.partial(launch, [sys.executable, *command], steps)
                         for name, (command, steps) in arguments.items()}, rounds)
    return {"epochs": EPOCHS, "runs": rounds, "launches": {
        name: {key: statistics.median(figures[key] for figures in runs) for key in runs[0]}
        for name, runs in launches.items()}}


def measure_tests():
    start = time.perf_counter()
    status, stdout, _ = page_runner.run(["make", "--no-print-directory", "test"], 3600, cwd=ROOT)
    summary = re.sub(r" in [\d.]+s.*", "", (stdout.strip().splitlines() or ["no output"])[-1].strip(" ="))
    return {"seconds": time.perf_counter() - start, "summary": summary, "passed": status == 0}


def label(entry, note="", language="en", readme=False):
    """When and on what machine; README names the command too (a page names none of our tools)."""
    words, machine = EDITIONS[language].words, entry["machine"]
    about = words["bench_machine"].format(**{**machine, "gpu": machine["gpu"] or words["no_gpu"]})
    date = entry["date"] + (words["at_commit"].format(commit=entry["commit"]) if "commit" in entry else "")
    return EDITIONS[language].spaced(words["measured_by" if readme else "measured_on"].format(
        command=entry["command"], date=date, machine=about, note=note))


def version(section, root=ROOT):
    """A digest of the files that `section` measures: which version of them its figures are of."""
    digest = hashlib.sha256()
    for path in sorted(path for name in MEASURES[section] for path in [root / name, *(root / name).rglob("*")]):
        relative = path.relative_to(root)
        # not the caches of Python and ruff (__pycache__, .ruff_cache): they differ from clone to clone
        if path.is_file() and not any(part == "__pycache__" or part.startswith(".") for part in relative.parts):
            digest.update(f"{relative.as_posix()}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:12]


def earlier(figures, section, note="readme_earlier", language="en"):
    """`note` if `section`'s figures are of an earlier version of what they measure (or do not say which), else ""."""
    if section not in MEASURES or figures.get("version") == version(section):
        return ""
    words = EDITIONS[language].words
    return EDITIONS[language].spaced(words[note].format(what=words[f"measures_{section}"]))


def ratio(value, baseline):
    return f"{value / baseline:.1f}×"


# Each edition includes its own file, in its words (tools/words.toml): measured/NAME.md, measured/NAME.zh.md.
def matmul_md(matmul, language="en"):
    words = EDITIONS[language].words
    gpu = words["bench_matmul_gpu"].format(**matmul) if matmul["gpu"] else words["bench_matmul_no_gpu"]
    return f"{words['bench_matmul'].format(**{**matmul, 'gpu': gpu})}\n\n{label(matmul, language=language)}\n"


def ddp_md(ddp, language="en"):
    words = EDITIONS[language].words
    rows = [words["bench_ddp_header"].format(epochs=ddp["epochs"]), "| --- | --- | --- | --- | --- |"]
    for name, figures in ddp["launches"].items():
        launcher, processes = name.split() if name != "plain" else (words["bench_plain"], words["bench_no_ddp"])
        rows.append(f"| {processes} | {launcher} | {figures['wall']:.2f} s | {figures['startup']:.2f} s "
                    f"| {figures['step_ms']:.2f} ms |")
    summary = words["bench_ddp_summary"].format(wall=two_against_one(ddp, "wall", language),
                                                step=two_against_one(ddp, "step_ms", language))
    footer = label(ddp, words["bench_ddp_note"].format(runs=ddp["runs"]), language)
    changed = earlier(ddp, "ddp", "bench_earlier", language)
    return "\n\n".join(filter(None, ["\n".join(rows), summary, footer, changed])) + "\n"


def two_against_one(ddp, key, language="en"):
    """2 processes against 1 plain process, for both launchers: '1.6× (spawn) and 1.7× (torchrun)'."""
    words, plain = EDITIONS[language].words, ddp["launches"]["plain"][key]
    return words["bench_and"].join(
        words["bench_launcher"].format(ratio=ratio(ddp["launches"][f"{launcher} 2"][key], plain), launcher=launcher)
        for launcher in ("spawn", "torchrun"))


def against(value, baseline):
    return f"{value:.2f} s against {baseline:.2f} s: {ratio(value, baseline)}"


def readme_md(results):
    """README's table, in English, a row (its words' key in tools/words.toml, its figure, its section) a figure; then
    each run's date and machine once."""
    builds, pages, ddp, tests = results["builds"], results["pages"], results["ddp"], results["tests"]
    size = f"{pages['largest_kb']:.0f} KB (gzip {pages['largest_gzip_kb']:.0f} KB)"
    rows = [("readme_cold", against(builds["cold"], builds["plain"]), "builds"),
            ("readme_repeat", f"{builds['repeat']:.2f} s: {ratio(builds['repeat'], builds['plain'])}", "builds"),
            ("readme_rebuild", against(builds["rebuild"], builds["plain_rebuild"]), "builds"),
            ("readme_largest", f"{size}, `{pages['largest']}`; {pages['over_200_kb']} of {pages['pages']} pages "
                               "over 200 KB", "pages"),
            ("readme_matmul", f"{results['matmul']['cpu_us']:.0f} µs", "matmul"),
            ("readme_ddp_wall", two_against_one(ddp, "wall"), "ddp"),
            ("readme_ddp_step", two_against_one(ddp, "step_ms"), "ddp"),
            ("readme_tests", f"{tests['seconds']:.0f} s, {tests['summary']}{'' if tests['passed'] else ': FAILED'}",
             "tests")]
    table_rows = [[ENGLISH.words[what], figure + earlier(results[section], section)] for what, figure, section in rows]
    labels = dict.fromkeys(label(results[section], readme=True) for section in SECTIONS)
    return table(["What", "Figure"], table_rows) + "\n\n" + "\n".join(labels) + "\n"


def render(results, out):
    """Write measured/bench.json, measured/*.md and README (its marked region new) under `out`, all at once."""
    files = {out / "measured" / "bench.json": json.dumps(results, indent=1, ensure_ascii=False) + "\n"}
    for language, suffix in [("en", ".md"), ("zh", ".zh.md")]:
        files[out / "measured" / f"matmul{suffix}"] = matmul_md(results["matmul"], language)
        files[out / "measured" / f"ddp{suffix}"] = ddp_md(results["ddp"], language)
    before, rest = (ROOT / "README.md").read_text().split(README_START, 1)
    files[out / "README.md"] = f"{before}{README_START}\n{readme_md(results)}{README_END}{rest.split(README_END, 1)[1]}"
    page_runner.write_files(files)


def main():
    parser = argparse.ArgumentParser(prog="make bench ARGS=...", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}; medians of 3")
    parser.add_argument("--only", choices=SECTIONS, nargs="+", metavar="SECTION",
                        help=f"measure only these sections, of: {' '.join(SECTIONS)}")
    parser.add_argument("--render", action="store_true", help="measure nothing: write the figures of "
                        "measured/bench.json again (after a change to what they measured, which they then say)")
    parser.add_argument("--out", type=lambda path: Path(path).resolve(), default=ROOT,
                        help="write measured/ and README.md under this folder instead of the "
                        "repository (figures not measured come from the repository's bench.json)")
    parser.add_argument("--plain-training", action="store_true", help=argparse.SUPPRESS)  # measure_ddp's baseline
    args = parser.parse_args()
    if args.plain_training:
        return plain_training(EPOCHS)
    sections = () if args.render else args.only or (QUICK if args.quick else SECTIONS)
    repeats = 3 if args.quick else 5
    options = " ".join(["--quick"] * args.quick + (["--only", *args.only] if args.only else []))
    quoted = f'"{options}"' if " " in options else options
    command = f"make bench ARGS={quoted}" if options else "make bench"
    os.chdir(ROOT)  # the snippets extension reads its files relative to the working directory
    results = json.loads((ROOT / "measured" / "bench.json").read_text())  # the sections not measured keep theirs
    logging.getLogger("mkdocs").addHandler(logging.NullHandler())  # in-process builds: keep the output readable
    status, commit, _ = page_runner.run(["git", "rev-parse", "--short", "HEAD"], 60, cwd=ROOT)
    facts = page_runner.describe_machine()  # what the figures were measured on, as tools/words.toml words it
    about = {"command": command, "date": datetime.date.today().isoformat(),
             "machine": {key: facts[key] for key in ("system", "cpu", "cores", "gpu", "python", "torch")},
             **({"commit": commit.strip()} if status == 0 else {})}  # what the counts counted
    with tempfile.TemporaryDirectory(prefix="bench-") as work:
        work = Path(work)
        measure = {"builds": lambda: measure_builds(work, repeats), "pages": lambda: measure_pages(work),
                   "matmul": lambda: measure_matmul(repeats), "tests": measure_tests,
                   "ddp": lambda: measure_ddp(1 if args.quick else 3)}  # a round of launches: a minute
        for section in sections:
            print(f"bench: {section} ...", file=sys.stderr, flush=True)
            measured = {"version": version(section)} if section in MEASURES else {}  # before, as it may change
            results[section] = {**measure[section](), **about, **measured}
            print(json.dumps(results[section], indent=1), flush=True)
    render(results, args.out)
    print(f"wrote {args.out / 'measured' / 'bench.json'} and the figures it renders", file=sys.stderr)


if __name__ == "__main__":
    main()
