"""The built site in a real browser (headless Chromium through Playwright and pytest-playwright).

Every page in the nav of both editions (mkdocs.yml, mkdocs.zh.yml) is opened from a local server,
and must:

- load, with every resource it asks for, from 127.0.0.1 alone and without an error;
- log no console error and raise no uncaught exception;
- give each code block a copy button whose target is exactly the code;
- lay out its math (MathML rendered at build time) and its diagrams (inline SVG), colour its
  diagrams with the palette, give every image and every diagram an accessible name, and show no raw LaTeX;
- on a notebook page, show the outputs stored in the notebook.

Then, resized to a phone's width (390 px), every page must read without a sideways scroll: code blocks
(notebook cells included) keep at least three quarters of the text column, diagram text is at
least 8 px high, output lines wrap, and identifiers in tables break only after a dot, an
underscore or a slash.

Search finds the pages of the API names readers type, and of Chinese words in the Chinese edition,
and its previews show no whole script. The language switch leads to the same page in the other edition.
The palette toggle offers the dark palette in the edition's words. Built as the Pages workflow builds
it, the site serves a 404 page that works under a project's sub-path, with search, the contents and
a way to the Chinese edition (its sitemap and edit links are checked in test_site_build.py).

What Material's own JavaScript does with our pages (switching the palette, copying to the clipboard)
is Material's to test, not ours.

With pytest-playwright's `--screenshot on` (or `only-on-failure`), a full-page screenshot of every
page at 1280 px and at 390 px, and one of each diagram in light and dark, is saved in the test's folder
under `--output` (test-results/). They are off by default: taking them was more than half of this
file's time.

The browser is the system's Chromium headless shell (`apt-get install -y chromium-headless-shell`,
or .ci/install-browser.sh) or Chromium, given to pytest-playwright's `browser` fixture;
`playwright install` is never needed.
"""

import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import ROOT, SUB_PATH, nav_pages
from mkdocs.utils.yaml import yaml_load

from tools.editions import CHINESE, EDITIONS, ENGLISH

HOST = "127.0.0.1"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
    "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
INSTALL_HINT = (
    "install it with `sudo apt-get install -y chromium-headless-shell` (Debian; or chromium, or run "
    ".ci/install-browser.sh) and `pip install -r requirements.txt` for playwright and pytest-playwright; "
    "the system Chromium is used, `playwright install` is not needed. Set CHROMIUM=/path/to/chromium "
    "to use another build."
)


def cannot_run(reason: str):
    """Skip the browser tests, saying why and what to do; under CI (CI=true), fail instead."""
    message = f"the browser tests cannot run: {reason}. To run them, {INSTALL_HINT}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


try:
    import pytest_playwright  # noqa: F401 (the plugin that gives the `browser` fixture)
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect
except ImportError:
    cannot_run("the pytest-playwright package is not importable")

MULTI_GPU_PAGE = "a9-multi-gpu-training"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
OK_STATUS = {200, 304}  # 304: the browser revalidated its cached copy of an asset

# The pages: read from the nav of each edition's config, so that a new page is checked too.
PAGES = [page for edition in EDITIONS.values() for page in nav_pages(edition)]  # both editions


# ---------------------------------------------------------------------------
# What the browser saw while a page was open.

@dataclass
class BrowserEvents:
    """Network and console events, collected between two `reset()` calls."""

    outside: list[str] = field(default_factory=list)
    bad_responses: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.in_flight = set()  # requests not answered yet: not cleared by reset()
        self.last_activity = time.monotonic()  # when a request last started or ended

    def on_request(self, request):
        self.in_flight.add(request)
        self.last_activity = time.monotonic()

    def on_request_done(self, request):
        self.in_flight.discard(request)
        self.last_activity = time.monotonic()

    def reset(self):
        for name in self.__dataclass_fields__:
            getattr(self, name).clear()

    def problems(self) -> list[str]:
        """Each problem once (a resource the page asks for twice fails twice), in the order seen."""
        return list(dict.fromkeys(
                [f"request to another host (blocked): {url}" for url in self.outside]
                + [f"bad response: {line}" for line in self.bad_responses]
                + [f"request failed: {line}" for line in self.failed]
                + [f"console error: {line}" for line in self.console_errors]
                + [f"uncaught page error: {line}" for line in self.page_errors]))

    def route(self, route):
        url = route.request.url
        if urlsplit(url).hostname == HOST:
            route.continue_()
        else:
            self.outside.append(url)
            route.abort("blockedbyclient")

    def on_response(self, response):
        if response.status not in OK_STATUS:
            self.bad_responses.append(f"{response.status} {response.url}")

    def on_request_failed(self, request):
        self.on_request_done(request)
        if urlsplit(request.url).hostname == HOST:  # outside requests are reported as such
            self.failed.append(f"{request.url} ({request.failure})")

    def on_console(self, message):
        if message.type == "error":
            location = message.location or {}
            where = f" [{location.get('url')}:{location.get('lineNumber')}]" if location.get("url") else ""
            self.console_errors.append(f"{message.text}{where}")

    def on_page_error(self, error):
        self.page_errors.append(str(error))


# ---------------------------------------------------------------------------
# Fixtures: pytest-playwright's browser, driving the system's Chromium; one server, one context and
# one tab for the whole session.

def find_chromium() -> tuple[str | None, str]:
    """The browser to drive, and what was looked for: $CHROMIUM, else the system's Chromium headless
    shell (what Playwright runs headless: a quarter less CPU than the full browser here), else Chromium."""
    if os.environ.get("CHROMIUM"):
        wanted, candidates = f"CHROMIUM={os.environ['CHROMIUM']}", [os.environ["CHROMIUM"]]
    else:
        wanted = "no chromium-headless-shell, chromium or google-chrome in /usr/bin or on PATH"
        names = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
        candidates = [path for name in names for path in (f"/usr/bin/{name}", shutil.which(name))]
    return next((path for path in candidates if path and os.access(path, os.X_OK)), None), wanted


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args) -> dict:
    """pytest-playwright's launch options, with the system's Chromium (never a downloaded one)."""
    path, wanted = find_chromium()
    if not path:
        cannot_run(f"Chromium is not installed ({wanted})")
    return {**browser_type_launch_args, "executable_path": path, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def launch_browser(launch_browser, browser_type_launch_args):
    """pytest-playwright's, saying what to do when the Chromium found does not start."""
    def launch(**options):
        try:
            return launch_browser(**options)
        except PlaywrightError as error:
            pytest.fail(f"Chromium at {browser_type_launch_args['executable_path']} did not start: {error}\n"
                        f"To fix it, {INSTALL_HINT}", pytrace=False)
    return launch


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serving(directory, handler):
    """`directory` served on 127.0.0.1 at a free port, in a thread; yields the port."""
    server = http.server.ThreadingHTTPServer((HOST, 0), functools.partial(handler, directory=directory))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def site_url(built_site):
    """The built site, served on 127.0.0.1 at a free port."""
    with serving(built_site, _QuietHandler) as port:
        yield f"http://{HOST}:{port}/"


@pytest.fixture(scope="session")
def events() -> BrowserEvents:
    return BrowserEvents()


def watched_tab(context, events, console=True):
    """A new tab of `context` whose requests, responses, console errors and page errors go to `events`."""
    context.set_default_timeout(15_000)
    context.route("**/*", events.route)
    page = context.new_page()
    page.on("request", events.on_request)
    page.on("requestfinished", events.on_request_done)
    page.on("response", events.on_response)
    page.on("requestfailed", events.on_request_failed)
    if console:
        page.on("console", events.on_console)
    page.on("pageerror", events.on_page_error)
    return page


@pytest.fixture(scope="session")
def session_tab(browser, site_url, events):  # the browser first: without one, the site is not built
    context = browser.new_context(viewport=DESKTOP, color_scheme="light",
                                  base_url=site_url, service_workers="block")
    # Material's language switch looks the page up in the other edition's sitemap, which names the
    # address the site was built for (its site_url, at another port): served as built for this one.
    built_for = yaml_load((ROOT / ENGLISH.config).read_text())["site_url"]

    def rebased_sitemap(route):
        sitemap = route.fetch()
        route.fulfill(response=sitemap, body=sitemap.text().replace(built_for, site_url))
    tab = watched_tab(context, events)
    context.route("**/sitemap.xml", rebased_sitemap)  # after the events's route, which it overrides
    yield tab
    context.close()


@pytest.fixture
def tab(session_tab, events):
    """The session's one tab, with a fresh record of what it sees."""
    events.reset()
    return session_tab


@pytest.fixture
def screenshots(pytestconfig, output_path):
    """Takes the test's screenshots when pytest-playwright's --screenshot asks (on, or only-on-failure),
    into the test's folder under --output."""
    option = pytestconfig.getoption("--screenshot")

    def take(tab, failed: bool):
        if option == "on" or (option == "only-on-failure" and failed):
            take_screenshots(tab, Path(output_path))
    return take


# Code blocks whose copy button Material has not mounted (yet: it does so just after load).
WITHOUT_COPY_BUTTON = ".md-content pre:not(:has([data-clipboard-target])) > code:not(.no-copy *)"


def open_page(tab, url: str) -> list[str]:
    """Go to `url` (relative to the site) and wait until the theme has set it up; problems of the document."""
    response = tab.goto(url, wait_until="load")
    with contextlib.suppress(AssertionError):  # what is missing is reported by the checks
        expect(tab.locator(WITHOUT_COPY_BUTTON)).to_have_count(0)
    if response is None or response.status != 200:
        return [f"the page itself answered {response.status if response else 'nothing'}"]
    return []


QUIET_S = 0.2  # Playwright's "networkidle" waits 500 ms, which was a fifth of this file's time


def settled_problems(tab, events) -> list[str]:
    """What went wrong on the network and the console, once the page has loaded and has asked for
    nothing for QUIET_S (the checks before this one usually took longer: then it waits no more)."""
    tab.wait_for_load_state("load")
    deadline = time.monotonic() + 15
    tab.wait_for_timeout(50)  # events arrive while Playwright waits
    while (events.in_flight or time.monotonic() - events.last_activity < QUIET_S) and time.monotonic() < deadline:
        tab.wait_for_timeout(50)
    late = [f"still loading after 15 s: {request.url}" for request in events.in_flight]
    return events.problems() + late


# ---------------------------------------------------------------------------
# The checks made inside the page, in one round trip.

INSPECT_PAGE = r"""
() => {
  const problems = [];
  const content = document.querySelector(".md-content") || document.body;
  const shown = el => el.checkVisibility();
  const sized = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const snippet = text => JSON.stringify(text.trim().replace(/\s+/g, " ").slice(0, 50));

  // Code blocks and their copy buttons (Material: button[data-clipboard-target] in the <pre>).
  [...content.querySelectorAll("pre > code")].filter(code => !code.closest(".no-copy")).forEach((code, i) => {
    const name = `code block ${i + 1} ${snippet(code.textContent)}`;
    const button = code.parentElement.querySelector(
      "button.md-clipboard[data-clipboard-target], button[data-md-type=copy][data-clipboard-target]");
    if (!button) { problems.push(`${name} has no copy button`); return; }
    const target = document.querySelector(button.dataset.clipboardTarget);
    if (!target) problems.push(`${name}: its copy button's target ${button.dataset.clipboardTarget} is missing`);
    else if (!target.textContent.trim()) problems.push(`${name}: its copy button's target is empty`);
    else if (target !== code) problems.push(`${name}: its copy button copies another element`);
  });

  // Math: MathML rendered at build time must be laid out (hidden tabs and closed details aside).
  const maths = [...content.querySelectorAll("math")];
  maths.filter(shown).forEach((m, i) => {
    if (!sized(m)) problems.push(`math ${i + 1} ${snippet(m.textContent)} has an empty bounding box`);
  });
  maths.forEach((m, i) => {
    if (m.querySelector("merror")) problems.push(`math ${i + 1} ${snippet(m.textContent)} contains <merror>`);
  });

  // LaTeX that was never rendered: in prose, outside code and math.
  const latex = new RegExp(String.raw`\\(frac|sigma|partial|sum|prod|cdot|times|mathbf|mathrm|left|right|quad|begin)\b`
    + String.raw`|\$\$|\$[^$\s][^$]*[\\^_][^$]*\$`);
  const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT, {
    acceptNode: node => node.parentElement.closest("pre, code, math, script, style, svg, textarea")
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  for (let node; (node = walker.nextNode());) {
    if (latex.test(node.textContent)) problems.push(`raw LaTeX in the text: ${snippet(node.textContent)}`);
  }

  // Diagrams: an inline SVG in every figure.diagram, laid out.
  const figures = [...content.querySelectorAll("figure.diagram")];
  figures.forEach((figure, i) => {
    const svg = figure.querySelector("svg");
    if (!svg) problems.push(`diagram ${i + 1} has no <svg>`);
    else if (!shown(svg) || !sized(svg)) problems.push(`diagram ${i + 1} is not visible`);
    else {
      // Drawn for its viewBox width: shown much narrower than that (and than the column), its text is unreadable.
      const drawn = svg.viewBox.baseVal && svg.viewBox.baseVal.width;
      const room = Math.min(drawn || Infinity, content.querySelector("article")?.clientWidth || content.clientWidth);
      const width = svg.getBoundingClientRect().width;
      if (width < 0.75 * room) problems.push(
        `diagram ${i + 1} is shown ${Math.round(width)} px wide, drawn ${drawn} px wide, with ` +
        `${Math.round(room)} px of room: give figure.diagram (and its svg) the full width of the column`);
    }
  });

  // Accessible names: every <img> has alt text, every svg[role=img] a name.
  document.querySelectorAll("img").forEach(img => {
    if (!(img.getAttribute("alt") || "").trim()) problems.push(`<img src="${img.getAttribute("src")}"> has no alt`);
  });
  document.querySelectorAll('svg[role="img"]').forEach((svg, i) => {
    const ids = (svg.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean);
    const named = ids.map(id => document.getElementById(id)?.textContent.trim() || "").join(" ").trim();
    const name = named || (svg.getAttribute("aria-label") || "").trim();
    if (!name) problems.push(`svg[role=img] ${i + 1} has no accessible name (aria-labelledby or aria-label)`);
    ids.forEach(id => {
      const count = document.querySelectorAll(`[id="${CSS.escape(id)}"]`).length;
      if (count !== 1) problems.push(`svg[role=img] ${i + 1}: id "${id}" is on ${count} elements`);
    });
  });
  // Inlined SVGs share the page's ids: a marker or gradient defined twice breaks the second figure.
  const svgIds = [...document.querySelectorAll("svg [id]")].map(el => el.id);
  [...new Set(svgIds.filter((id, i) => svgIds.indexOf(id) !== i))].forEach(id =>
    problems.push(`id "${id}" is defined more than once inside inline SVGs`));

  // Notebooks (mkdocs-jupyter): outputs shown and not empty.
  const cells = [...content.querySelectorAll(".jp-CodeCell")].filter(cell => !cell.querySelector(".jp-CodeCell"));
  const outputs = [...content.querySelectorAll(".jp-OutputArea-output")];
  outputs.forEach((out, i) => {
    const empty = !out.innerText.trim() && !out.querySelector("img, svg, canvas, table");
    if (empty || !shown(out) || !sized(out)) problems.push(`notebook output ${i + 1} is empty or not shown`);
  });
  const cellsWithOutput = cells.filter(cell => cell.querySelector(".jp-OutputArea-output")).length;

  return {problems, figures: figures.length, cells: cells.length, cellsWithOutput};
}
"""


def notebook_cells_with_output(source: str) -> int:
    notebook = json.loads((ROOT / source).read_text())
    return sum(1 for cell in notebook["cells"] if cell["cell_type"] == "code" and cell.get("outputs"))


# Sets the palette as the toggle does, and reads each diagram's colour (its text and lines use currentColor).
DIAGRAM_COLOURS = """scheme => {
  document.body.setAttribute("data-md-color-scheme", scheme);
  return [...document.querySelectorAll(".md-content figure.diagram svg")].map(svg => getComputedStyle(svg).color);
}"""


def check_diagrams(tab) -> list[str]:
    """Each diagram's colour must follow the palette."""
    dark, light = (tab.evaluate(DIAGRAM_COLOURS, scheme) for scheme in ("slate", "default"))  # light again
    return [f"diagram {i + 1} has the same colour ({colour}) in the light and the dark palette"
            for i, (colour, other) in enumerate(zip(light, dark)) if colour == other]


def take_screenshots(tab, folder: Path):
    """The whole page at the desktop's and at the phone's width, and each diagram in light and dark."""
    folder.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=folder / "desktop.png", full_page=True, animations="disabled")
    figures = tab.locator(".md-content figure.diagram")
    for scheme, shade in (("slate", "dark"), ("default", "light")):
        tab.evaluate(DIAGRAM_COLOURS, scheme)
        for i in range(figures.count()):
            figures.nth(i).screenshot(path=folder / f"diagram-{i + 1}-{shade}.png", animations="disabled")
    tab.set_viewport_size(PHONE)
    tab.screenshot(path=folder / "phone.png", full_page=True, animations="disabled")
    tab.set_viewport_size(DESKTOP)


# ---------------------------------------------------------------------------
# Every page, at a desktop's width and at a phone's.

@pytest.mark.parametrize(("source", "url"), PAGES, ids=[url or "index" for _, url in PAGES])
def test_page_works_in_a_browser(tab, events, screenshots, source, url):
    problems = open_page(tab, url)
    found = tab.evaluate(INSPECT_PAGE)
    problems += found["problems"]
    if source.endswith(".ipynb"):
        expected = notebook_cells_with_output(source)
        if not found["cellsWithOutput"]:
            problems.append(f"notebook page shows no outputs ({found['cells']} code cells; "
                            f"{expected} have outputs in {source})")
        elif found["cellsWithOutput"] != expected:
            problems.append(f"notebook page shows outputs under {found['cellsWithOutput']} code cells, "
                            f"{source} has {expected} with outputs")
    if found["figures"]:
        problems += check_diagrams(tab)
    problems += settled_problems(tab, events)
    problems += [f"at {PHONE['width']} px: {problem}" for problem in on_a_phone(tab, events)]
    screenshots(tab, failed=bool(problems))
    assert not problems, f"{url or 'index'} ({tab.url}):\n  " + "\n  ".join(problems)


MIN_TEXT_PX = 8  # diagram text smaller than this is unreadable on a phone
MIN_CODE_SHARE = 0.75  # of the text column, for every code block
# Where code in a table may wrap: after a dot, an underscore, a slash or a hyphen inside an identifier
# (the browser breaks after a hyphen too), and at a space between two tokens, never inside a word.
BREAKS_AFTER = "._/- "

INSPECT_PHONE = r"""
([minText, minShare, breaksAfter]) => {
  const problems = [];
  const content = document.querySelector(".md-content article") || document.querySelector(".md-content");
  const column = content.clientWidth;
  const shown = el => el.checkVisibility() && el.getBoundingClientRect().width > 0;
  const snippet = text => JSON.stringify(text.trim().replace(/\s+/g, " ").slice(0, 50));
  const page = document.documentElement;

  // No sideways scroll: name the innermost element that sticks out of the window.
  if (page.scrollWidth > page.clientWidth) {
    const out = el => el.getBoundingClientRect().right > page.clientWidth + 1;
    const culprit = [...document.body.querySelectorAll("*:not(svg *)")]
      .find(el => out(el) && ![...el.children].some(out));
    const name = culprit ? `<${culprit.tagName.toLowerCase()} class="${culprit.getAttribute("class") || ""}"> ` +
      snippet(culprit.textContent) : "?";
    problems.push(`the page scrolls sideways (${page.scrollWidth} px in a ${page.clientWidth} px window): ${name}`);
  }

  // Code blocks, notebook cells included, keep most of the column.
  [...content.querySelectorAll("pre")].filter(shown).forEach((pre, i) => {
    const width = pre.getBoundingClientRect().width;
    if (width < minShare * column) problems.push(`code block ${i + 1} ${snippet(pre.textContent)} is ` +
      `${Math.round(width)} px wide in a ${column} px column (less than ${minShare * 100}%)`);
  });

  // Output wraps: recorded output (text blocks) and notebook outputs never scroll sideways.
  content.querySelectorAll(".language-text pre > code, .jp-OutputArea-output pre").forEach(out => {
    if (shown(out) && out.scrollWidth > out.clientWidth + 1) problems.push(`output ${snippet(out.textContent)} ` +
      `does not wrap: ${out.scrollWidth} px of text in ${out.clientWidth} px`);
  });

  // Diagram text, as rendered: font size times the SVG's scale on screen.
  content.querySelectorAll("figure.diagram svg").forEach((svg, i) => {
    const scale = svg.getScreenCTM()?.a || 0;
    const small = [...svg.querySelectorAll("text")].map(t => [t, parseFloat(getComputedStyle(t).fontSize) * scale])
      .filter(([, px]) => px < minText);
    if (small.length) problems.push(`diagram ${i + 1}: ${small.length} labels under ${minText} px, e.g. ` +
      `${snippet(small[0][0].textContent)} at ${small[0][1].toFixed(1)} px`);
  });

  // Identifiers in tables wrap only after a dot, an underscore, a slash or a hyphen.
  content.querySelectorAll("table code").forEach(code => {
    const range = document.createRange();
    let previous = null, top = null;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode());) {
      for (let k = 0; k < node.length; k++) {
        range.setStart(node, k); range.setEnd(node, k + 1);
        const rect = range.getBoundingClientRect();
        if (top !== null && rect.top > top + 2 && !breaksAfter.includes(previous))
          problems.push(`table cell: ${snippet(code.textContent)} wraps in the middle of a word, after "${previous}"`);
        top = rect.top; previous = node.data[k];
      }
    }
  });
  return problems;
}
"""


def on_a_phone(tab, events) -> list[str]:
    """The problems of the open page resized to a phone's width: laid out anew by the same CSS and
    scripts, without loading it a second time (which was a third of this file's time)."""
    events.reset()  # what the page did at the desktop's width is reported already
    tab.set_viewport_size(PHONE)
    try:
        problems = tab.evaluate(INSPECT_PHONE, [MIN_TEXT_PX, MIN_CODE_SHARE, BREAKS_AFTER])
        return problems + settled_problems(tab, events)
    finally:
        tab.set_viewport_size(DESKTOP)


# ---------------------------------------------------------------------------
# Search for the names readers type; the language switch; the palette toggle.

def search_finds(tab, query: str, page_url: str) -> list[str]:
    """Type `query` into the open search field; [] once a result links to `page_url`, else the problem."""
    search_field = tab.locator("input.md-search__input")
    search_field.fill(query)
    search_field.press("End")  # Material reads the query on keyup: one keyup, one search
    links = tab.locator(".md-search-result__item a.md-search-result__link")
    try:
        expect(links.and_(tab.locator(f'[href^="{page_url}"]')).first).to_be_attached(timeout=10_000)
    except AssertionError:
        meta = tab.locator(".md-search-result__meta").inner_text()
        found = [href.split("?")[0] for href in links.evaluate_all("links => links.map(a => a.href)")]
        return [f"searching for {query} does not find {page_url}; it finds {list(dict.fromkeys(found))} "
                f"(the search says {meta!r})"]
    return []


MAX_PREVIEW_CODE_LINES = 80  # a longer block in a preview is a whole script (150+ lines), not a section
SEARCHES = [  # what a reader types, in the edition they read: the page that explains it
    ("", "zero_grad", "a7-typical-training-loop"),
    ("", "manual_seed", "a5-multilayer-neural-networks"),
    ("", "from_numpy", "a2-understanding-tensors"),
    ("", "state_dict", "a8-saving-and-loading-models"),
    ("", "set_epoch", MULTI_GPU_PAGE),
    ("", "DistributedSampler", MULTI_GPU_PAGE),
    # Chinese words, which the index holds only if the build split the text into words (jieba),
    # and an API name in the Chinese edition.
    (CHINESE.prefix, "张量", "a2-understanding-tensors"),
    (CHINESE.prefix, "梯度", "a4-automatic-differentiation"),
    (CHINESE.prefix, "数据加载器", "a6-efficient-data-loaders"),
    (CHINESE.prefix, "state_dict", "a8-saving-and-loading-models"),
]


@pytest.mark.parametrize(("edition", "query", "expected"), SEARCHES, ids=[f"{e}{q}" for e, q, _ in SEARCHES])
def test_search_finds_what_readers_type_on_its_page(tab, events, site_url, edition, query, expected):
    problems = open_page(tab, edition)
    tab.keyboard.press("/")  # Material's shortcut; clicking the search field does the same
    if not tab.locator("input.md-search__input").evaluate("el => el === document.activeElement"):
        tab.locator("label.md-search__icon").first.click()
    problems += search_finds(tab, query, f"{site_url}{edition}{expected}/")
    long_code = tab.locator(".md-search-result__article pre").evaluate_all(
        f"pres => pres.map(p => [p.closest('a').getAttribute('href'), p.textContent.split('\\n').length])"
        f".filter(([, n]) => n > {MAX_PREVIEW_CODE_LINES})")
    problems += [f"the search preview of {href} for {query} shows {lines} lines of code, not prose"
                 for href, lines in long_code]
    problems += settled_problems(tab, events)
    assert not problems, "\n".join(problems)


def test_the_language_switch_leads_to_the_same_page_in_the_other_edition(tab, events):
    """Through the header's menu (overrides/partials/alternate.html), as a reader does (every page's links
    are checked in test_site_build)."""
    page = "a6-efficient-data-loaders/"
    problems = open_page(tab, page)
    for edition in (CHINESE, ENGLISH):
        problems += settled_problems(tab, events)  # leaving earlier would abort what is still loading
        events.reset()
        tab.locator(".md-header .md-select").hover()  # the menu opens on hover (and on focus)
        tab.locator(f".md-select__link[hreflang={edition.language}]").click()
        expect(tab).to_have_url(re.compile(rf"//{HOST}:\d+/{re.escape(edition.prefix + page)}$"))
        expect(tab.locator("html")).to_have_attribute("lang", edition.language)
        expect(tab.locator(".md-content h1")).to_contain_text("A.6")
    problems += settled_problems(tab, events)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=EDITIONS)
def test_the_palette_toggle_offers_the_dark_palette_in_the_editions_words(tab, events, edition):
    """Ours: a light and a dark palette (mkdocs.yml), the toggle named by the hooks. Switching them is
    Material's JavaScript; that our diagrams follow the palette is checked on every page."""
    problems = open_page(tab, edition.prefix)
    toggle = tab.locator("form[data-md-component=palette] label:visible")
    expect(toggle).to_have_attribute("title", edition.words["dark_mode"])
    expect(tab.locator(f"#{toggle.get_attribute('for')}")).to_have_attribute("data-md-color-scheme", "slate")
    problems += settled_problems(tab, events)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# Published: the 404 page of a site under a sub-path (a GitHub project site).

class _PagesHandler(_QuietHandler):
    """Like GitHub Pages: an unknown address gets the site's 404.html, with status 404."""

    def send_error(self, code, message=None, explain=None):
        page = Path(self.directory) / SUB_PATH / "404.html"
        if code != 404 or not page.exists():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="session")
def sub_path_site(browser, published_site):  # the browser first: without one, the site is not built
    """The published site served under /project/; a missing page gets its 404.html, as on GitHub Pages."""
    with serving(published_site, _PagesHandler) as port:
        yield f"http://{HOST}:{port}/{SUB_PATH}/"


def test_404_page_under_a_sub_path_has_search_and_the_contents(browser, sub_path_site):
    events = BrowserEvents()
    with contextlib.closing(browser.new_context(viewport=DESKTOP, service_workers="block")) as context:
        tab = watched_tab(context, events, console=False)  # the 404 itself is logged as a console error
        missing = f"{sub_path_site}no/such/page/"
        response = tab.goto(missing, wait_until="networkidle")
        assert response.status == 404, f"{missing} answered {response.status}, not 404"
        # Styled: Material's stylesheet applied (an unstyled page shows its header as a plain block),
        # which fails together with its scripts when the page asks for them at the domain's root.
        if tab.locator("header.md-header").evaluate("h => getComputedStyle(h).position") != "sticky":
            pytest.fail(f"the 404 page at {missing} is unstyled, its assets did not load: "
                        f"{events.problems()} (is site_url read from SITE_URL?)", pytrace=False)
        problems = []
        # The way back: contents that link to every page of the nav, the home page included.
        links = set(tab.locator(".md-content li a").evaluate_all("links => links.map(a => a.href)"))
        problems += [f"the contents on the 404 page have no link to {sub_path_site}{url}"
                     for _, url in nav_pages(ENGLISH) if f"{sub_path_site}{url}" not in links]
        # A reader of the Chinese edition gets this page too: it leads to that edition's home page.
        chinese_home = tab.locator(f'.md-content a[hreflang="{CHINESE.language}"]').evaluate_all(
            "links => links.map(a => a.href)")
        if chinese_home != [f"{sub_path_site}{CHINESE.prefix}"]:
            problems.append(f"the 404 page links the Chinese edition's home as {chinese_home}")
        # Search: its button opens the search, which finds a page under the sub-path.
        tab.locator(".md-content [data-search-button]").click()
        expect(tab.locator("input.md-search__input")).to_be_focused()
        problems += search_finds(tab, "state_dict", f"{sub_path_site}a8-saving-and-loading-models/")
        # And a link of the contents leads to its page (through Material's instant navigation).
        tab.keyboard.press("Escape")
        tab.locator(".md-content li a[href$='/a8-saving-and-loading-models/']").click()
        expect(tab).to_have_url(f"{sub_path_site}a8-saving-and-loading-models/")
        expect(tab.locator(".md-content h1")).to_contain_text("A.8")
        problems += [p for p in settled_problems(tab, events) if p != f"bad response: 404 {missing}"]
        assert not problems, f"404 page at {missing}:\n  " + "\n  ".join(problems)
