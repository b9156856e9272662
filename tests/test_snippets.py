"""Every snippet module runs, and prints exactly what is recorded and shown on the pages."""

import shutil

import pytest

from tools import record_outputs
from tools.record_outputs import compare_text, find_drift, in_parallel, run_plain_script, varying_patterns
from tools.sections import OUTPUTS, read_chunks, recorded_modules

MODULES = [path.stem for path in recorded_modules()]


@pytest.fixture(scope="session")
def fresh_runs():
    """Each module run once, fresh, section by section (what `make outputs` would record)."""
    return record_outputs.run_all()


@pytest.fixture(scope="session")
def plain_script_outputs():
    """What `python snippets/MODULE.py` prints, for every module."""
    modules = recorded_modules()
    return dict(zip((m.stem for m in modules), in_parallel(run_plain_script, modules)))


def recorded_text(module: str) -> str:
    """The module's recorded outputs, concatenated in section order."""
    names = [c.name for c in read_chunks(OUTPUTS.parent / f"{module}.py") if c.name]
    return "".join((OUTPUTS / module / f"{n}.txt").read_text()
                   for n in names if (OUTPUTS / module / f"{n}.txt").exists())


def module_patterns(module: str) -> list[str]:
    return [p for key, spec in varying_patterns().items() if key.startswith(f"{module}:") for p in spec["lines"]]


@pytest.mark.parametrize("module", MODULES)
def test_recorded_outputs_match_a_fresh_run(module, fresh_runs):
    problems = find_drift({module: fresh_runs[module]})
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("module", MODULES)
def test_module_runs_as_a_plain_script(module, plain_script_outputs):
    diff = compare_text(recorded_text(module), plain_script_outputs[module], module_patterns(module),
                        f"snippets/{module}.py as a script")
    assert diff is None, f"`python snippets/{module}.py` prints something else than the recorded outputs:\n{diff}"


def test_one_changed_character_fails_with_a_diff_naming_the_section(fresh_runs, tmp_path):
    outputs = tmp_path / "outputs"
    shutil.copytree(OUTPUTS, outputs)
    shape = outputs / "a2_tensors" / "shape.txt"
    shape.write_text(shape.read_text().replace("3", "4", 1))

    problems = find_drift({"a2_tensors": fresh_runs["a2_tensors"]}, outputs)

    assert len(problems) == 1
    assert "snippets/a2_tensors.py, section 'shape'" in problems[0]
    assert "-torch.Size([2, 4])" in problems[0] and "+torch.Size([2, 3])" in problems[0]
    assert "make outputs" in problems[0]


def test_a_machine_dependent_line_is_checked_for_its_shape(fresh_runs, tmp_path):
    outputs = tmp_path / "outputs"
    shutil.copytree(OUTPUTS, outputs)
    version = outputs / "a1_what_is_pytorch" / "version.txt"
    fresh = {"a1_what_is_pytorch": fresh_runs["a1_what_is_pytorch"]}

    version.write_text("1.0.0\n")  # another version: the same shape, accepted
    assert find_drift(fresh, outputs) == []

    version.write_text("no torch here\n")  # not a version at all
    problems = find_drift(fresh, outputs)
    assert any("section 'version'" in p for p in problems), problems


def test_a_new_or_vanished_output_is_reported(fresh_runs, tmp_path):
    outputs = tmp_path / "outputs"
    shutil.copytree(OUTPUTS, outputs)
    (outputs / "a2_tensors" / "shape.txt").unlink()
    (outputs / "a2_tensors" / "removed_section.txt").write_text("old\n")

    problems = "\n".join(find_drift({"a2_tensors": fresh_runs["a2_tensors"]}, outputs))

    assert "section 'shape' prints output that is not recorded" in problems
    assert "section 'removed_section' prints nothing now" in problems


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
        read_chunks(module)
