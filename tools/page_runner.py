"""Run a page's download as the recorder and the checker run it:

    python -I tools/page_runner.py SCRIPT RESULT PLOTS

SCRIPT (the download) runs cell by cell (`# %%`) in a real __main__
module, so that pickling a class defined in a cell works as in a script;
RESULT gets what each cell printed and the machine. PLOTS is JSON:
{"plots": the path of tools/plots.py, "plotters": {cell index: plotter
name}, "words": {language: the plots' words}}; each plot is drawn once per
language into RESULT.N.LANG.svg. This file imports nothing of the project:
it runs where the project cannot be imported, and check-appendix-a.py
carries it whole (hence lines of 80 characters at most).
"""

import contextlib
import importlib.util
import io
import json
import os
import platform
import runpy
import sys
import traceback
import types

# Python 3.10 puts this file's folder first on sys.path even under -I: the
# page must not see it.
if globals().get("__file__"):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path = [path for path in sys.path
                if os.path.abspath(path or ".") != here]
script, result, plots = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if importlib.util.find_spec("snippets") is not None:
    sys.exit("this Python can import the project's `snippets` package, but a "
             "page must run without it; uninstall the project from this "
             "environment (pip uninstall appendix-a-executable-book)")
text = open(script, encoding="utf-8").read()
main = types.ModuleType("__main__")
main.__file__ = script
sys.modules["__main__"] = main
outputs, line = [], 1
for number, part in enumerate(text.split("\n# %%\n")):
    # Tracebacks name the real line.
    code = compile("\n" * (line - 1) + part, script, "exec")
    line += part.count("\n") + 2
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            exec(code, main.__dict__)
    except BaseException:
        sys.exit(f"{os.path.basename(script)}: cell {number} raised:\n"
                 f"{traceback.format_exc()}")
    outputs.append(buffer.getvalue())
    # A maintainer's plot of what this cell made (cell 0 is the header).
    plotter = plots.get("plotters", {}).get(str(number - 1))
    if plotter:
        import matplotlib
        # The same ids in the SVG on every run; text as text, not glyph
        # outlines (a third of the size). Chinese labels are laid out with a
        # CJK font where one is installed (fonts-wqy-microhei); the reader's
        # browser draws the text with its own fonts.
        matplotlib.rcParams["svg.hashsalt"] = "appendix-a"
        matplotlib.rcParams["svg.fonttype"] = "none"
        matplotlib.rcParams["font.family"] = ["DejaVu Sans",
                                              "WenQuanYi Micro Hei"]
        draw = runpy.run_path(plots["plots"])[plotter]
        for language, words in plots["words"].items():
            figure, title, data = draw(main.__dict__, outputs[-1], words)
            figure.savefig(f"{result}.{number - 1}.{language}.svg",
                           format="svg", metadata={"Date": None})
        outputs[-1] = {"text": outputs[-1],
                       "plot": {"title": title, "data": data}}
import torch  # noqa: E402  (the page imported it already)

environment = {
    "torch": torch.__version__, "python": platform.python_version(),
    "machine": f"{platform.system()} {platform.machine()}",
    "cores": os.cpu_count(), "mps": torch.backends.mps.is_available(),
    "gpu": (torch.cuda.get_device_name(0) if torch.cuda.is_available()
            else None)}
with open(result, "w") as file:
    json.dump({"outputs": outputs[1:], "environment": environment}, file)
