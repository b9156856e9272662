"""Fixtures shared by the test files: one recording of every page; the site built strictly as `make build`
builds it (English in the root, Chinese in zh/), and as the Pages workflow publishes it (under a sub-path)."""

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mkdocs.utils.yaml import yaml_load

from tools import ROOT, record, store
from tools.editions import EDITIONS, Edition
from tools.page_runner import run, tagged

UPDATED = []  # what --update-outputs wrote, reported at the end of the session


def pytest_addoption(parser):
    parser.addoption("--update-outputs", action="store_true",
                     help="re-record every output and notebook instead of comparing (what `make outputs` does)")


def needs_torch():  # `make test-site` runs the rest with a Python that has no torch wheel at hand
    return pytest.importorskip("torch", reason="torch is not installed: this test runs the pages' code")


@pytest.fixture(scope="session")
def recording(request) -> store.Recording:
    """Every chapter page run alone once, fresh; written to the repository with --update-outputs."""
    needs_torch()
    fresh = record.record(scripts=False)  # the DDP tests compare their own launches with the recorded runs
    if request.config.getoption("--update-outputs"):
        UPDATED.append(record.summary(fresh, store.write(fresh)))
    return fresh


def pytest_terminal_summary(terminalreporter):  # as `make outputs` reports them
    for summary in UPDATED:
        terminalreporter.write_sep("-", "--update-outputs")
        terminalreporter.write_line(summary)


def mkdocs_build(config: Path, site_dir: Path, **env: str) -> tuple[int, str]:  # (exit status, stderr)
    status, _, stderr = run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                             "--site-dir", str(site_dir)], 600, cwd=config.parent, env={**os.environ, **env})
    return status, stderr


def build_editions(site: Path, **env: str) -> Path:
    """Both editions built strictly at once (a process each), laid out as `make build` lays them out."""
    editions = sorted(EDITIONS.values(), key=lambda edition: edition.prefix)  # English, the root, first
    builds = [site.with_name(f"{site.name}-{edition.language}") for edition in editions]
    with ThreadPoolExecutor(max_workers=len(builds)) as pool:
        results = list(pool.map(lambda edition, build: mkdocs_build(ROOT / edition.config, build, **env),
                                editions, builds))
    for edition, build, (status, stderr) in zip(editions, builds, results):
        with_env = f" with {env}" if env else ""
        assert status == 0, f"mkdocs build --strict -f {edition.config}{with_env} failed:\n{stderr}"
        build.rename(site / edition.prefix)
    return site


@pytest.fixture(scope="session")
def built_site(request, tmp_path_factory) -> Path:
    if request.config.getoption("--update-outputs"):
        request.getfixturevalue("recording")  # written first: the build refuses stale outputs
    return build_editions(tmp_path_factory.mktemp("builds") / "site")


# As the Pages workflow builds it: a project site under a sub-path. The 404 page's links are
# absolute paths (/project/...), so the site works when served under /project/ on any host.
SUB_PATH = "project"
PUBLISHED = {"SITE_URL": f"https://example.github.io/{SUB_PATH}/",
             "REPO_URL": "https://github.com/example/appendix-a", "EDIT_URI": "edit/main/docs/",
             "EDIT_URI_ZH": "edit/main/docs-zh/"}


@pytest.fixture(scope="session")
def published_site(tmp_path_factory) -> Path:
    """A folder holding project/, the site (both editions) built with the Pages workflow's environment."""
    root = tmp_path_factory.mktemp("pages")
    build_editions(root / SUB_PATH, **PUBLISHED)
    return root


def _nav_sources(entries) -> list[str]:
    """The pages of a nav, depth first; links to other sites left out."""
    values = [next(iter(entry.values())) if isinstance(entry, dict) else entry for entry in entries]
    return [source for value in values for source in (_nav_sources(value) if isinstance(value, list) else [value])
            if "://" not in source]


def nav_pages(edition: Edition) -> list[tuple[str, str]]:
    """(source, URL) of every page in the nav of `edition`, in nav order: the source in the repository
    (docs-zh/a1-what-is-pytorch.md) and the URL in the site that `make build` makes (zh/a1-what-is-pytorch/)."""
    nav = yaml_load((ROOT / edition.config).read_text())["nav"]
    stems = [(source, source.rsplit(".", 1)[0]) for source in _nav_sources(nav)]
    return [(f"{edition.docs.name}/{source}", edition.prefix + ("" if stem == "index" else f"{stem}/"))
            for source, stem in stems]


def survivors(tag, settle=0.0):
    """["pid command"] of the processes with `tag` left after `settle` s."""
    deadline = time.monotonic() + settle
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [f"{pid} {command}" for pid, command in left.items()]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):  # a folder for a test module's jobs
    return tmp_path_factory.mktemp("jobs")
