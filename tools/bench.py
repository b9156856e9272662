"""Measure the book: the site build, the test suite, the pages' weight, the DDP scripts, A.4's matmul.

    make bench                                  # everything: about 9 minutes on 2 cores
    .venv/bin/python -m tools.bench --skip-tests     # all but `make test`: about 5 minutes
    .venv/bin/python -m tools.bench --quick --skip-tests    # medians of 1 to 3 runs: about 3 minutes
    .venv/bin/python -m tools.bench --only builds,pages   # sections: builds pages ddp matmul tests

It prints one table and writes the same figures, with every sample and a label of the machine,
to bench-results/bench.json (git-ignored; --output to change). Each figure is the median of the
number of runs in its "runs" column. Comparisons (execute: true against false, DDP against one
process) are measured side by side, alternating within the same repetitions, and given as ratios.
Targets are printed next to the figures (ok / over); nothing here asserts or fails on a timing.

What is measured, and how:

- builds: a cold `mkdocs build --strict` as a subprocess (Python start-up, imports, a fresh site
  dir and an empty mkdocs-jupyter cache); the same build in-process; what `mkdocs serve` does
  after an edit (a fresh config and a full build, in a process that has mkdocs imported and a warm
  notebook cache), after touching a Markdown page, a snippet and a notebook, and after a notebook's
  content changed (its cache entry removed: the cache is keyed on content, so a touch alone hits
  it); the build with mkdocs-jupyter's `execute: true`, set in memory, as a ratio.
  Touching only changes a file's mtime, never its content.
- pages: for every built page, its HTML and everything it makes the browser fetch (stylesheets,
  scripts, images, icons, and the fonts and images those stylesheets reference), each file
  counted once per page, plain and gzip-compressed (level 6). 1 KB = 1000 bytes.
- ddp: both DDP scripts on the CPU with Gloo, for 1, 2, 4 and 8 processes, each launched with
  `--epochs E` (default 5). The scripts print no timings (their output is recorded byte for
  byte), but rank 0 prints each epoch's lines as soon as every rank has finished that epoch, so
  the bench notes when they arrive (with PYTHONUNBUFFERED=1; the output itself is unchanged).
  The median gap between epochs is the cost of an epoch (divided by the batches per rank: of a
  step); the time to the first epoch, less one epoch, is the start-up; the time from the last
  epoch to the exit is the evaluation and teardown. This is far less noisy than the
  difference between launches with `--epochs 1` and `--epochs E`, whose start-up alone varies
  by more than the epochs cost. The baseline is NeuralNetwork trained in one process on the
  same data, batch size, learning rate and epochs, timed in-process (the loop; also with one
  torch thread, which shows when torch's threads waited for a busy core) and as a subprocess
  (start-up included).
- matmul: Exercise A.4's `a @ b` (100x200 @ 200x300) with timeit, on the CPU and, when
  torch.cuda.is_available(), on the GPU.
- tests: `make test` once, its wall time and the five slowest tests (pytest --durations=5).
"""

import argparse
import contextlib
import datetime
import gzip
import html.parser
import importlib.metadata
import importlib.util
import json
import os
import platform
import posixpath
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "mkdocs.yml"
SPAWN_SCRIPT = ROOT / "scripts" / "DDP-script.py"
TORCHRUN_SCRIPT = ROOT / "scripts" / "DDP-script-torchrun.py"
WORLD_SIZES = (1, 2, 4, 8)
SECTIONS = ("builds", "pages", "ddp", "matmul", "tests")
KB = 1000

# Targets: each figure should stay below its limit.
COLD_BUILD_LIMIT_S = 3.0
MARKDOWN_REBUILD_LIMIT_S = 1.5
PAGE_HTML_LIMIT_KB = 200
MAKE_TEST_LIMIT_S = 180

# Which file each rebuild touches: the first that exists.
TOUCH_CANDIDATES = {
    "a Markdown page": ["docs/a2-understanding-tensors.md", "docs/index.md"],
    "a snippet": ["snippets/a2_tensors.py", "snippets/appendix_a.py"],
    "a notebook": ["docs/notebooks/code-part1.ipynb"],
}

# A cold `mkdocs build --strict` through mkdocs' own command line, with mkdocs-jupyter's cache
# (otherwise .cache/mkdocs-jupyter in the working directory, shared with everyone's builds)
# pointed at an empty folder: argv = cache dir, site dir.
COLD_BUILD_CHILD = """\
import sys
import mkdocs.config

_load_config = mkdocs.config.load_config

def load_config(**kwargs):
    config = _load_config(**kwargs)
    config.plugins["mkdocs-jupyter"].config["cache_dir"] = sys.argv[1]
    return config

mkdocs.config.load_config = load_config
from mkdocs.__main__ import cli
cli(["build", "--strict", "--site-dir", sys.argv[2]])
"""

SINGLE_PROCESS_CHILD = "import sys; from tools.bench import train_single_process; train_single_process(int(sys.argv[1]))"


@dataclass
class Repeats:
    """How many runs each figure is the median of."""
    build: int  # in-process builds, rebuilds, the cold subprocess build
    slow: int  # execute: true builds, DDP launches
    timeit: int  # timeit repetitions of the matmul

    @classmethod
    def for_mode(cls, quick):
        return cls(build=3, slow=1, timeit=3) if quick else cls(build=5, slow=3, timeit=7)


@dataclass
class Row:
    """One line of the table: a median of `runs` samples, with an optional upper limit (the target)."""
    name: str
    value: float | None
    unit: str
    runs: int = 1
    limit: float | None = None
    notes: str = ""
    error: str | None = None
    skipped: bool = False
    samples: list = field(default_factory=list)

    @property
    def target(self):
        return "" if self.limit is None else f"< {self.limit:g} {self.unit}"

    @property
    def status(self):
        if self.error is not None:
            return "error"
        if self.skipped:
            return "skipped"
        if self.limit is None or self.value is None:
            return ""
        return "ok" if self.value < self.limit else "over"

    def as_json(self):
        return {**asdict(self), "target": self.target, "status": self.status}


class BenchError(Exception):
    """A measurement that could not be made (a script missing or failing); shown as an error row."""

    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log  # the end of the failed command's error output, for the JSON


# ---------------------------------------------------------------------------------------
# Timing helpers
# ---------------------------------------------------------------------------------------

def timings(fn, repeat, setup=None):
    """Seconds that each of `repeat` calls of fn() took; setup() runs before each call, untimed."""
    samples = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def measure(fn, repeat, setup=None):
    """The median of `repeat` timed calls of fn(), in seconds."""
    return statistics.median(timings(fn, repeat, setup))


def side_by_side(fns, repeat):
    """{name: samples} for a dict of functions, run in turn in each of `repeat` rounds, so that
    a comparison between them sees the same machine load."""
    samples = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            samples[name].extend(timings(fn, 1))
    return samples


def run_checked(command, timeout=600, env=None):
    """Run a command from the repository root, capturing its output; BenchError if it fails."""
    try:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise BenchError(f"timed out after {timeout} s: {' '.join(map(str, command))}") from None
    except OSError as error:
        raise BenchError(f"cannot run {command[0]}: {error}") from None
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()] or ["(no error output)"]
        raise BenchError(f"exit status {result.returncode}: {lines[-1].strip()}")
    return result


@contextlib.contextmanager
def stderr_to(path):
    """Send file descriptor 2 (also that of child processes, such as Jupyter kernels) to `path`;
    if the block fails, show the end of what was sent there."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as file:
        os.dup2(file.fileno(), 2)
    try:
        yield
    except BaseException:
        sys.stderr.flush()
        os.dup2(saved, 2)
        print("".join(Path(path).read_text(errors="replace").splitlines(keepends=True)[-20:]), file=sys.stderr)
        raise
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def format_value(value):
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


# ---------------------------------------------------------------------------------------
# Builds
# ---------------------------------------------------------------------------------------

class Workspace:
    """Fresh, numbered temporary folders (site dirs, notebook caches) under one root."""

    def __init__(self, root):
        self.root = Path(root)
        self.count = 0

    def fresh(self, kind):
        self.count += 1
        path = self.root / f"{kind}-{self.count}"
        path.mkdir(parents=True)
        return path


def load_site_config(site_dir, cache_dir, execute=False):
    """mkdocs.yml as `mkdocs build --strict` loads it, building into site_dir, with mkdocs-jupyter's
    cache in cache_dir and `execute` set in memory (no file written)."""
    from mkdocs.config import load_config

    config = load_config(config_file=str(CONFIG), site_dir=str(site_dir), strict=True)
    if "mkdocs-jupyter" not in config.plugins:
        raise BenchError("mkdocs.yml does not use the mkdocs-jupyter plugin")
    # Item assignment: the plugin's LegacyConfig silently ignores attribute assignment.
    plugin_config = config.plugins["mkdocs-jupyter"].config
    plugin_config["cache_dir"] = str(cache_dir)
    plugin_config["execute"] = execute
    return config


def build_in_process(site_dir, cache_dir, execute=False):
    """One full strict build, as the `mkdocs build` command (and `mkdocs serve`'s rebuild) does it."""
    from mkdocs.commands.build import build

    config = load_site_config(site_dir, cache_dir, execute)
    config.plugins.on_startup(command="build", dirty=False)
    try:
        build(config)
    finally:
        config.plugins.on_shutdown()


def touched_file(kind):
    for relative in TOUCH_CANDIDATES[kind]:
        if (ROOT / relative).is_file():
            return ROOT / relative
    raise BenchError(f"no file to touch for {kind}: none of {', '.join(TOUCH_CANDIDATES[kind])} exists")


def notebook_cache_entry(notebook, site_dir, cache_dir):
    """The file in cache_dir where mkdocs-jupyter keeps `notebook` rendered (its private API)."""
    from mkdocs_jupyter import plugin as jupyter_plugin

    plugin_config = load_site_config(site_dir, cache_dir).plugins["mkdocs-jupyter"].config
    key = jupyter_plugin._compute_cache_key(str(notebook), plugin_config, plugin_config["execute"])
    return Path(jupyter_plugin._get_cache_path(str(cache_dir), key))


def measure_builds(work, repeats):
    rows = []

    def cold_subprocess():
        cache = work.fresh("cache")
        run_checked([sys.executable, "-c", COLD_BUILD_CHILD, cache, work.fresh("site")])
        if not any(cache.iterdir()):  # the notebooks were rendered from another cache: not cold
            raise BenchError("the cold build did not use its empty notebook cache")

    samples = timings(cold_subprocess, repeats.build)
    rows.append(Row("build: cold mkdocs build --strict, subprocess", statistics.median(samples), "s",
                    len(samples), limit=COLD_BUILD_LIMIT_S, samples=samples,
                    notes="Python start-up + imports + build; fresh site dir, empty notebook cache"))

    build_in_process(work.fresh("site"), work.fresh("cache"))  # imports everything, untimed
    samples = timings(lambda: build_in_process(work.fresh("site"), work.fresh("cache")), repeats.build)
    rows.append(Row("build: in-process, fresh site dir, empty notebook cache", statistics.median(samples),
                    "s", len(samples), samples=samples, notes="mkdocs already imported"))

    # What `mkdocs serve` does after a change: a fresh config, a full build into the same site dir.
    site, cache = work.fresh("site"), work.fresh("cache")
    build_in_process(site, cache)  # the initial build of `mkdocs serve`: fills the notebook cache
    notebook = touched_file("a notebook")
    rebuilds = {f"touching {kind}": touched_file(kind) for kind in TOUCH_CANDIDATES}
    rebuilds["changing a notebook"] = notebook

    def rebuild(path, drop_cache_entry=False):
        def run():
            os.utime(path)  # the mtime only: the content stays as it is
            if drop_cache_entry:  # as if the content had changed: the rendered notebook is stale
                notebook_cache_entry(path, site, cache).unlink(missing_ok=True)
            start = time.perf_counter()
            build_in_process(site, cache)
            return time.perf_counter() - start
        return run

    runs = {what: rebuild(path, what == "changing a notebook") for what, path in rebuilds.items()}
    samples = {what: [] for what in runs}
    for _ in range(repeats.build):
        for what, run in runs.items():
            samples[what].append(run())  # timed inside: the cache entry removal is not counted
    for what, path in rebuilds.items():
        relative = path.relative_to(ROOT)
        notes = {
            "touching a Markdown page": f"{relative}; as mkdocs serve: mkdocs imported, notebook cache warm",
            "touching a snippet": f"{relative}; the pages include it, so a full rebuild",
            "touching a notebook": f"{relative}; mkdocs-jupyter's cache is keyed on content: a hit",
            "changing a notebook": f"{relative}; its cache entry removed, so it is rendered again",
        }[what]
        rows.append(Row(f"rebuild after {what}", statistics.median(samples[what]), "s", len(samples[what]),
                        limit=MARKDOWN_REBUILD_LIMIT_S if what == "touching a Markdown page" else None,
                        samples=samples[what], notes=notes))

    # execute: true (the plugin's common setup) against our execute: false, both with empty caches.
    kernel_log = work.root / "jupyter-kernels.log"  # kernels warn on stderr; keep the table readable
    with stderr_to(kernel_log):
        pair = side_by_side({
            "execute: false": lambda: build_in_process(work.fresh("site"), work.fresh("cache")),
            "execute: true": lambda: build_in_process(work.fresh("site"), work.fresh("cache"), execute=True),
        }, repeats.slow)
    for name, values in pair.items():
        rows.append(Row(f"build: in-process, mkdocs-jupyter {name}", statistics.median(values), "s",
                        len(values), samples=values, notes="empty notebook cache; side by side"))
    rows.append(Row("ratio: build with execute: true / execute: false",
                    statistics.median(pair["execute: true"]) / statistics.median(pair["execute: false"]),
                    "x", len(pair["execute: true"]), notes="executing the 3 notebooks at every build"))
    return rows


# ---------------------------------------------------------------------------------------
# Page weight
# ---------------------------------------------------------------------------------------

class ResourceLinks(html.parser.HTMLParser):
    """The URLs of everything an HTML page makes the browser fetch as it loads."""

    FETCHED_RELS = {"stylesheet", "icon", "shortcut", "apple-touch-icon", "preload", "modulepreload", "manifest"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "link" and self.FETCHED_RELS & set((attrs.get("rel") or "").lower().split()):
            self.urls.append(attrs.get("href"))
        elif tag in {"script", "img", "source", "audio", "video", "embed", "track", "input"}:
            self.urls.append(attrs.get("src"))
            if tag == "video":
                self.urls.append(attrs.get("poster"))
        elif tag == "object":
            self.urls.append(attrs.get("data"))
        elif tag in {"image", "use"}:  # inline SVG referring to a file
            self.urls.append(attrs.get("href") or attrs.get("xlink:href"))
        for candidate in (attrs.get("srcset") or "").split(","):
            if candidate.strip():
                self.urls.append(candidate.split()[0])


CSS_URL = re.compile(r"""url\(\s*(['"]?)([^'")]+)\1\s*\)|@import\s+(['"])([^'"]+)\3""")


def local_path(url, base_dir, site):
    """The file under `site` that `url`, found in a file in base_dir, points to; None if external."""
    if not url:
        return None
    url = url.strip()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith("#") or not parts.path:
        return None  # data:, http(s):, //host, an anchor: not a file of this site
    path = urllib.parse.unquote(parts.path)
    relative = posixpath.normpath(path.lstrip("/") if path.startswith("/")
                                  else posixpath.join(base_dir.relative_to(site).as_posix(), path))
    if relative.startswith(".."):
        return None
    target = site / relative
    return target / "index.html" if path.endswith("/") else target


def page_resources(page, site):
    """(files the page makes the browser fetch, URLs that point to no file); each file once."""
    parser = ResourceLinks()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    found, missing = {}, []
    queue = [(url, page.parent) for url in parser.urls]
    while queue:
        url, base = queue.pop()
        target = local_path(url, base, site)
        if target is None or target in found:
            continue
        if not target.is_file():
            missing.append(url)
            continue
        found[target] = True
        if target.suffix == ".css":  # fonts, images and imports of the stylesheet
            text = target.read_text(encoding="utf-8", errors="replace")
            queue.extend((m[2] or m[4], target.parent) for m in CSS_URL.finditer(text))
    return sorted(found), missing


def page_weights(site):
    """Per page: HTML bytes, the bytes of everything it fetches, and both gzip-compressed."""
    gzip_sizes = {}

    def gzipped(path):
        if path not in gzip_sizes:
            gzip_sizes[path] = len(gzip.compress(path.read_bytes(), compresslevel=6))
        return gzip_sizes[path]

    pages = []
    for page in sorted(site.rglob("*.html")):
        resources, missing = page_resources(page, site)
        html_bytes = page.stat().st_size
        pages.append({
            "page": page.relative_to(site).as_posix(),
            "html_bytes": html_bytes,
            "html_gzip_bytes": gzipped(page),
            "files": 1 + len(resources),
            "total_bytes": html_bytes + sum(path.stat().st_size for path in resources),
            "total_gzip_bytes": gzipped(page) + sum(gzipped(path) for path in resources),
            "resources": [path.relative_to(site).as_posix() for path in resources],
            "missing": missing,
        })
    return pages


def measure_pages(work, repeats):
    site = work.fresh("site")
    build_in_process(site, work.fresh("cache"))
    pages = page_weights(site)
    rows = []
    for page in pages:
        notes = (f"transfer {page['total_bytes'] / KB:,.0f} KB ({page['files']} files), gzip: "
                 f"HTML {page['html_gzip_bytes'] / KB:,.0f} KB, transfer {page['total_gzip_bytes'] / KB:,.0f} KB")
        if page["missing"]:
            notes += f"; {len(page['missing'])} missing: {', '.join(page['missing'][:3])}"
        rows.append(Row(f"page: {page['page']} (HTML)", page["html_bytes"] / KB, "KB",
                        limit=PAGE_HTML_LIMIT_KB, notes=notes))
    largest = max(pages, key=lambda page: page["html_bytes"])
    heaviest = max(pages, key=lambda page: page["total_bytes"])
    over = [page["page"] for page in pages if page["html_bytes"] / KB >= PAGE_HTML_LIMIT_KB]
    rows.append(Row("pages: largest HTML", largest["html_bytes"] / KB, "KB", limit=PAGE_HTML_LIMIT_KB,
                    notes=f"{largest['page']}; {len(over)} of {len(pages)} pages over {PAGE_HTML_LIMIT_KB} KB"))
    rows.append(Row("pages: largest transfer", heaviest["total_bytes"] / KB, "KB",
                    notes=f"{heaviest['page']}; gzip {heaviest['total_gzip_bytes'] / KB:,.0f} KB"))
    index = site / "search" / "search_index.json"
    if index.is_file():
        rows.append(Row("search index (fetched when search starts)", index.stat().st_size / KB, "KB",
                        notes=f"gzip {len(gzip.compress(index.read_bytes(), compresslevel=6)) / KB:,.0f} KB"))
    return rows, pages


# ---------------------------------------------------------------------------------------
# DDP scripts
# ---------------------------------------------------------------------------------------

def load_script(path):
    """A DDP script as a module (its `if __name__ == "__main__"` part does not run)."""
    if not path.is_file():
        raise BenchError(f"{path.relative_to(ROOT)} is missing")
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps_per_epoch(script, world_size):
    """Batches per rank in one epoch: what the script's own data loader gives rank 0."""
    train_loader, _ = load_script(script).prepare_dataset(0, world_size)
    return len(train_loader)


def train_single_process(epochs, script=SPAWN_SCRIPT, threads=None):
    """Train NeuralNetwork in this one process on the DDP scripts' data, with their batch size and
    learning rate, without DDP; return the seconds the training loop took. `threads`: torch's
    intra-op threads during the loop (default: as they are, as in the scripts)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader

    from snippets.appendix_a import NeuralNetwork

    ddp_loader, _ = load_script(script).prepare_dataset(0, 1)
    loader = DataLoader(ddp_loader.dataset, batch_size=ddp_loader.batch_size, shuffle=True, drop_last=True)
    torch.manual_seed(123)
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    with torch_threads(threads):
        start = time.perf_counter()
        for _ in range(epochs):
            model.train()
            for features, labels in loader:
                loss = F.cross_entropy(model(features), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return time.perf_counter() - start


@contextlib.contextmanager
def torch_threads(threads):
    """torch.set_num_threads(threads) inside the block (None: leave them as they are)."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def ddp_command(launcher, world_size, epochs):
    if launcher == "spawn":
        return [sys.executable, str(SPAWN_SCRIPT), "--world-size", str(world_size), "--epochs", str(epochs)]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}",
            str(TORCHRUN_SCRIPT), "--epochs", str(epochs)]


EPOCH_LINE = re.compile(r"Epoch: (\d+)/(\d+)")


@dataclass
class Launch:
    """One timed launch of a DDP script: seconds from the start to the end of each epoch, and to exit."""
    epoch_ends: list
    wall: float

    @property
    def per_epoch(self):
        """The median time between the ends of consecutive epochs (the first epoch is left out: it warms up)."""
        gaps = [later - earlier for earlier, later in zip(self.epoch_ends, self.epoch_ends[1:])]
        return statistics.median(gaps)

    @property
    def startup(self):
        """From the launch to the start of training: processes, imports, the data, joining the group."""
        return self.epoch_ends[0] - self.per_epoch

    @property
    def after_training(self):
        """From the end of the last epoch to the exit: evaluation, leaving the group, exiting."""
        return self.wall - self.epoch_ends[-1]


def timed_launch(command, epochs, timeout=600):
    """Run a DDP script, noting when each epoch's lines arrive on its stdout.

    Rank 0 prints every epoch's lines at once, after all ranks have finished that epoch (the scripts
    print no timings of their own: their output is recorded byte for byte). PYTHONUNBUFFERED makes
    every process write through at once, so the arrival time is the epoch's end.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    stderr = []
    drain = threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True)
    drain.start()
    stop = threading.Timer(timeout, lambda: os.killpg(process.pid, signal.SIGKILL))
    stop.start()
    epoch_ends = {}
    try:
        for line in process.stdout:
            if (match := EPOCH_LINE.search(line)) and int(match[1]) not in epoch_ends:
                epoch_ends[int(match[1])] = time.perf_counter() - start
        process.wait()
    finally:
        stop.cancel()
    wall = time.perf_counter() - start
    drain.join()
    if process.returncode != 0:
        lines = [line.strip() for line in stderr if line.strip() and not set(line.strip()) <= {"*", "="}]
        why = "killed after the time limit" if process.returncode == -signal.SIGKILL else (lines or ["no error output"])[-1]
        log = "".join(stderr)
        raise BenchError(f"exit status {process.returncode}: {why}",
                         log=log if len(log) <= 20000 else f"{log[:10000]}\n[...]\n{log[-10000:]}")
    if sorted(epoch_ends) != list(range(1, epochs + 1)):
        raise BenchError(f"expected lines for epochs 1 to {epochs} on stdout, found {sorted(epoch_ends)}")
    return Launch([epoch_ends[e] for e in range(1, epochs + 1)], wall)


def measure_ddp(work, repeats, epochs):
    import torch

    if epochs < 3:
        raise BenchError("--ddp-epochs must be 3 or more: an epoch's cost is the gap between later epochs")
    launchers = {"spawn": SPAWN_SCRIPT, "torchrun": TORCHRUN_SCRIPT}
    configs = [(launcher, ws) for launcher in launchers for ws in WORLD_SIZES]
    steps, unavailable = {}, {}
    for launcher, ws in configs:
        try:
            steps[launcher, ws] = steps_per_epoch(launchers[launcher], ws)
        except Exception as error:  # a missing script, or one that does not load
            unavailable[launcher, ws] = str(error) or type(error).__name__
    launches = {config: [] for config in configs}
    failures = {config: [] for config in configs}
    single_subprocess, single_loop, single_loop_1_thread = [], [], []

    for _ in range(repeats.slow):  # rounds: every variant once per round, side by side
        for config in configs:
            if config in unavailable:
                continue
            try:
                launches[config].append(timed_launch(ddp_command(*config, epochs), epochs))
            except BenchError as error:  # noted, and the next round tries again
                failures[config].append(error)
        single_subprocess.extend(timings(
            lambda: run_checked([sys.executable, "-c", SINGLE_PROCESS_CHILD, str(epochs)]), 1))
        single_loop.extend(train_single_process(epochs) for _ in range(repeats.build))
        single_loop_1_thread.extend(train_single_process(epochs, threads=1) for _ in range(repeats.build))

    single_steps = steps_per_epoch(SPAWN_SCRIPT, 1)
    single_epoch = statistics.median(single_loop) / epochs
    single_wall = statistics.median(single_subprocess)
    rows = [
        Row(f"single process: {epochs} epochs as a subprocess", single_wall, "s", len(single_subprocess),
            samples=single_subprocess, notes="start-up included: Python, torch, the data"),
        Row("single process: one epoch (in-process loop)", single_epoch * 1e3, "ms", len(single_loop),
            samples=single_loop, notes=f"{single_steps} steps of batch size 2, no DDP, "
                                       f"{torch.get_num_threads()} torch threads as in the scripts"),
        Row("single process: one epoch, 1 torch thread", statistics.median(single_loop_1_thread) / epochs * 1e3,
            "ms", len(single_loop_1_thread), samples=single_loop_1_thread,
            notes="side by side; a big gap means the threads waited for a busy core"),
        Row("single process: one step", single_epoch / single_steps * 1e3, "ms", len(single_loop)),
    ]
    costs = {}
    for config in configs:
        label = f"ddp {config[0]} x{config[1]}"
        runs, failed = launches[config], failures[config]
        if not runs:
            rows.append(Row(label, None, "s", error=unavailable.get(config) or str(failed[-1])))
            continue
        wall = statistics.median(run.wall for run in runs)
        per_epoch = statistics.median(run.per_epoch for run in runs)
        costs[config] = wall, per_epoch
        error = f"{len(failed)} of {len(runs) + len(failed)} launches failed: {failed[-1]}" if failed else None
        rows += [
            Row(f"{label}: wall, {epochs} epochs", wall, "s", len(runs), samples=[run.wall for run in runs],
                error=error),
            Row(f"{label}: start-up", statistics.median(run.startup for run in runs), "s", len(runs),
                notes="launch to the start of epoch 1: processes, imports, data, joining the group"),
            Row(f"{label}: after training", statistics.median(run.after_training for run in runs), "s",
                len(runs), notes="end of the last epoch to exit: evaluation, leaving the group"),
            Row(f"{label}: one step", per_epoch / steps[config] * 1e3, "ms", len(runs),
                notes=f"{steps[config]} steps/epoch per rank; one epoch {per_epoch * 1e3:.1f} ms"),
        ]
    for launcher in launchers:
        if (launcher, 2) in costs:
            wall, per_epoch = costs[launcher, 2]
            runs = len(launches[launcher, 2])
            rows += [
                Row(f"ratio: ddp {launcher} x2 / single process, start-up included", wall / single_wall, "x",
                    runs, notes=f"{epochs} epochs, both launched as a subprocess"),
                Row(f"ratio: ddp {launcher} x2 / single process, start-up excluded", per_epoch / single_epoch,
                    "x", runs, notes="one epoch over the same 20 samples, in the same rounds"),
            ]
    details = {
        "launches": {f"{l} x{ws}": [asdict(run) for run in launches[l, ws]] for l, ws in configs},
        "failures": {f"{l} x{ws}": [{"error": str(e), "stderr_tail": e.log} for e in failures[l, ws]]
                     for l, ws in configs if failures[l, ws]},
    }
    return rows, details


# ---------------------------------------------------------------------------------------
# Exercise A.4: the matrix product
# ---------------------------------------------------------------------------------------

def time_per_call(fn, repeat):
    """Median seconds per call of fn(), with timeit choosing how many calls make one sample."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return statistics.median(t / number for t in timer.repeat(repeat=repeat, number=number)), number


def measure_matmul(work, repeats):
    import torch

    a, b = torch.rand(100, 200), torch.rand(200, 300)
    cpu, number = time_per_call(lambda: a @ b, repeats.timeit)
    with torch_threads(1):
        one_thread, one_number = time_per_call(lambda: a @ b, repeats.timeit)
    rows = [Row("A.4 matmul 100x200 @ 200x300: CPU", cpu * 1e6, "us", repeats.timeit,
                notes=f"timeit, {number} calls per run, {torch.get_num_threads()} torch threads"),
            Row("A.4 matmul 100x200 @ 200x300: CPU, 1 torch thread", one_thread * 1e6, "us", repeats.timeit,
                notes=f"timeit, {one_number} calls per run")]
    if torch.cuda.is_available():
        a_gpu, b_gpu = a.to("cuda"), b.to("cuda")

        def on_gpu():
            a_gpu @ b_gpu
            torch.cuda.synchronize()  # wait for the kernel, or only the launch is timed

        on_gpu()  # the first call initialises CUDA and cuBLAS
        gpu, number = time_per_call(on_gpu, repeats.timeit)
        rows += [
            Row("A.4 matmul 100x200 @ 200x300: GPU", gpu * 1e6, "us", repeats.timeit,
                notes=f"{torch.cuda.get_device_name()}, synchronized, {number} calls per run"),
            Row("ratio: A.4 matmul CPU / GPU", cpu / gpu, "x", repeats.timeit),
        ]
    else:
        rows.append(Row("A.4 matmul 100x200 @ 200x300: GPU", None, "us", skipped=True,
                        notes="torch.cuda.is_available() is False"))
    return rows


# ---------------------------------------------------------------------------------------
# The test suite
# ---------------------------------------------------------------------------------------

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")
SUMMARY = re.compile(r"^=+ (.+?) in [\d.]+s(?: \([\d:]+\))? =+$")


def parse_durations(output):
    """[(seconds, phase, test id)] from the `slowest N durations` section of pytest's output."""
    slowest, inside = [], False
    for line in output.splitlines():
        if re.match(r"^=+ slowest .*durations", line):
            inside = True
        elif inside and line.startswith("="):
            break
        elif inside and (match := DURATION.match(line)):
            slowest.append((float(match[1]), match[2], match[3]))
    return slowest


def parse_summary(output):
    """pytest's last line, such as '120 passed, 2 skipped', or ''."""
    for line in reversed(output.splitlines()):
        if match := SUMMARY.match(line.strip()):
            return match[1]
    return ""


def parse_failures(output):
    """The ids of the tests that failed or errored, from pytest's short test summary (-ra)."""
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.M)


def measure_tests(work, repeats):
    env = {**os.environ, "PYTEST_ADDOPTS": (os.environ.get("PYTEST_ADDOPTS", "") + " --durations=5").strip()}
    start = time.perf_counter()
    try:
        result = subprocess.run(["make", "test"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as error:
        return [Row("make test", None, "s", error=str(error))], {}
    wall = time.perf_counter() - start
    output = result.stdout + result.stderr
    slowest, failed = parse_durations(output), parse_failures(output)
    summary = parse_summary(output) or "no pytest summary"
    error = None
    if result.returncode != 0:
        error = f"exit status {result.returncode}: {summary}" + (f"; {', '.join(failed)}" if failed else "")
    rows = [Row("make test", wall, "s", limit=MAKE_TEST_LIMIT_S, notes=summary, error=error)]
    rows += [Row(f"slow test: {test} ({phase})", seconds, "s") for seconds, phase, test in slowest]
    return rows, {"exit_status": result.returncode, "summary": summary, "failed": failed,
                  "slowest": [{"seconds": s, "phase": p, "test": t} for s, p, t in slowest]}


# ---------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------

def machine_info():
    import torch

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break

    def git(*args):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        return None

    def version(package):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(package)
        return None

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mkdocs": version("mkdocs"),
        "mkdocs_material": version("mkdocs-material"),
        "mkdocs_jupyter": version("mkdocs-jupyter"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git("rev-parse", "HEAD"),
        "git_worktree_changed": bool(git("status", "--porcelain")),
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def table(rows):
    header = ("name", "median", "unit", "target", "status", "runs", "notes")
    lines = [(row.name, format_value(row.value), row.unit, row.target, row.status, str(row.runs),
              row.error if row.error is not None else row.notes) for row in rows]
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(len(header) - 1)]
    aligns = "<><<<>"

    def render(cells):
        padded = [f"{cell:{align}{width}}" for cell, align, width in zip(cells, aligns, widths)]
        return "  ".join([*padded, cells[-1]]).rstrip()

    rule = "  ".join("-" * width for width in widths) + "  " + "-" * 5
    return "\n".join([render(header), rule, *map(render, lines)])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (medians of 1 to 3 runs)")
    parser.add_argument("--skip-tests", action="store_true", help="do not run `make test` (2 to 3 minutes)")
    parser.add_argument("--only", metavar="SECTIONS",
                        help=f"comma-separated sections to run, of: {', '.join(SECTIONS)}")
    parser.add_argument("--ddp-epochs", type=int, default=5, metavar="E",
                        help="epochs of every DDP launch, at least 3 (default: 5)")
    parser.add_argument("--output", type=Path, default=ROOT / "bench-results" / "bench.json",
                        help="where to write the JSON (default: bench-results/bench.json)")
    args = parser.parse_args(argv)
    args.sections = list(SECTIONS) if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    if args.skip_tests and "tests" in args.sections:
        args.sections.remove("tests")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.chdir(ROOT)  # pymdownx.snippets resolves its base path "." from the working directory
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    repeats = Repeats.for_mode(args.quick)
    started = time.perf_counter()
    machine = machine_info()
    rows, report = [], {"machine": machine, "settings": {
        "quick": args.quick, "sections": args.sections, "repeats": asdict(repeats),
        "ddp_epochs": args.ddp_epochs, "world_sizes": list(WORLD_SIZES), "kb_bytes": KB}}

    with tempfile.TemporaryDirectory(prefix="bench-") as root:
        work = Workspace(root)
        measurements = {
            "builds": lambda: measure_builds(work, repeats),
            "pages": lambda: measure_pages(work, repeats),
            "ddp": lambda: measure_ddp(work, repeats, args.ddp_epochs),
            "matmul": lambda: measure_matmul(work, repeats),
            "tests": lambda: measure_tests(work, repeats),
        }
        durations = {}
        for section in args.sections:
            print(f"bench: {section} ...", file=sys.stderr, flush=True)
            section_start = time.perf_counter()
            try:
                result = measurements[section]()
            except Exception as error:  # one failed section does not stop the others
                result = [Row(section, None, "", error=f"{type(error).__name__}: {error}")]
            if isinstance(result, tuple):  # rows and details for the JSON
                result, details = result
                report[{"pages": "pages", "ddp": "ddp", "tests": "test_suite"}[section]] = details
            rows += result
            durations[section] = time.perf_counter() - section_start
            print(f"bench: {section} took {durations[section]:.0f} s", file=sys.stderr, flush=True)

    total = time.perf_counter() - started
    machine["load_average_at_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    report.update(rows=[row.as_json() for row in rows], section_seconds=durations, total_seconds=total)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")

    print(f"{machine['cpu']}, {machine['usable_cores']} cores, Python {machine['python']}, "
          f"torch {machine['torch']}, {machine['date']}; medians of the runs shown "
          f"({'--quick' if args.quick else 'default repetitions'})")
    print(table(rows))
    over = [row.name for row in rows if row.status == "over"]
    failed = [row.name for row in rows if row.status == "error"]
    print(f"\n{len(over)} over target, {len(failed)} errors; total {total:.0f} s; wrote {args.output}")
    loads = [machine[key][0] for key in ("load_average_at_start", "load_average_at_end") if machine[key]]
    if loads and max(loads) > machine["usable_cores"]:
        print(f"note: the load average reached {max(loads):.1f} on {machine['usable_cores']} cores: other "
              "processes competed for the CPU, so these figures are noisy (torch's threads most of all)")


if __name__ == "__main__":
    main()
