"""Run a page's download as the recorder and the checker run it:

    python -I page_runner.py SCRIPT RESULT PLOTS

SCRIPT (the download) runs cell by cell (`# %%`) in a real __main__
module, so that pickling a class defined in a cell works as in a script;
RESULT gets what each cell printed and the machine. Matplotlib draws off
screen (plt.show() shows nothing); a figure that a cell leaves open is
closed after it, and with PLOTS '{"save": true}' the recorder's copy is
saved first: RESULT.N.svg for cell N, and what it shows in RESULT. This
file imports nothing of the project: it runs where the project cannot be
imported, and check-appendix-a.py carries it whole (hence lines of 80
characters at most).
"""

import contextlib
import importlib.util
import io
import json
import os
import platform
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


def shown_by(figure):
    """What each of a figure's axes shows, which the check compares (not its
    pixels): its labels, and the data of its lines, points and images."""
    def rounded(rows):
        return [[round(float(value), 4) for value in row] for row in rows]

    return [{"labels": [axes.get_xlabel(), axes.get_ylabel(), axes.get_title()],
             "legend": [text.get_text() for text in axes.get_legend().texts]
             if axes.get_legend() else [],
             "lines": [rounded(line.get_xydata()) for line in axes.lines],
             "points": [rounded(points.get_offsets())
                        for points in axes.collections],
             "images": [[" ".join(f"{value:.3g}" for value in row)
                         for row in image.get_array()]
                        for image in axes.images]}
            for axes in figure.axes]


if importlib.util.find_spec("snippets") is not None:
    sys.exit("this Python can import the project's `snippets` package, but a "
             "page must run without it; uninstall the project from this "
             "environment (pip uninstall appendix-a-executable-book)")
# A window would stop the run until closed.
os.environ["MPLBACKEND"] = "Agg"
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
    pyplot = sys.modules.get("matplotlib.pyplot")
    figures = pyplot.get_fignums() if pyplot else []
    if len(figures) > 1:
        sys.exit(f"cell {number} left {len(figures)} figures open; a cell "
                 "draws one at most")
    if figures and plots.get("save"):
        figure = pyplot.figure(figures[0])
        # Text as text, not glyph outlines; ids that are the same on every
        # run and differ from the other plots' (a notebook shows three).
        salt = f"{os.path.basename(script)}:{number}"
        with pyplot.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
            figure.savefig(f"{result}.{number - 1}.svg", format="svg",
                           transparent=True, metadata={"Date": None})
        outputs[-1] = {"text": outputs[-1], "plot": shown_by(figure)}
    if pyplot:
        pyplot.close("all")
import torch  # noqa: E402  (the page imported it already)

environment = {
    "torch": torch.__version__, "python": platform.python_version(),
    "machine": f"{platform.system()} {platform.machine()}",
    "cores": os.cpu_count(), "mps": torch.backends.mps.is_available(),
    "gpu": (torch.cuda.get_device_name(0) if torch.cuda.is_available()
            else None)}
with open(result, "w") as file:
    json.dump({"outputs": outputs[1:], "environment": environment}, file)
