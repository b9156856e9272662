"""Fixtures shared by the test files: one recording of every page, one strict build of the site.

`pytest --update-outputs` re-records: the recording that the tests compare with what is stored
is written instead (all or nothing), so the comparisons then pass. `make outputs` does the same.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tools import record

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


@pytest.fixture(scope="session")
def built_site(request, tmp_path_factory) -> Path:
    """The site as `make build` makes it, built once into a temporary folder."""
    if request.config.getoption("--update-outputs"):
        request.getfixturevalue("recording")  # written first: the build refuses stale outputs
    site = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site
