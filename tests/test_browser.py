"""The built site in a real browser: the system's headless Chromium, driven by pytest-playwright.

Every page in the nav of both editions, served from 127.0.0.1, loads with no request to another host, no failed
request, no console error and no uncaught exception; each code block's copy button copies exactly the code; math
(MathML) and diagrams (inline SVG, following the palette) are laid out and named, no raw LaTeX shows, and a notebook
page shows its stored outputs; no copy button covers code. At a phone's 390 px nothing scrolls sideways, code keeps
three quarters of the column, each diagram (its narrow variant) and plot shows whole inside the column with text of
9 px or more, formulas and tables fit the column, output titles take one line, outputs wrap (with no mark beside a
line that does not) and identifiers in tables break only after a dot, an underscore or a slash. Search, the language
switch, the palette toggle's words and the published 404 page (under a sub-path) are used as a reader uses them; what
Material's own JavaScript does (switching the palette, copying) is Material's to test.
Every page passes axe-core (WCAG 2.2 A and AA, and best practices) in both palettes; on a page with content tabs
and on a notebook, every Tab stop shows a focus ring that stands out from what lies behind it.
`--screenshot on` (or `only-on-failure`) saves each page at 1280 and 390 px and each diagram light and dark under
`--output` (off by default: they took more than half of this file's time).
"""

import contextlib
import functools
import http.server
import io
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import ROOT, SUB_PATH, nav_pages
from mkdocs.utils.yaml import yaml_load

from tools.editions import CHINESE, EDITIONS, ENGLISH

HOST = "127.0.0.1"
INSTALL_HINT = (
    "install it with `sudo apt-get install -y chromium-headless-shell` (or chromium; or run .ci/install-browser.sh), "
    "and `pip install -r requirements.txt`; `playwright install` is never needed. CHROMIUM=/path/to/it picks another."
)


def cannot_run(reason: str, hint: str = INSTALL_HINT):
    """Skip the browser tests, saying why and what to do; under CI (CI=true), fail instead."""
    message = f"the browser tests cannot run: {reason}. To run them, {hint}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


try:
    import pytest_playwright  # noqa: F401 (the plugin that gives the `browser` fixture)
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect
except ImportError:
    cannot_run("the pytest-playwright package is not importable")

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
OK_STATUS = {200, 304}  # 304: the browser revalidated its cached copy of an asset
QUIET_S = 0.2  # Playwright's "networkidle" waits 500 ms, which was a fifth of this file's time
PAGES = [page for edition in EDITIONS.values() for page in nav_pages(edition)]  # so that a new page is checked


class Events:
    """What the watched tabs did wrong (each problem once, in the order seen) since `reset()`, and which
    requests are still in flight."""

    def __init__(self):
        self.problems = {}  # an ordered set: a resource the page asks for twice fails twice
        self.in_flight = set()  # not cleared by reset(): a request started before it ends after it
        self.last_activity = time.monotonic()  # when a request last started or ended

    def reset(self):
        self.problems.clear()

    def watch(self, context):
        """A new tab of `context`, watched; every request to another host is blocked and reported."""
        context.set_default_timeout(15_000)
        context.route("**/*", self.route)
        tab = context.new_page()
        for event, handler in (("request", self.started), ("requestfinished", self.ended),
                               ("requestfailed", self.ended), ("response", self.answered),
                               ("console", self.console), ("pageerror", self.page_error)):
            tab.on(event, handler)
        return tab

    def route(self, route):
        if urlsplit(route.request.url).hostname == HOST:
            route.continue_()
        else:
            self.problems[f"request to another host (blocked): {route.request.url}"] = None
            route.abort("blockedbyclient")

    def started(self, request):
        self.in_flight.add(request)
        self.last_activity = time.monotonic()

    def ended(self, request):
        self.in_flight.discard(request)
        self.last_activity = time.monotonic()
        if request.failure and urlsplit(request.url).hostname == HOST:  # outside requests are reported as such
            self.problems[f"request failed: {request.url} ({request.failure})"] = None

    def answered(self, response):
        if response.status not in OK_STATUS:
            self.problems[f"bad response: {response.status} {response.url}"] = None

    def console(self, message):
        if message.type == "error":
            url = (message.location or {}).get("url")
            where = f" [{url}:{message.location.get('lineNumber')}]" if url else ""
            self.problems[f"console error: {message.text}{where}"] = None

    def page_error(self, error):
        self.problems[f"uncaught page error: {error}"] = None

    def settled(self, tab) -> list[str]:
        """The problems, once the page has loaded and has asked for nothing for QUIET_S (the checks
        before this one usually took longer: then it waits no more)."""
        tab.wait_for_load_state("load")
        deadline = time.monotonic() + 15
        tab.wait_for_timeout(50)  # events arrive while Playwright waits
        while (self.in_flight or time.monotonic() - self.last_activity < QUIET_S) and time.monotonic() < deadline:
            tab.wait_for_timeout(50)
        return list(self.problems) + [f"still loading after 15 s: {request.url}" for request in self.in_flight]


# ---------------------------------------------------------------------------
# Fixtures: pytest-playwright's browser, driving the system's Chromium; one server, one context and
# one tab for the whole session.

@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args) -> dict:
    """pytest-playwright's launch options, with the system's Chromium (never a downloaded one): $CHROMIUM, else the
    headless shell (what Playwright runs headless: a quarter less CPU than the full browser here), else Chromium."""
    names = [os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else [
        "chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
    search_path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin"])
    path = next(filter(None, (shutil.which(name, path=search_path) for name in names)), None)
    if not path:
        cannot_run(f"Chromium is not installed (no executable {' or '.join(names)} on PATH or in /usr/bin)")
    # Playwright adds the rest: --headless, --no-sandbox, --disable-dev-shm-usage, no background networking.
    return {**browser_type_launch_args, "executable_path": path, "args": ["--disable-gpu"]}


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


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serving(directory: Path):
    """`directory` served on 127.0.0.1 at a free port, in a thread; yields its address."""
    server = http.server.ThreadingHTTPServer((HOST, 0), functools.partial(QuietHandler, directory=directory))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def site_url(built_site):
    with serving(built_site) as url:
        yield url


@pytest.fixture(scope="session")
def published_url(browser, published_site):  # the browser first: without one, the site is not built
    """The site built as the Pages workflow builds it, served under /project/ as GitHub Pages serves it."""
    with serving(published_site) as url:
        yield f"{url}{SUB_PATH}/"


@pytest.fixture(scope="session")
def events() -> Events:
    return Events()


@pytest.fixture(scope="session")
def session_tab(browser, site_url, events):  # the browser first: without one, the site is not built
    context = browser.new_context(viewport=DESKTOP, color_scheme="light", base_url=site_url, service_workers="block")
    # Material's language switch looks the page up in the other edition's sitemap, which names the
    # address the site was built for (its site_url, at another port): served as built for this one.
    built_for = yaml_load((ROOT / ENGLISH.config).read_text())["site_url"]

    def rebased_sitemap(route):
        sitemap = route.fetch()
        route.fulfill(response=sitemap, body=sitemap.text().replace(built_for, site_url))
    tab = events.watch(context)
    context.route("**/sitemap.xml", rebased_sitemap)  # after the events' route, which it overrides
    yield tab
    context.close()


@pytest.fixture
def tab(session_tab, events):
    """The session's one tab, at the desktop's width, with a fresh record of what it sees."""
    session_tab.set_viewport_size(DESKTOP)
    events.reset()
    return session_tab


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


# ---------------------------------------------------------------------------
# Every page, at a desktop's width and at a phone's; the checks made inside the page, in one round trip.

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
  content.querySelectorAll("math").forEach((math, i) => {
    const name = `math ${i + 1} ${snippet(math.textContent)}`;
    if (shown(math) && !sized(math)) problems.push(`${name} has an empty bounding box`);
    if (math.querySelector("merror")) problems.push(`${name} contains <merror>`);
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
  content.querySelectorAll(".jp-OutputArea-output").forEach((out, i) => {
    const empty = !out.innerText.trim() && !out.querySelector("img, svg, canvas, table");
    if (empty || !shown(out) || !sized(out)) problems.push(`notebook output ${i + 1} is empty or not shown`);
  });
  const cellsWithOutput = cells.filter(cell => cell.querySelector(".jp-OutputArea-output")).length;
  return {problems, figures: figures.length, cells: cells.length, cellsWithOutput};
}
"""


# Sets the palette as the toggle does, and reads each diagram's colour (its text and lines use currentColor).
DIAGRAM_COLOURS = """scheme => {
  document.body.setAttribute("data-md-color-scheme", scheme);
  return [...document.querySelectorAll(".md-content figure.diagram svg")].map(svg => getComputedStyle(svg).color);
}"""

MIN_TEXT_PX = 9  # diagram and plot text smaller than this is hard to read on a phone
MIN_CONTRAST = 4.5  # WCAG AA for text, which axe cannot check on SVG text over shapes

# Each text of the shown diagrams and plots against what lies under it, as the browser paints it: the page's
# background with every shape drawn before the text at that point laid over it (fill, fill-opacity, opacity),
# at three points along the text; the text's own colour composited the same way.
TEXT_CONTRAST = r"""
minimum => {
  const rgba = c => { const n = c.match(/[\d.]+/g).map(Number); return n.length === 3 ? [...n, 1] : n; };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
  const linear = v => (v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  const luminance = c => 0.2126 * linear(c[0]) + 0.7152 * linear(c[1]) + 0.0722 * linear(c[2]);
  const ratio = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const opacity = el => {
    let a = 1;
    for (; el.localName !== "figure"; el = el.parentElement) a *= getComputedStyle(el).opacity;
    return a;
  };
  const paint = el => {
    const style = getComputedStyle(el);
    if (style.fill === "none") return null;
    const colour = rgba(style.fill);
    colour[3] *= style.fillOpacity * opacity(el);
    return colour;
  };
  const page = rgba(getComputedStyle(document.body).backgroundColor), problems = [];
  document.querySelectorAll(".md-content :is(figure.diagram, figure.plot)").forEach((figure, i) => {
    const svg = [...figure.querySelectorAll(":scope > svg")].find(s => s.checkVisibility());
    svg?.querySelectorAll("text").forEach(text => {
      const box = text.getBoundingClientRect();
      if (!box.width || !text.textContent.trim()) return;
      const worst = Math.min(...[0.15, 0.5, 0.85].map(f => {
        const ground = document.elementsFromPoint(box.left + box.width * f, box.top + box.height / 2)
          .filter(el => svg.contains(el) && el.matches("rect, circle, ellipse, path, polygon, image")
                  && !el.closest("text, defs") && el.compareDocumentPosition(text) & Node.DOCUMENT_POSITION_FOLLOWING)
          .reverse().reduce((under, shape) => { const p = paint(shape); return p ? over(p, under) : under; }, page);
        return ratio(over(paint(text), ground), ground);
      }));
      if (worst < minimum) problems.push(`${figure.classList.contains("plot") ? "plot" : "diagram"} ${i + 1}: ` +
        `${JSON.stringify(text.textContent.trim().slice(0, 40))} is ${worst.toFixed(2)}:1 against what lies under it`);
    });
  });
  return problems;
}
"""


def low_contrast(tab) -> list[str]:
    """The shown diagrams' and plots' text under MIN_CONTRAST, in each palette (light last, as the page opened)."""
    problems = []
    for scheme in ("slate", "default"):
        tab.evaluate(DIAGRAM_COLOURS, scheme)
        problems += [f"{scheme} palette: {problem}" for problem in tab.evaluate(TEXT_CONTRAST, MIN_CONTRAST)]
    return problems

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
  // Diagrams and plots whole: one drawing shown (a diagram's narrow variant takes its place), inside the
  // column, its content inside its own viewBox, nothing to scroll; diagram text, as rendered (font size
  // times the drawing's scale on screen), big enough to read.
  const columnBox = content.getBoundingClientRect();
  content.querySelectorAll("figure.diagram, figure.plot").forEach((figure, i) => {
    const name = `${figure.classList.contains("plot") ? "plot" : "diagram"} ${i + 1}`;
    const svgs = [...figure.querySelectorAll(":scope > svg")].filter(shown);
    if (svgs.length !== 1) { problems.push(`${name} shows ${svgs.length} drawings, not 1`); return; }
    const svg = svgs[0], box = svg.getBoundingClientRect(), drawn = svg.getBBox(), view = svg.viewBox.baseVal;
    if (box.left < columnBox.left - 1 || box.right > columnBox.right + 1 || figure.scrollWidth > figure.clientWidth + 1)
      problems.push(`${name} is cut: ${Math.round(box.width)} px wide in a ${Math.round(columnBox.width)} px column`);
    if (drawn.x < view.x - 1 || drawn.y < view.y - 1 || drawn.x + drawn.width > view.x + view.width + 1
        || drawn.y + drawn.height > view.y + view.height + 1)
      problems.push(`${name} draws outside its viewBox (${view.width} × ${view.height}): content from ` +
        `(${drawn.x.toFixed(0)}, ${drawn.y.toFixed(0)}), ${drawn.width.toFixed(0)} × ${drawn.height.toFixed(0)}`);
    const scale = svg.getScreenCTM()?.a || 0;
    const small = [...svg.querySelectorAll("text")].map(t => [t, parseFloat(getComputedStyle(t).fontSize) * scale])
      .filter(([, px]) => px < minText);
    if (small.length) problems.push(`${name}: ${small.length} labels under ${minText} px, e.g. ` +
      `${snippet(small[0][0].textContent)} at ${small[0][1].toFixed(1)} px`);
  });
  // Output titles stay one line; what an output depends on goes in a note under it.
  content.querySelectorAll(".language-text > .filename").forEach(title => {
    const style = getComputedStyle(title);
    const lines = (title.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom))
      / parseFloat(style.lineHeight);
    if (shown(title) && lines > 1.5) problems.push(`output title ${snippet(title.textContent)} takes ` +
      `${Math.round(lines)} lines`);
  });
  // Formulas and tables fit the column: nothing of them behind a sideways scroll.
  content.querySelectorAll('math[display="block"], .md-typeset__scrollwrap').forEach(el => {
    if (shown(el) && el.scrollWidth > el.clientWidth + 1) problems.push(`${el.matches("math") ? "formula" :
      "table"} ${snippet(el.textContent)} is ${el.scrollWidth} px wide in ${el.clientWidth} px: ` +
      `${el.matches("math") ? "split it into rows (\\begin{array}{rl})" : "its last columns are off screen"}`);
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


# A code block's copy button covers none of its text (as laid out, unscrolled), at either width.
COVERED_CODE = r"""
() => {
  const problems = [], range = document.createRange();
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  document.querySelectorAll(".md-content pre > .md-code__nav").forEach(nav => {
    const code = nav.parentElement.querySelector("code"), button = nav.getBoundingClientRect();
    if (!code || !nav.checkVisibility()) return;
    const box = code.getBoundingClientRect(), walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode());) {
      if (!node.data.trim()) continue;
      range.selectNodeContents(node);
      const covered = [...range.getClientRects()].find(r => overlap(r, button) && overlap(r, box));
      if (covered) {
        problems.push(`the copy button covers ${JSON.stringify(node.data.trim().slice(0, 30))} in the code block ` +
          JSON.stringify(code.textContent.trim().replace(/\s+/g, " ").slice(0, 40)));
        return;
      }
    }
  });
  return problems;
}
"""


@pytest.fixture
def screenshots(pytestconfig, output_path):
    """Takes the test's screenshots when pytest-playwright's --screenshot asks (on, or only-on-failure), into
    the test's folder under --output: the page at the desktop's and the phone's width, each diagram light and dark."""
    option, folder = pytestconfig.getoption("--screenshot"), Path(output_path)

    def take(tab, failed: bool):
        if not (option == "on" or (option == "only-on-failure" and failed)):
            return
        folder.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=folder / "desktop.png", full_page=True, animations="disabled")
        figures = tab.locator(".md-content figure.diagram")
        for scheme, shade in (("slate", "dark"), ("default", "light")):
            tab.evaluate(DIAGRAM_COLOURS, scheme)
            for i in range(figures.count()):
                figures.nth(i).screenshot(path=folder / f"diagram-{i + 1}-{shade}.png", animations="disabled")
        tab.set_viewport_size(PHONE)
        tab.screenshot(path=folder / "phone.png", full_page=True, animations="disabled")
    return take


@pytest.mark.parametrize(("source", "url"), PAGES, ids=[url or "index" for _, url in PAGES])
def test_page_works_in_a_browser(tab, events, screenshots, source, url):
    problems = open_page(tab, url)
    found = tab.evaluate(INSPECT_PAGE)
    problems += found["problems"] + tab.evaluate(COVERED_CODE)
    if source.endswith(".ipynb"):
        cells = json.loads((ROOT / source).read_text())["cells"]
        stored = sum(1 for cell in cells if cell["cell_type"] == "code" and cell.get("outputs"))
        shown = found["cellsWithOutput"]
        if not shown or shown != stored:
            problems.append(f"notebook page shows outputs under {shown} of its {found['cells']} code cells, "
                            f"{source} has {stored} with outputs")
    if found["figures"]:  # each diagram's colour follows the palette
        dark, light = (tab.evaluate(DIAGRAM_COLOURS, scheme) for scheme in ("slate", "default"))  # light again
        problems += [f"diagram {i + 1} has the same colour ({colour}) in the light and the dark palette"
                     for i, (colour, other) in enumerate(zip(light, dark)) if colour == other]
        problems += low_contrast(tab)
    problems += events.settled(tab)
    # At a phone's width: laid out anew by the same CSS and scripts, without loading the page a second time
    # (which was a third of this file's time); what it did at the desktop's width is reported already.
    events.reset()
    tab.set_viewport_size(PHONE)
    on_a_phone = tab.evaluate(INSPECT_PHONE, [MIN_TEXT_PX, MIN_CODE_SHARE, BREAKS_AFTER]) + tab.evaluate(COVERED_CODE)
    on_a_phone += events.settled(tab)
    if found["figures"]:  # the narrow variants now
        on_a_phone += low_contrast(tab)
    problems += [f"at {PHONE['width']} px: {problem}" for problem in on_a_phone]
    tab.set_viewport_size(DESKTOP)
    screenshots(tab, failed=bool(problems))
    assert not problems, f"{url or 'index'} ({tab.url}):\n  " + "\n  ".join(problems)


# The bar in the hanging indent of a recorded output marks where a long line continues: beside a line that
# does not wrap, nothing is drawn (a box snapped to whole pixels once drew a 1-px speck there). Judged by
# the pixels: the page as shown, against the same page with the bars taken off.
OUTPUT_LINES = ".md-content .highlight.recorded pre > code > span"
UNWRAPPED_LINES = r"""
selector => [...document.querySelectorAll(selector)].flatMap(line => {
  const box = line.getBoundingClientRect(), style = getComputedStyle(line);
  if (!line.checkVisibility() || box.height > 1.5 * parseFloat(style.lineHeight)) return [];
  return [[box.left + scrollX, box.top + scrollY, box.left + scrollX + parseFloat(style.paddingLeft),
           box.bottom + scrollY, line.textContent.trim().slice(0, 30)]];
})
"""


def test_an_output_line_that_does_not_wrap_has_no_mark_beside_it(tab):
    from PIL import Image, ImageChops  # matplotlib's dependency: in requirements.txt, not the site's

    problems = open_page(tab, "a2-understanding-tensors/")  # outputs of one line, of several, and a blank line
    tab.set_viewport_size(PHONE)
    tab.add_style_tag(content=NO_TRANSITIONS)
    lines = tab.evaluate(UNWRAPPED_LINES, OUTPUT_LINES)
    def screenshot():
        return Image.open(io.BytesIO(tab.screenshot(full_page=True))).convert("RGB")

    shown = screenshot()
    tab.add_style_tag(content=f"{OUTPUT_LINES} {{ background: none !important; }}")
    marks = ImageChops.difference(shown, screenshot())
    problems += [f"a mark beside the output line {text!r}, which does not wrap"
                 for *box, text in lines if marks.crop(tuple(map(round, box))).getbbox()]
    assert len(lines) > 10, f"found {len(lines)} output lines of one row on the page"
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# Accessibility: axe-core on every page in each palette (WCAG 2.0 to 2.2, A and AA, and axe's best
# practices: named landmarks and dialogs, no empty table headers), Material's chrome included.

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # pinned in package.json; `npm ci` installs it
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa", "best-practice"]
# In the dark palette, the rules whose result depends on the palette; the others gave the same in both.
AXE_COLOUR_RULES = ["color-contrast", "link-in-text-block"]
# Colours are measured once the palette has switched, not halfway through Material's transitions.
NO_TRANSITIONS = "*, *::before, *::after { transition: none !important; animation: none !important; }"
SET_PALETTE = "scheme => document.body.setAttribute('data-md-color-scheme', scheme)"  # as the toggle does
RUN_AXE = """async ([type, values]) => {
  const {violations} = await axe.run(document, {runOnly: {type, values}, resultTypes: ["violations"]});
  const summary = node => node.failureSummary.replace(/^Fix (any|all) of the following:/, "").replace(/\\s+/g, " ");
  return violations.flatMap(rule => rule.nodes.map(node =>
    `${rule.id} (${rule.impact}) at ${node.target.join(" ")}:${summary(node)}`));
}"""


@pytest.fixture(scope="session")
def axe_script() -> str:
    if not AXE.exists():
        cannot_run(f"axe-core is not installed ({AXE.relative_to(ROOT)} is missing)",
                   "run `npm ci` in the repository (package-lock.json pins axe-core).")
    return AXE.read_text()


@pytest.mark.parametrize(("source", "url"), PAGES, ids=[url or "index" for _, url in PAGES])
def test_page_passes_axe_in_both_palettes(tab, axe_script, source, url):
    problems = open_page(tab, url)
    tab.add_script_tag(content=axe_script)
    tab.add_style_tag(content=NO_TRANSITIONS)
    for scheme, rules in (("default", ["tag", AXE_TAGS]), ("slate", ["rule", AXE_COLOUR_RULES])):
        tab.evaluate(SET_PALETTE, scheme)
        problems += [f"{scheme} palette: {violation}" for violation in tab.evaluate(RUN_AXE, rules)]
    assert not problems, f"axe-core on {url or 'index'} ({tab.url}):\n  " + "\n  ".join(problems)


# Keyboard: each Tab stop shows a ring of 2 px or more, at least 3:1 against what lies behind it. Where the
# focused element is hidden, the ring is on what shows it: a content tab's labels, the palette toggle's icon.
FOCUS_RING = r"""
minRatio => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const name = `<${el.tagName.toLowerCase()} class="${el.getAttribute("class") || ""}"> ` + JSON.stringify(
    (el.getAttribute("aria-label") || el.title || el.textContent).trim().replace(/\s+/g, " ").slice(0, 40));
  const shown = el.matches(".tabbed-set > input") ? el.parentElement.querySelector(":scope > .tabbed-labels")
    : el.matches("input.md-option") ? el.nextElementSibling : el;
  const box = shown.getBoundingClientRect();
  if (!shown.checkVisibility() || box.width * box.height === 0) return `${name} takes a Tab stop but is not shown`;
  const style = getComputedStyle(shown);
  if (style.outlineStyle === "none" || parseFloat(style.outlineWidth) < 2)
    return `${name} shows no focus ring (outline: ${style.outlineStyle} ${style.outlineWidth})`;
  const rgba = colour => { const [r, g, b, a = 1] = colour.match(/[\d.]+/g).map(Number); return [r, g, b, a]; };
  let behind = [255, 255, 255];  // the ancestors' backgrounds, composed from the page's up
  const layers = [];
  for (let node = shown.parentElement; node; node = node.parentElement) {
    layers.unshift(getComputedStyle(node).backgroundColor);
  }
  for (const [r, g, b, a] of layers.map(rgba)) behind = [r, g, b].map((c, i) => c * a + behind[i] * (1 - a));
  const luminance = rgb => rgb.map(c => (c /= 255) <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
    .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const [ring, back] = [luminance(rgba(style.outlineColor).slice(0, 3)), luminance(behind)];
  const ratio = (Math.max(ring, back) + 0.05) / (Math.min(ring, back) + 0.05);
  return ratio < minRatio ? `${name}: its focus ring ${style.outlineColor} is ${ratio.toFixed(2)}:1 against ` +
    `rgb(${behind.map(Math.round)}) behind it` : "";
}
"""
MIN_FOCUS_CONTRAST = 3  # WCAG 2.2 (1.4.11, 2.4.13)
MAX_TAB_STOPS = 250  # more than any page has: the walk stops when focus leaves the page


@pytest.mark.parametrize("url", ["setup/", "notebooks/code-part2/"])  # content tabs; notebook cells
@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_every_tab_stop_shows_a_focus_ring(tab, url, scheme):
    problems = open_page(tab, url)
    tab.add_style_tag(content=NO_TRANSITIONS)
    tab.evaluate(SET_PALETTE, scheme)
    for _ in range(MAX_TAB_STOPS):
        tab.keyboard.press("Tab")
        found = tab.evaluate(FOCUS_RING, MIN_FOCUS_CONTRAST)
        if found is None:  # past the last stop
            break
        if found and found not in problems:
            problems.append(found)
    else:
        problems.append(f"still inside the page after {MAX_TAB_STOPS} Tab presses")
    assert not problems, f"{url} in the {scheme} palette, pressing Tab:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------
# The A.9.3 pages stay short enough to read on a phone: the book's scripts first, ours folded away.

PHONE_SCREENS = 12  # the most an A.9.3 page may take, every collapsible closed
LENGTH = """() => {
  document.querySelectorAll("details[open]").forEach(d => { d.open = false; });
  const list = document.querySelector(".script-changes");
  return [document.documentElement.scrollHeight, list ? list.getBoundingClientRect().height : 0];
}"""


@pytest.mark.parametrize("url", [f"{edition.prefix}{page}/" for edition in EDITIONS.values()
                                 for page in ("a9-multi-gpu-training", "a9-ddp-in-practice")])
def test_a93_pages_fit_a_phone(tab, events, url):
    tab.set_viewport_size(PHONE)
    problems = open_page(tab, url)
    height, changes = tab.evaluate(LENGTH)
    problems += events.settled(tab)  # the search's scripts, which the next page would cut off
    screens = PHONE["height"]
    if height > PHONE_SCREENS * screens:
        problems.append(f"{height / screens:.1f} phone screens long, more than {PHONE_SCREENS}")
    if changes > screens:
        problems.append(f"the list of what our scripts change takes {changes / screens:.1f} phone screens, not one")
    assert not problems, f"{url} at {PHONE['width']} × {screens} px:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------------------
# Search for the names readers type; the language switch and the palette toggle.

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
    ("", "set_epoch", "a9-multi-gpu-training"),
    ("", "DistributedSampler", "a9-multi-gpu-training"),
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
    problems += events.settled(tab)
    assert not problems, "\n".join(problems)


def test_the_language_switch_and_the_palette_toggle_speak_the_editions_words(tab, events):
    """The header's language menu (overrides/partials/alternate.html), used as a reader uses it, leads to
    the same page in the other edition (every page's links: test_site_build). There, the palette toggle
    (mkdocs.yml) offers the dark palette in that edition's words (the hooks); switching it is Material's
    JavaScript, and that our diagrams follow the palette is checked on every page."""
    page = "a6-efficient-data-loaders/"
    problems = open_page(tab, page)
    for edition in (CHINESE, ENGLISH):
        problems += events.settled(tab)  # leaving earlier would abort what is still loading
        events.reset()
        tab.locator(".md-header .md-select").hover()  # the menu opens on hover (and on focus)
        tab.locator(f".md-select__link[hreflang={edition.language}]").click()
        expect(tab).to_have_url(re.compile(rf"//{HOST}:\d+/{re.escape(edition.prefix + page)}$"))
        expect(tab.locator("html")).to_have_attribute("lang", edition.language)
        expect(tab.locator(".md-content h1")).to_contain_text("A.6")
        toggle = tab.locator("form[data-md-component=palette] label:visible")
        expect(toggle).to_have_attribute("title", edition.words["dark_mode"])
        expect(tab.locator(f"#{toggle.get_attribute('for')}")).to_have_attribute("data-md-color-scheme", "slate")
    problems += events.settled(tab)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# Published: the 404 page of a site under a sub-path (a GitHub project site).

def test_404_page_under_a_sub_path_has_search_and_the_contents(browser, published_site, published_url):
    events = Events()
    with browser.new_context(viewport=DESKTOP, service_workers="block") as context:
        tab = events.watch(context)
        missing = f"{published_url}no/such/page/"
        # What GitHub Pages answers at an address it does not know: the site's 404.html, with status 404.
        tab.route(missing, lambda route: route.fulfill(status=404, path=published_site / SUB_PATH / "404.html"))
        response = tab.goto(missing, wait_until="networkidle")
        assert response.status == 404, f"{missing} answered {response.status}, not 404"
        # Styled: Material's stylesheet applied (an unstyled page shows its header as a plain block),
        # which fails together with its scripts when the page asks for them at the domain's root.
        expect(tab.locator("header.md-header"), f"the 404 page at {missing} is unstyled, its assets did not "
               f"load: {list(events.problems)} (is site_url read from SITE_URL?)").to_have_css("position", "sticky")
        # The way back: contents that link to every page of the nav, the home page included.
        links = set(tab.locator(".md-content li a").evaluate_all("links => links.map(a => a.href)"))
        problems = [f"the contents on the 404 page have no link to {published_url}{url}"
                    for _, url in nav_pages(ENGLISH) if f"{published_url}{url}" not in links]
        # A reader of the Chinese edition gets this page too: it leads to that edition's home page.
        chinese_home = tab.locator(f'.md-content a[hreflang="{CHINESE.language}"]').evaluate_all(
            "links => links.map(a => a.href)")
        if chinese_home != [f"{published_url}{CHINESE.prefix}"]:
            problems.append(f"the 404 page links the Chinese edition's home as {chinese_home}")
        # Search: its button opens the search, which finds a page under the sub-path.
        tab.locator(".md-content [data-search-button]").click()
        expect(tab.locator("input.md-search__input")).to_be_focused()
        problems += search_finds(tab, "state_dict", f"{published_url}a8-saving-and-loading-models/")
        # And a link of the contents leads to its page (through Material's instant navigation).
        tab.keyboard.press("Escape")
        tab.locator(".md-content li a[href$='/a8-saving-and-loading-models/']").click()
        expect(tab).to_have_url(f"{published_url}a8-saving-and-loading-models/")
        expect(tab.locator(".md-content h1")).to_contain_text("A.8")
        # Less the 404 itself: its response, and the console's note of it (a network error: line 0).
        the_404 = (f"bad response: 404 {missing}", f"[{missing}:0]")
        problems += [problem for problem in events.settled(tab) if not problem.endswith(the_404)]
        assert not problems, f"404 page at {missing}:\n  " + "\n  ".join(problems)
