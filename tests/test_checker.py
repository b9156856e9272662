"""check-appendix-a.py, the download that checks a reader's machine against the site: made from the
repository's pages and outputs, it runs alone (`python -I`, in an empty folder) and finds this machine
the same as the site; a planted difference, a failing or hanging page, bad input and Ctrl-C each end it
with one sentence and leave nothing behind; its report is what the recorder reads back. A GPU is faked."""

import ast
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
import torch
from bs4 import BeautifulSoup
from conftest import nav_pages, survivors

from tools import ROOT, check_appendix_a, checker, page_runner, pages, record, store
from tools.checker import NAME
from tools.ddp_runs import SCRIPT_RUNS, run_key
from tools.editions import EDITIONS, ENGLISH
from tools.page_runner import process_group, run, tagged


def run_checker(folder, *args, site=None, python=(sys.executable, "-I"), timeout=300, meanwhile=None):
    """The checker (of `site`) run alone in `folder`, as a reader runs it (`meanwhile(process)` once started): it
    leaves nothing in its temporary folder, `folder`/tmp, no file but its report, and no process behind."""
    (folder / "tmp").mkdir(parents=True)
    (folder / NAME).write_text(checker.generate(site))
    with process_group([*python, NAME, *args], cwd=folder, env={**os.environ, "TMPDIR": str(folder / "tmp")},
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        if meanwhile:
            meanwhile(process)
        stdout, stderr = process.communicate(timeout=timeout)
        assert survivors(process.tag, settle=10) == [] and list((folder / "tmp").iterdir()) == []  # 10 s: a busy host
    report = args[args.index("--report") + 1] if "--report" in args else None
    assert {path.name for path in folder.iterdir()} <= {NAME, "tmp", report}
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


HANGS = '"""A page that hangs."""\n\n# %%\nimport time\n\ntime.sleep(600)\n'


def planted(**codes):
    """The repository's site with the code of some pages replaced, by page id: {"A1": "code"}."""
    site = checker.site_data()
    for page in site["pages"].values():
        page["code"] = codes.get(page["id"].replace(".", ""), page["code"])
    return site


def generated(folder):
    """check-appendix-a.py as the build serves it, written to `folder` and imported."""
    (folder / NAME).write_text(checker.generate())
    spec = importlib.util.spec_from_file_location("check_appendix_a", folder / NAME)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checker_carries_the_pages_downloads_and_their_recorded_outputs(tmp_path):
    site = generated(tmp_path).SITE
    assert site == json.loads(json.dumps(checker.site_data()))
    recorded = json.loads(store.MANIFEST.read_text())
    nav = [source.split("/", 1)[1] for source, _ in nav_pages(ENGLISH)]  # docs/PAGE, in the nav's order
    assert list(site["pages"]) == [page for page in nav if page in {*pages.chapter_pages(), *checker.WHOLE_PROGRAMS}]
    # The machine-dependent lines declared for the blocks it runs, and no others.
    keys = {cell["key"] for entry in site["pages"].values() for cell in entry["cells"]}
    assert site["varying"] == {key: {"reason": spec["reason"], "lines": spec["lines"]}
                               for key, spec in store.varying_patterns().items() if key in keys}
    # A.9.3's DDP program, whole, with its recorded run.
    for page, name in checker.WHOLE_PROGRAMS.items():
        carried, script = site["pages"].pop(page), ROOT / SCRIPT_RUNS[name].args[0]
        assert (carried["id"], carried["script"], carried["code"]) == ("A.9.3", script.name, script.read_text())
        assert [(cell["key"], cell["output"]) for cell in carried["cells"]] == [
            (run_key(name), (store.SCRIPT_OUTPUTS / name).read_text())]
    for page, carried in site["pages"].items():
        assert carried["code"] == pages.download_text(page), f"{NAME} runs other code than {page}'s download"
        prints = recorded["pages"][page]
        assert [(cell["key"], cell["output"]) for cell in carried["cells"]] == [
            (cell.key, store.output_path(cell.key, ".txt").read_text() if prints[cell.key]["prints"] else "")
            for cell in pages.program(page)], f"{NAME} expects other outputs of {page} than are recorded"
    env = recorded["environment"]  # of the site's recordings
    assert site["recorded"] == f"torch {env['torch']}, Python {env['python']}, {env['machine']}, {ENGLISH.device(env)}"
    # One file of the recorder's own runner and comparison (not written twice) and the checker: every function
    # and class of each as it is there; no name defined twice or undefined.
    text = (tmp_path / NAME).read_text()
    def definitions(source):  # each function and class, as written
        return [ast.get_source_segment(source, n) for n in ast.parse(source).body if hasattr(n, "decorator_list")]
    assert definitions(text) == [code for module in (page_runner, check_appendix_a)
                                 for code in definitions(Path(module.__file__).read_text())]
    status, stdout, _ = run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F", NAME], 60,
                            cwd=tmp_path)
    assert status == 0, stdout
    # What the reader reads of it (all but the data) fits 80 characters a line.
    [data] = [n for n in ast.parse(text).body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "SITE"]
    code = text.splitlines()[:data.lineno - 1] + text.splitlines()[data.end_lineno:]
    assert max(len(line) for line in code) <= 80, max(code, key=len)


def test_this_machine_prints_what_the_site_shows_and_the_report_is_read_back(tmp_path):
    """Every page checked, two at a time, with a report."""
    result = run_checker(tmp_path, "--jobs", "2", "--report", "report.md")
    assert result.returncode == 0, result.stdout + result.stderr
    lines, checked = result.stdout.splitlines(), checker.site_data()["pages"]
    assert lines[-2].startswith(f"All the same: all {len(checked)} pages print what the site shows")
    for page, entry in checked.items():  # a line for each page, and a progress line
        assert any(line.split(": ")[0].endswith(entry["title"]) for line in lines), page
        assert f"({entry['script']}) ..." in result.stderr
    assert "exercise_solutions:a4_matmul_timing line 1" in result.stdout and "timings differ" in result.stdout
    # The report has it all, and the recorder reads it back.
    text = (tmp_path / "report.md").read_text()
    data = store.read_report(tmp_path / "report.md")
    assert data["summary"] in text and data["summary"] in result.stdout
    assert list(data["pages"]) == list(checked)
    assert data["machine"]["torch"].startswith(f"{torch.__version__} (")
    assert "| Gloo | available |" in text and "exercise_solutions:a4_matmul_timing line 1: " in text
    # What `make checker-versions` keeps of it.
    entry = checker.versions_entry(data, versions := checker.page_versions())
    assert (entry["torch"], entry["python"]) == (torch.__version__, sys.version.split()[0])
    assert entry["machine"]["gpu"] is None and {page: v["version"] for page, v in entry["pages"].items()} == versions
    (tmp_path / "cut.md").write_text(text[:len(text) // 2])
    with pytest.raises(store.RecordingError, match="not a report of check-appendix-a.py"):
        store.read_report(tmp_path / "cut.md")


def test_a_page_that_hangs_is_stopped_and_a_whole_program_runs_as_a_script(tmp_path):
    """A.1 hangs past --timeout; A.9.3's program is run whole (`python ddp-inside.py`, its __main__ block too), not
    block by block, and prints other than the site shows."""
    site = planted(A1=HANGS, A93='if __name__ == "__main__":\n    print("DDP: 3 processes")\n')
    result = run_checker(tmp_path, "--page", "a1", "--page", "ddp-inside", "--timeout", "2", site=site, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED     A.1 What is PyTorch?: still running after 2 s, so it was stopped" in result.stdout
    assert "DIFFERENT  A.9.3 Training with multiple GPUs: differs from the site in scripts:ddp-inside" in result.stdout
    assert "    -DDP: 2 processes, gloo" in result.stdout.splitlines()  # the start of the diff


def python_without(folder, hidden):
    """A Python that has this one's packages but `hidden`: a venv whose .pth file names a folder of links to
    the others, as a reader's Python with torch and without `hidden` would be."""
    venv.create(folder / "venv")
    (packages := folder / "packages").mkdir()
    for entry in Path(torch.__file__).parents[1].iterdir():  # this Python's site-packages
        if not entry.name.startswith(hidden):
            (packages / entry.name).symlink_to(entry)
    [site_packages] = (folder / "venv").glob("lib/python*/site-packages")
    (site_packages / "others.pth").write_text(f"{packages}\n")
    return str(folder / "venv" / "bin" / "python")


def test_failing_pages_a_planted_difference_and_a_missing_package_are_reported(tmp_path):
    """With torch and without matplotlib: A.1 fails in a block, A.3 prints other than the site shows, A.9.3's program
    (run whole) exits with 3; the blocks that plot are not run, each saying what to install, and every other block of
    the pages that plot prints what the site shows."""
    site = planted(A1='"""A page that fails."""\n\n# %%\nprint("hello")\n\n# %%\nraise ValueError("planted")\n',
                   A93="raise SystemExit(3)\n")
    changed = next(cell for cell in site["pages"]["a3-computation-graphs.md"]["cells"] if cell["output"])
    changed["output"] = changed["output"].replace("0", "1", 1)
    plotting = [page for page in pages.chapter_pages() if "matplotlib" in pages.needs(pages.program(page))]
    assert plotting, "no page imports matplotlib any more: hide another package here"
    ids = [arg for page in plotting for arg in ("--page", pages.download_name(page))]
    result = run_checker(tmp_path / "run", "--page", "A.3", "--page", "a.1", "--page", "ddp-inside.py", *ids,
                         "--jobs", "2", "--report", "r.md", site=site,
                         python=(python_without(tmp_path, "matplotlib"), "-I"))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "FAILED     A.1 What is PyTorch?: block 2 of its code raised ValueError: planted." in lines
    assert (f"DIFFERENT  A.3 Seeing models as computation graphs: differs from the site in {changed['key']}"
            in result.stdout)
    assert f"    --- recorded {changed['key']}" in lines and any(line.startswith("    -") for line in lines)
    assert "FAILED     A.9.3 Training with multiple GPUs: its Python exited with status 3" in result.stdout
    assert lines[-2] == (f"3 of {len(plotting) + 3} pages did not print what the site shows: A.1, A.3, A.9.3. "
                         "Not run: the blocks that need matplotlib (pip install matplotlib to check them too).")
    assert "  matplotlib not installed" in lines
    for page in plotting:
        assert any(line.startswith(("same ", "machine ")) and pages.title(page) in line for line in lines), page
        for cell in pages.program(page):
            if "matplotlib" in pages.imports(cell.code):
                assert f"    not run: {cell.key} needs matplotlib (pip install matplotlib)" in lines
    # The report has the whole of the diff and what the failing page wrote.
    text = (tmp_path / "run" / "r.md").read_text()
    diff = store.read_report(tmp_path / "run" / "r.md")["pages"]["a3-computation-graphs.md"]["diff"]
    assert "".join(f"    {line}\n" for line in diff.splitlines()) in text and '    raise ValueError("planted")' in text


@pytest.mark.parametrize("args, python, status, message", [
    (["--page", "A.10"], (sys.executable, "-I"), 2, "there is no page 'A.10' to check; choose one of A.1, A.2"),
    (["--report", "no/such/folder/r.md"], (sys.executable, "-I"), 2, "cannot write a report to no/such/folder/r.md: "),
    (["--report", "."], (sys.executable, "-I"), 2, "cannot write a report to .: give a file in a folder that exists"),
    (["--timeout", "0"], (sys.executable, "-I"), 2, "argument --timeout: '0' is not a number above 0."),
    (["--jobs", "0"], (sys.executable, "-I"), 2, "argument --jobs: '0' is not a whole number above 0."),
    ([], (sys.executable, "-I", "-S"), 1, "this Python has no torch, and the pages need it"),  # -S: no site-packages
], ids=["unknown page", "report nowhere", "report a folder", "timeout 0", "jobs 0", "no torch"])
def test_bad_input_is_one_sentence(args, python, status, message, tmp_path):
    result = run_checker(tmp_path, *args, python=python, timeout=60)
    assert (result.returncode, result.stdout, len(result.stderr.splitlines())) == (status, "", 1), result.stderr
    assert message in result.stderr


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["Ctrl-C", "SIGTERM", "terminal closed"])
def test_a_stop_ends_every_page_run_with_one_line(signum, status, tmp_path):
    def stop(process):
        while len(tagged(process.tag)) < 3:  # the checker and its two page runs
            assert process.poll() is None, process.communicate()
            time.sleep(0.1)
        # In its own process group, as a terminal runs it: Ctrl-C reaches the whole group.
        os.killpg(process.pid, signum) if signum == signal.SIGINT else process.send_signal(signum)

    result = run_checker(tmp_path, "--page", "A.1", "--page", "A.2", "--jobs", "2", site=planted(A1=HANGS, A2=HANGS),
                         timeout=30, meanwhile=stop)
    assert result.returncode == status and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == f"{NAME}: interrupted; every page run has stopped and nothing was written."


# ---------------------------------------------------------------------------------------------
# A GPU, faked: the program itself, imported, with the machine and the page runs replaced

ON_GPU = {  # what the device code prints on a CUDA GPU
    "a1_what_is_pytorch:cuda_available": "True\n",
    "a9_gpu_training:pick_device": "cuda\n",
    "a9_gpu_training:add_on_device": "tensor([5., 7., 9.], device='cuda:0')\n",
    "a9_gpu_training:devices_must_match": "RuntimeError: Expected all tensors to be on the same device, "
                                          "but found at least two devices, cuda:0 and cpu!\n",
    "a9_gpu_training:to_on_a_tensor": "cpu\ncuda:0\nTrue\n",
    "exercise_solutions:a4_matmul_timing": "CPU:    801.2 µs per product (torch threads: 8)\n"
                                           "GPU:     12.5 µs per product\n",
}


def imported(tmp_path, monkeypatch, device, gpu, fake_runs=True):
    """The generated checker as a module, told that this machine has a `device` GPU (`gpu`: CUDA's); its page runs
    faked (fake_runs), noted (script, MPS hidden, CUDA hidden): the recorded outputs, or ON_GPU's on the device."""
    module, facts = generated(tmp_path), page_runner.describe_machine()
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # pytest keeps its own handlers
    gpus = {"gpus": [gpu], "gpu": gpu, "cuda": "12.8", "build": "CUDA 12.8"} if device == "cuda" else {"mps": True}
    monkeypatch.setattr(module, "describe_machine", lambda: {**facts, **gpus})
    recorded = {cell["key"]: cell["output"] for page in module.SITE["pages"].values() for cell in page["cells"]}
    module.calls = []

    def run_page(code, script, keys, timeout, env, hide_mps, whole):
        module.calls.append((script, hide_mps, env.get("CUDA_VISIBLE_DEVICES") == ""))
        return {"environment": {"torch": "2.13.0+cu128", "python": "3.11.7", "machine": "Linux x86_64", "cores": 8,
                                "gpu": None if hide_mps else "NVIDIA H200", "mps": False},
                "outputs": {key: recorded[key] if hide_mps else ON_GPU.get(key, recorded[key]) for key in keys}}

    if fake_runs:
        monkeypatch.setattr(module, "run_page", run_page)
    return module


def test_a_page_that_fails_on_the_gpu_fails_the_check(monkeypatch, tmp_path, capsys):
    program = imported(tmp_path, monkeypatch, "cuda", "NVIDIA H200")
    run_page = program.run_page

    def failing_on_the_gpu(code, script, keys, timeout, env, hide_mps, whole):
        if not hide_mps and script == pages.download_name("a9-gpu-training.md"):
            raise program.Failed("CUDA error: out of memory")
        return run_page(code, script, keys, timeout, env, hide_mps, whole)

    monkeypatch.setattr(program, "run_page", failing_on_the_gpu)
    assert program.main(["--page", "A.9"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "A.9 failed on cuda. On the CPU, the page prints what the site shows.")


@pytest.mark.parametrize("device, gpu", [("cuda", "NVIDIA H200"), ("mps", "Apple silicon GPU")])
def test_on_a_gpu_the_device_code_runs_there_and_a_cuda_report_is_recorded(device, gpu, monkeypatch, tmp_path, capsys):
    """Every GPU (CUDA's, MPS) hidden on the CPU and none on the device."""
    program = imported(tmp_path, monkeypatch, device, gpu)
    report = tmp_path / "report.md"
    assert program.main(["--report", str(report)]) == 0
    stdout = capsys.readouterr().out
    assert [script for script, _, cuda in program.calls if not cuda] == list(map(pages.download_name, pages.GPU_PAGES))
    assert all(mps == cuda for _, mps, cuda in program.calls)
    assert f"The pages with device code, on {device} ({gpu}):\n" in stdout
    assert f"  a9_gpu_training:pick_device on {device}:\n    cuda\n" in stdout
    assert f"a4_matmul_timing on {device}:\n" in stdout
    text = report.read_text()
    assert f"## On {device}: {gpu}" in text and f"  a9_gpu_training:pick_device on {device}:\n    cuda\n" in text
    if device == "mps":
        with pytest.raises(store.RecordingError, match="without a CUDA GPU"):
            record.record_report(report)
        # --hide-mps, really run: the page's torch reports no MPS (replaced before the page's first block).
        code = '"""A page."""\n# %%\nimport torch\nprint(torch.backends.mps.is_available.__name__)\n'
        runs = [page_runner.run_page(code, "mps.py", ["mps"], 120, hide_mps=hide)["outputs"] for hide in (False, True)]
        assert runs == [{"mps": "is_available\n"}, {"mps": "<lambda>\n"}]
        return
    assert "| torch | " in text and " (CUDA 12.8 build) |\n" in text and "| CUDA | 1 GPU: NVIDIA H200 |\n" in text
    recording = record.record_report(report)
    # What make gpu-check records: the machine-dependent outputs of the pages with device code.
    varying = store.varying_patterns()
    assert set(recording.outputs) == {cell.key for page in pages.GPU_PAGES for cell in pages.program(page)
                                      if cell.key in varying}
    assert {key: recording.outputs[key] for key in ON_GPU} == ON_GPU
    assert recording.manifest["environment"]["gpu"] == "NVIDIA H200"
    assert recording.manifest["environment"]["recorded_by"].startswith("check-appendix-a.py --report on ")
    monkeypatch.setattr(record, "GPU_OUTPUTS", tmp_path / "gpu")
    assert len(record.write_gpu(recording)) == len(recording.outputs) + 1
    assert (tmp_path / "gpu" / "a9_gpu_training" / "pick_device.txt").read_text() == "cuda\n"
    assert json.loads((tmp_path / "gpu" / "recorded.json").read_text()) == recording.manifest
    # A stale or odd report is refused.
    a9 = store.read_report(report)["device"]["pages"]["a9-gpu-training.md"]
    report.write_text(text.replace(f'"fingerprint": "{a9["cells"][-1]["fingerprint"]}"', '"fingerprint": "0000"', 1))
    with pytest.raises(store.RecordingError, match="ran an older version of docs/a9-gpu-training.md"):
        record.record_report(report)
    report.write_text(text.replace("tensor([5., 7., 9.], device='cuda:0')", "tensor([5., 7.], device='cuda:0')"))
    with pytest.raises(store.RecordingError, match="a9_gpu_training:add_on_device on the GPU does not have the shape"):
        record.record_report(report)


def test_a_cpu_report_relabelled_as_a_gpu_one_is_refused_and_nothing_is_written(monkeypatch, tmp_path, capsys):
    """The checker told that this CPU machine has an NVIDIA GPU: its device runs really run, here, on the CPU."""
    program = imported(tmp_path, monkeypatch, "cuda", "NVIDIA H100", fake_runs=False)
    report = tmp_path / "report.md"
    assert program.main(["--report", str(report), *(f"--page={pages.download_name(p)}" for p in pages.GPU_PAGES)]) == 0
    monkeypatch.setattr(record, "GPU_OUTPUTS", tmp_path / "gpu")
    with pytest.raises(store.RecordingError) as refused:
        record.write_gpu(record.record_report(report))
    message = str(refused.value)
    assert message.startswith(f"{report} names the GPU NVIDIA H100, but its runs were not made on it (torch "
                              f"{torch.__version__} is a build without CUDA; torch found no CUDA GPU; ")
    assert "a9_gpu_training:pick_device printed 'cpu', not 'cuda'" in message
    assert "a1_what_is_pytorch:cuda_available printed 'False', not 'True'" in message
    assert "\n" not in message and not (tmp_path / "gpu").exists()


# ---------------------------------------------------------------------------------------------
# On the site

def test_the_setup_pages_offer_the_checker_and_show_the_torch_versions_it_passed_with(built_site):
    """Both editions serve the checker as generated, linked from setup and summary; setup shows measured/checker.json
    (`make checker-versions`): a page changed since says so, and the table no longer says all passed."""
    results = json.loads(checker.VERSIONS.read_text())
    recorded = json.loads(store.MANIFEST.read_text())["environment"]["torch"]
    assert recorded in results, f"the check has not been run with the torch that recorded the outputs, {recorded}"
    current = checker.page_versions()
    for edition in EDITIONS.values():
        site = built_site / edition.prefix
        assert (site / "downloads" / NAME).read_text() == checker.generate()
        soups = {page: BeautifulSoup((site / page / "index.html").read_text(), "html.parser")
                 for page in ("setup", "summary")}
        for page, soup in soups.items():
            assert soup.select_one(f'.md-content a[href="../downloads/{NAME}"][download]'), f"{page} has no link"
        table = checker.versions_md(results, edition.language, current)
        lead = " ".join(table.split("\n\n")[0].split())  # the table's first paragraph, as the page shows it
        assert lead in " ".join(soups["setup"].select_one("article").get_text(" ").split())
    checked = {version: {**result, "pages": {page: {**entry, "version": current[page]}
                                             for page, entry in result["pages"].items()}}
               for version, result in results.items()}
    all_passed = f"Every page printed what the site shows with torch {' and '.join(sorted(results))}."
    assert checker.versions_md(checked, "en", current).startswith(all_passed)
    table = checker.versions_md(checked, "en", {**current, "a7-typical-training-loop.md": "0" * 12})
    assert table.startswith("Some pages have changed since")
    [row] = [line for line in table.splitlines() if line.startswith("| [A.7]")]
    assert row.count("on an earlier version of the page") == len(results)
    assert "earlier version" not in "".join(line for line in table.splitlines() if line.startswith("| [A.6]"))
