"""Fixtures shared by the test files: one strict build of the site for every test that reads it."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mkdocs_build(config: Path, site_dir: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `config` into `site_dir`; the caller asserts on the result."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site_dir)],
        cwd=config.parent, capture_output=True, text=True,
    )


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site as `make build` makes it, built once into a temporary folder."""
    site = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site
