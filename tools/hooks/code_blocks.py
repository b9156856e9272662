"""A chapter page's code blocks, each titled with the book's cells it shows or what it adds, with what it printed and
drew when recorded under it, and its "Run it yourself" box. A stale or missing output fails a strict build."""

import json
import sys
import textwrap
from pathlib import Path

from mkdocs.utils import get_relative_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads a hook by its path
from tools import book, editions, pages, prerequisites
from tools.hooks.serve import log, problem, serving
from tools.sections import Section
from tools.store import GPU_OUTPUTS, MANIFEST, output_path, varying_patterns


def _output_block(title: str, outputs: list[Path], note: str = "") -> str:
    # What the outputs depend on, and where they were recorded, is the note under it: the title fits a phone.
    text = "\n".join(line for path in outputs for line in path.read_text().splitlines())
    block = f'```{{.text .recorded title="{title}"}}\n{text}\n```'
    return f"{block}\n\n{note}\n{{: .output-note }}" if note else block


def _sentence(text: str, edition) -> str:
    return edition.spaced(text[:1].upper() + text[1:] + edition.words["full_stop"])


def _plot_figure(plot: Path, key: str, edition, source: str) -> str:
    """A recorded plot as an inline SVG (it follows the palette) named by its caption, which says what it shows."""
    if (caption := edition.words.get(f"plot:{key}")) is None:
        return problem(f"{source}: tools/words.toml has no words 'plot:{key}' (what the plot of {key} shows, "
                       "its caption and alt text); add them.", "Plot without a caption")
    name = f"plot-{key.replace(':', '-').replace('_', '-')}"
    svg = plot.read_text().partition("<svg ")[2].strip()
    return (f'<figure class="plot">\n<svg role="img" aria-labelledby="{name}" {svg}\n'
            f'<figcaption id="{name}">{caption}</figcaption>\n</figure>')


def _indented(text: str, indent: str) -> str:
    return textwrap.indent(text, indent, lambda line: True)  # blank lines too, as pymdownx.snippets does


def _title(block: pages.Block, labels: dict | None, where: str, edition) -> str | None:
    """The book's cells it shows (tools/book.py finds them), or what it adds (ours); None: untitled."""
    if labels is None:  # a section of another page of its notebook is missing: that page says so
        return None
    if (label := labels.get(block.keys)) and block.ours is not None:
        log.warning(f"{where} shows the book's {label.notebook} cell {', '.join(map(str, label.cells))}: it is "
                    "not ours; remove its ours=\"...\".")
    if label:
        return label.text(edition.words)
    if block.ours is not None:
        return edition.words["ours"].format(adds=block.ours)
    log.warning(f"{where} shows no cell of the book: say what it adds, ```python ours=\"...\".")
    return None


def _blocks(markdown: str, program: pages.Page, edition) -> str:
    """Each block as the page shows it: its title and code; under it, indented as it is, what goes with it."""
    source, recorded = f"{edition.docs.name}/{program.name}", json.loads(MANIFEST.read_text())
    entries, notes, varying = recorded["pages"].get(program.name, {}), book.notes_on(program.name), varying_patterns()
    try:
        labels = book.labels(program.name)
    except (KeyError, ValueError):
        labels = None

    def shown(number: int, block: pages.Block) -> str:
        fence, indent = block.fence, block.fence["indent"]
        title = _title(block, labels, f"{source}, code block {number}", edition)
        attributes = f' title="{title}"{pages.OURS.sub("", fence["attributes"])}' if title else fence["attributes"]
        after, printed = [], [s for s in block.sections if output_path(s.key, ".txt").exists()]
        if printed:
            reasons = [varying[s.key].get(f"reason_{edition.language}", varying[s.key]["reason"])
                       for s in printed if s.key in varying]
            note = edition.words["output_note"].format(reasons=edition.words["reasons_joiner"].join(reasons),
                                                       recorded=edition.recorded(recorded["environment"]))
            after.append(_output_block(edition.words["output_varies" if reasons else "output"],
                                       [output_path(s.key, ".txt") for s in printed],
                                       _sentence(note, edition) if reasons else ""))
            gpu = [output_path(s.key, ".txt", GPU_OUTPUTS) for s in printed if s.key in varying]
            if gpu := [path for path in gpu if path.exists()]:  # recorded by `make gpu-check` on a CUDA machine
                environment = json.loads((GPU_OUTPUTS / "recorded.json").read_text())["environment"]
                after.append(_output_block(edition.words["output_on_gpu"], gpu,
                                           _sentence(edition.recorded(environment), edition)))
        for section in block.sections:
            if (plot := output_path(section.key, ".svg")).exists():
                after.append(_plot_figure(plot, section.key, edition, source))
        if differences := list(dict.fromkeys(d for section in block.sections for d in notes.get(section.key, []))):
            after.append(f'!!! info book "{edition.words["differs"]}"\n'
                         + "".join(f"\n    {d.reason(edition.language)}\n" for d in differences))
        for section in block.sections:
            where = f"snippets/{section.module}.py, section '{section.name}' on {source}"
            if (entry := entries.get(section.key)) is None or entry["code"] != program.fingerprints[section.key]:
                after.append(problem(f"{where}: its code (or code before it on the page) changed since its output "
                                     "was recorded; run `make outputs`."))
            elif entry["prints"] and section not in printed:
                after.append(problem(f"{where}: its recorded output is missing; run `make outputs`."))
        code = _indented(block.code + "\n", indent)
        return (f"{indent}```python{attributes}\n{code}{indent}```"
                + "".join("\n\n" + _indented(part.rstrip("\n"), indent) for part in after if part))

    blocks = enumerate(program.blocks, start=1)  # the fences that `program` was read from, in order
    return pages.SNIPPET_FENCE.sub(lambda fence: shown(*next(blocks)), markdown)


def _run_it_yourself(src: str, sections: list[Section], config, edition) -> str:
    words, name, notebook = edition.words, pages.download_name(src), pages.notebook_of(src)
    script = get_relative_url(f"downloads/{name}", src)
    packages = edition.listing(prerequisites.as_code(pages.needs(sections)))
    links = [words["download"].format(script=f'[`{name}`]({script}){{ download="{name}" }}', packages=packages),
             words["notebook"].format(notebook=f"[{notebook}]({get_relative_url(f'notebooks/{notebook}.ipynb', src)})")
             + pages.colab_link(config, notebook, edition, "colab")]
    return f'!!! tip "{words["run_it_yourself"]}"\n\n    ' + words["or"].join(links) + words["full_stop"] + "\n\n"


def on_page_markdown(markdown: str, /, *, page, config, files) -> str:
    src, edition = page.file.src_uri, editions.of(config)
    if src not in pages.chapter_pages():
        return markdown
    program = pages.read(src, text=markdown)
    try:
        program.fingerprints  # reads the code of every section
    except (KeyError, ValueError) as error:  # pymdownx.snippets stops a build on it; serving, show the page
        markdown = pages.SNIPPET_FENCE.sub("", markdown) if serving() else markdown  # its blocks go
        return problem(f"{edition.docs.name}/{src}: {error.args[0]}", "Missing code") + markdown  # until fixed
    markdown = _blocks(markdown, program, edition)
    box = _run_it_yourself(src, program.sections, config, edition)
    if page.meta.get("run_it_yourself") == "at the end":  # e.g. not above the exercises' solutions
        return f"{markdown.rstrip()}\n\n{box}"
    title, _, rest = markdown.partition("\n")  # after the title, which stays first
    return f"{title}\n\n{box}{rest}"
