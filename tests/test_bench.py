"""The pure helpers of tools/bench.py (`make bench`); no timing is asserted anywhere."""

import gzip

from tools.bench import (Launch, Row, format_value, page_weights, parse_durations, parse_failures, parse_summary,
                         timings)

PYTEST_OUTPUT = """\
tests/test_ddp_scripts.py ........                                       [100%]
============================= slowest 5 durations ==============================
41.20s call     tests/test_ddp_scripts.py::test_world_sizes[8]
12.03s setup    tests/test_site_build.py::test_strict_build
0.51s call     tests/test_snippets.py::test_section[a2_tensors:matmul]

(2 durations < 0.005s hidden.  Use -vv to show these durations.)
=========================== short test summary info ============================
SKIPPED [1] tests/test_browser.py:12: no Chromium
FAILED tests/test_ddp_faults.py::test_busy_port[spawn] - AssertionError: assert 1 == 2
================== 120 passed, 1 skipped in 151.92s (0:02:31) ==================
"""


def test_timings_calls_setup_before_every_run():
    calls = []
    samples = timings(lambda: calls.append("run"), 3, setup=lambda: calls.append("setup"))
    assert calls == ["setup", "run"] * 3
    assert len(samples) == 3


def test_parse_durations_and_summary():
    assert parse_durations(PYTEST_OUTPUT) == [
        (41.2, "call", "tests/test_ddp_scripts.py::test_world_sizes[8]"),
        (12.03, "setup", "tests/test_site_build.py::test_strict_build"),
        (0.51, "call", "tests/test_snippets.py::test_section[a2_tensors:matmul]"),
    ]
    assert parse_summary(PYTEST_OUTPUT) == "120 passed, 1 skipped"
    assert parse_failures(PYTEST_OUTPUT) == ["tests/test_ddp_faults.py::test_busy_port[spawn]"]
    assert parse_durations("no durations here") == []


def test_launch_splits_start_up_from_training():
    launch = Launch(epoch_ends=[3.0, 3.1, 3.2, 3.3], wall=4.0)
    assert round(launch.per_epoch, 9) == 0.1
    assert round(launch.startup, 9) == 2.9
    assert round(launch.after_training, 9) == 0.7


def test_row_status_against_its_target():
    assert Row("build", 2.0, "s", limit=3.0).status == "ok"
    assert Row("build", 3.5, "s", limit=3.0).status == "over"
    assert Row("build", 3.5, "s").status == ""
    assert Row("build", None, "s", error="missing").status == "error"
    assert Row("build", 2.0, "s", limit=3.0).target == "< 3 s"


def test_format_value():
    assert [format_value(v) for v in (None, 1234.5, 54.61, 2.345, 0.01234)] == ["-", "1,234", "54.6", "2.35", "0.0123"]


def test_page_weights_count_every_fetched_file_once(tmp_path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "main.css").write_text("@font-face{src:url(font.woff2)} .a{background:url('x.png')}")
    (tmp_path / "assets" / "font.woff2").write_bytes(b"f" * 100)
    (tmp_path / "assets" / "app.js").write_text("console.log(1)")
    (tmp_path / "page").mkdir()
    page = tmp_path / "page" / "index.html"
    page.write_text(
        '<link rel="stylesheet" href="../assets/main.css"><link rel="canonical" href="https://example.org/">'
        '<script src="../assets/app.js"></script><script src="/assets/app.js"></script>'
        '<img src="data:image/png;base64,AAAA"><img src="https://example.org/a.png"><a href="../other/">x</a>'
    )
    [weight] = page_weights(tmp_path)
    assert weight["page"] == "page/index.html"
    assert weight["resources"] == ["assets/app.js", "assets/font.woff2", "assets/main.css"]
    assert weight["missing"] == ["x.png"]
    files = [page, tmp_path / "assets" / "app.js", tmp_path / "assets" / "font.woff2", tmp_path / "assets" / "main.css"]
    assert weight["total_bytes"] == sum(path.stat().st_size for path in files)
    assert weight["total_gzip_bytes"] == sum(len(gzip.compress(path.read_bytes(), compresslevel=6)) for path in files)
