"""Every chapter page runs alone and prints exactly what is stored: its outputs, its notebook cells."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, survivors

from tools import pages, record, store
from tools.page_runner import compare_text, process_group, tagged
from tools.sections import SNIPPETS, read_sections
from tools.store import OUTPUTS

DRAWS = 300  # fresh random states per output that prints an unseeded draw


def test_every_page_prints_what_is_stored(recording):
    problems = store.drift(recording)
    assert not problems, "\n\n".join(problems)


def stored_with(change: dict) -> dict:
    """What is stored, with some files changed (text) or removed (None)."""
    return {path: text for path, text in {**store.stored_files(), **change}.items() if text is not None}


def test_a_changed_new_or_vanished_output_is_reported_by_its_file_and_a_declared_line_by_its_shape(recording):
    shape, old = OUTPUTS / "a2_tensors" / "shape.txt", OUTPUTS / "a2_tensors" / "removed_section.txt"
    loss = OUTPUTS / "a7_training_loop" / "plot_loss.plot.json"  # a plot's data is compared like an output
    version, fresh = OUTPUTS / "a1_what_is_pytorch" / "version.txt", recording.outputs["a1_what_is_pytorch:version"]
    problems = store.drift(recording, stored_with({shape: shape.read_text().replace("3", "4", 1),
                                                   loss: loss.read_text().replace("training loss", "loss", 1),
                                                   version: "no torch here\n"}))
    changed = ["a1_what_is_pytorch/version.txt", "a2_tensors/shape.txt", "a7_training_loop/plot_loss.plot.json"]
    assert [p.split(" (run `make outputs`")[0] for p in problems] == [  # each a diff, with what to run
        f"snippets/outputs/{name} differs from a fresh run" for name in changed], problems
    assert "-torch.Size([2, 4])" in problems[1] and "+torch.Size([2, 3])" in problems[1]
    problems = "\n".join(store.drift(recording, stored_with({shape: None, old: "old\n"})))
    assert "snippets/outputs/a2_tensors/shape.txt is not recorded" in problems
    assert "snippets/outputs/a2_tensors/removed_section.txt is stored but nothing prints it" in problems
    assert store.drift(recording, stored_with({version: re.sub(r"\d", "9", fresh)})) == []  # the same shape


def test_each_plot_is_the_figure_its_own_block_draws(recording):
    """The figure a section's code leaves open, in the text's colour for both palettes; the loss plot, from its
    own run of the loop, shows the losses the book's loop printed."""
    assert sorted(recording.plots) == ["a6_data_loaders:plot_toy_data", "a7_training_loop:plot_decision_regions",
                                       "a7_training_loop:plot_loss"]
    for svg in (plot["svg"] for plot in recording.plots.values()):  # no id that every plot has (A.7 shows two)
        assert 'fill="currentColor"' in svg and "#000000" not in svg and ' id="axes_1"' not in svg
    (axes,) = recording.plots["a7_training_loop:plot_loss"]["data"]
    printed = re.findall(r"Train/Val Loss: ([\d.]+)", recording.outputs["a7_training_loop:train"])
    assert [f"{loss:.2f}" for _, loss in axes["lines"][0]] == printed


def test_every_section_is_shown_on_a_page():
    shown = {section.key for page in pages.chapter_pages() for section in pages.program(page)}
    sections = {f"{p.stem}:{name}" for p in SNIPPETS.glob("*.py") for name in read_sections(p)}
    assert sections - shown == set(), "sections that no page shows (so nothing runs them)"


@pytest.mark.parametrize("text, message", [
    ("# --8<-- [start:a]\nx = 1\n", "section 'a' is never ended"),
    ("# --8<-- [start:a]\n# --8<-- [start:b]\n", "starts inside section 'a'"),
    ("# --8<-- [end:a]\n", "end of 'a'"),
    ("# --8<-- [start:a]\n# --8<-- [end:a]\n# --8<-- [start:a]\n# --8<-- [end:a]\n", "named twice"),
])
def test_malformed_section_markers_are_refused(text, message, tmp_path):
    module = tmp_path / "broken.py"
    module.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_sections(module)


@pytest.mark.parametrize("pattern, wrong", [
    *((pattern, None) for pattern in [".*", ".+", r"[\s\S]*", r"\w+", "(?:ERROR|True|False)"]),  # a broken line
    # A wrong line of its entry: under A.9.1's old pattern, a stale message passed every check (issue 31).
    ("RuntimeError: .*device.*", "RuntimeError: Tensor on device meta is not on the expected device cpu!"),
])
def test_a_pattern_that_would_accept_a_broken_or_wrong_line_is_refused(pattern, wrong, tmp_path):
    declared = tmp_path / "varying_outputs.toml"
    declared.write_text(f"[a9_gpu_training.devices_must_match]\nreason = 'x'\nlines = ['{pattern}']\n"
                        + (f"wrong = ['{wrong}']\n" if wrong else ""))
    accepts = f"pattern {pattern!r} also accepts " + (repr(wrong) if wrong else "")
    with pytest.raises(store.RecordingError, match=re.escape(accepts)):
        store.varying_patterns(declared)


def test_every_declared_line_and_torch_version_typed_is_held_to_a_wrong_value_or_to_the_recording_machine():
    """Each declared entry names a wrong line of its shape (refused as the patterns are read), or its stored output
    is what the machine in recorded.json prints (a stale version, or True without a GPU, fails here); so is every
    torch version typed in pins, install commands and output titles."""
    environment = json.loads(store.MANIFEST.read_text())["environment"]
    # The outputs whose every shape is right on some machine (a version, True or False, a device).
    device = "cuda" if environment["gpu"] else "mps" if environment["mps"] else "cpu"
    expected = {"a1_what_is_pytorch:version": f"{environment['torch']}\n",
                "a1_what_is_pytorch:cuda_available": f"{bool(environment['gpu'])}\n",
                "a1_what_is_pytorch:mps_available": f"{environment['mps']}\n",
                "a9_gpu_training:pick_device": f"{device}\n",
                "a9_gpu_training:to_on_a_tensor": f"cpu\n{device if device == 'cpu' else f'{device}:0'}\nTrue\n"}
    unchecked = [key for key, spec in store.varying_patterns().items() if not spec.get("wrong") and key not in expected]
    assert not unchecked, f"declared lines that a wrong recording of the same shape could pass: {unchecked}"
    assert {key: store.stored_output(key) for key in expected} == expected, (
        f"stored outputs that the recording machine ({environment}) does not print")
    versions = store.stored_output("exercise_solutions:a2_versions")
    assert versions.startswith(f"torch                {environment['torch']}\n"), versions
    gpu = store.stored_output("exercise_solutions:a4_matmul_timing").splitlines()[1]
    assert (gpu == "GPU: none available") == (not environment["gpu"]), gpu
    recorded = environment["torch"].split("+")[0]
    files = [*ROOT.glob("docs*/*.md"), ROOT / "README.md", ROOT / "requirements.in", ROOT / "requirements.txt"]
    stale = [f"{path.relative_to(ROOT)}: torch {version}" for path in files
             for version in re.findall(r"\btorch(?:==| )(\d+\.\d+\.\d+)", path.read_text()) if version != recorded]
    assert not stale, f"the outputs were recorded with torch {recorded}; these name another:\n" + "\n".join(stale)


@pytest.mark.parametrize("key", [key for key, spec in store.varying_patterns().items() if spec.get("random")])
def test_an_unseeded_output_keeps_its_layout_whatever_the_draw(key, recording, capsys):
    """The page's code up to the section, run DRAWS times here from fresh random states: every printout
    has the recorded layout (its lines' count and lengths), only the digits change."""
    sections = next(run["page"].sections for run in recording.runs.values() if key in run["outputs"])
    prefix = sections[: [s.key for s in sections].index(key) + 1]
    shapes = set()
    try:
        for _ in range(DRAWS):
            torch.seed()
            namespace = {"__name__": "__main__"}
            for section in prefix:
                capsys.readouterr()
                exec(section.code, namespace)
            text = capsys.readouterr().out
            diff = compare_text(recording.outputs[key], text, key, store.varying_patterns())
            assert diff is None, f"a fresh draw printed {key} in another layout:\n{diff}"
            shapes.add(tuple(map(len, text.splitlines())))
    finally:
        torch.set_printoptions(profile="default")
    assert len(shapes) == 1


@pytest.mark.parametrize("signal_number, status, moment", [
    (signal.SIGINT, 130, "page-run-"),  # Ctrl-C while the pages run
    (signal.SIGTERM, 143, "DDP-script"),  # a kill while the DDP scripts run
])
def test_an_interrupted_recording_changes_nothing_and_leaves_nothing_running(signal_number, status, moment,
                                                                              tmp_path):
    before = store.stored_files(scripts=True)
    with process_group([sys.executable, "-m", "tools.record"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)},
                       # a shell's background job ignores Ctrl-C, and so would the recorder
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as recorder:
        deadline = time.monotonic() + 180
        while not any(moment in command for command in tagged(recorder.tag).values()):
            assert time.monotonic() < deadline, f"no process running {moment} appeared within 180 s"
            time.sleep(0.05)
        time.sleep(0.5)
        recorder.send_signal(signal_number)
        _, stderr = recorder.communicate(timeout=60)
        left = survivors(recorder.tag, settle=15)
    assert recorder.returncode == status, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted: nothing was written", stderr
    assert not left, f"left running after {signal.Signals(signal_number).name}: {left}"
    assert store.stored_files(scripts=True) == before, "a file changed"
    assert list(ROOT.rglob(".*.writing")) == []
    ours = [name for name in os.listdir(tmp_path) if not name.startswith("torchinductor_")]  # torch's cache
    assert ours == [], "temporary folders left behind"


def test_a_page_that_hangs_is_stopped_and_named(monkeypatch):
    monkeypatch.setattr(record, "TIME_LIMIT", 1)
    monkeypatch.setattr(pages, "download_text", lambda page, sections: "# %%\nimport time\ntime.sleep(60)\n")
    with pytest.raises(store.RecordingError, match=r"^the code of docs/a2-understanding-tensors.md was still "
                                                    r"running after 1 s, so it was stopped"):
        record.record_page("a2-understanding-tensors.md")
