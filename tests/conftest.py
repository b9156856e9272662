"""Fixtures shared by the test files: one recording of every page, one strict build of the site
(both editions, as `make build` makes them: English in the root, Chinese in zh/).

`pytest --update-outputs` re-records: the recording that the tests compare with what is stored
is written instead (all or nothing), so the comparisons then pass. `make outputs` does the same.
"""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mkdocs.utils.yaml import yaml_load

from tools import record
from tools.editions import EDITIONS, Edition

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption("--update-outputs", action="store_true",
                     help="re-record every output and notebook instead of comparing (what `make outputs` does)")


@pytest.fixture(scope="session")
def recording(request) -> record.Recording:
    """Every chapter page run alone once, fresh; written to the repository with --update-outputs."""
    fresh = record.record(scripts=False)  # the DDP tests compare their own launches with the recorded runs
    if request.config.getoption("--update-outputs"):
        record.write(fresh)
    return fresh


def mkdocs_build(config: Path, site_dir: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `config` into `site_dir`; the caller asserts on the result."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site_dir)],
        cwd=config.parent, capture_output=True, text=True,
    )


def build_editions(site: Path, environment: str = "") -> Path:
    """Both editions built strictly at once (a process each), then laid out as `make build` lays
    them out: English in `site`, Chinese in `site`/zh. `environment` names what was set for them."""
    editions = sorted(EDITIONS.values(), key=lambda edition: edition.prefix)  # English, the root, first
    builds = [site.with_name(f"{site.name}-{edition.language}") for edition in editions]
    with ThreadPoolExecutor(max_workers=len(builds)) as pool:
        results = list(pool.map(lambda edition, build: mkdocs_build(ROOT / edition.config, build), editions, builds))
    for edition, result in zip(editions, results):
        assert result.returncode == 0, (
            f"mkdocs build --strict -f {edition.config}{environment} failed:\n{result.stderr}")
    for edition, build in zip(editions, builds):
        build.rename(site / edition.prefix)
    return site


@pytest.fixture(scope="session")
def built_site(request, tmp_path_factory) -> Path:
    """The site as `make build` makes it, both editions, built once into a temporary folder."""
    if request.config.getoption("--update-outputs"):
        request.getfixturevalue("recording")  # written first: the build refuses stale outputs
    return build_editions(tmp_path_factory.mktemp("builds") / "site")


def _nav_sources(entries) -> list[str]:
    sources = []
    for entry in entries:
        if isinstance(entry, dict):
            entry = next(iter(entry.values()))
        if isinstance(entry, list):
            sources += _nav_sources(entry)
        elif isinstance(entry, str) and "://" not in entry:
            sources.append(entry)
    return sources


def nav_pages(edition: Edition) -> list[tuple[str, str]]:
    """(source, URL) of every page in the nav of `edition`, in nav order: the source in the repository
    (docs-zh/a1-what-is-pytorch.md) and the URL in the site that `make build` makes (zh/a1-what-is-pytorch/)."""
    nav = yaml_load((ROOT / edition.config).read_text())["nav"]
    stems = [(source, source.rsplit(".", 1)[0]) for source in _nav_sources(nav)]
    return [(f"{edition.docs.name}/{source}", edition.prefix + ("" if stem == "index" else f"{stem}/"))
            for source, stem in stems]
