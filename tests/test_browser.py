"""The built site in the system's headless Chromium (pytest-playwright): every page of both editions, their 404 pages
too, at 1280 and 390 px, and search, the language switch, the palette toggle and the 404 page as a reader uses them
(Material's own JS aside)."""

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
INSTALL_HINT = ("install it with `sudo apt-get install -y chromium-headless-shell` (or chromium; or run "
                ".ci/install-browser.sh), and `pip install -r requirements.txt`; `playwright install` is never needed. "
                "CHROMIUM=/path/to/it picks another.")


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
PAGES += [("overrides/404.html", f"{edition.prefix}404.html") for edition in EDITIONS.values()]  # and the 404 pages
# Pages with checks of their own: A.9.3 fits a phone; Tab through content tabs, notebook cells; outputs of one line.
A93_PAGES = {f"{e.prefix}a9-{page}/" for e in EDITIONS.values() for page in ("multi-gpu-training", "ddp-in-practice")}
FOCUS_PAGES, OUTPUTS_PAGE = {"setup/", "notebooks/code-part2/"}, "a2-understanding-tensors/"
assert A93_PAGES | FOCUS_PAGES | {OUTPUTS_PAGE} <= {url for _, url in PAGES}, "a page checked on its own left the nav"


class Events:
    """What the watched tabs did wrong (each problem once, in order) since `problems.clear()`; requests in flight."""

    def __init__(self):
        self.problems = {}  # an ordered set: a resource the page asks for twice fails twice
        self.in_flight = set()  # not cleared with the problems: a request started before it ends after it
        self.last_activity = time.monotonic()  # when a request last started or ended

    def watch(self, context):
        """A new tab of `context`, watched; every request to another host is blocked and reported."""
        context.set_default_timeout(15_000)
        context.route("**/*", self.route)
        tab = context.new_page()
        for event, handler in dict(request=self.started, requestfinished=self.ended, requestfailed=self.ended,
                                   response=self.answered, console=self.console, pageerror=self.page_error).items():
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
        """The problems, once the page has loaded and asked for nothing for QUIET_S (or for at most 15 s)."""
        tab.wait_for_load_state("load")
        deadline = time.monotonic() + 15
        tab.wait_for_timeout(50)  # events arrive while Playwright waits
        while (self.in_flight or time.monotonic() - self.last_activity < QUIET_S) and time.monotonic() < deadline:
            tab.wait_for_timeout(50)
        return list(self.problems) + [f"still loading after 15 s: {request.url}" for request in self.in_flight]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args) -> dict:
    """The system's Chromium: $CHROMIUM, else the headless shell (a quarter less CPU than Chromium), else Chromium."""
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
    def log_message(self, format, *args): pass  # no line per request


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


# What the checks below share, set on every page the session's tab opens. A check returns its problems.
HELPERS = r"""window.shown = el => el.checkVisibility();
window.sized = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
window.wide = el => el.checkVisibility() && el.getBoundingClientRect().width > 0;
window.scrolls = el => el.scrollWidth > el.clientWidth + 1;
window.snippet = (text, n = 50) => JSON.stringify(text.trim().replace(/\s+/g, " ").slice(0, n));
window.tag = el => `<${el.tagName.toLowerCase()} class="${el.getAttribute("class") || ""}">`;
// What `check` finds wrong with each of `elements` (given with its index): a message, a list, or nothing.
window.each = (elements, check) => [...elements].flatMap((el, i) => [check(el, i)].flat()).filter(Boolean);
window.textNodes = (root, all = document.evaluate(".//text()", root, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE)) =>
  Array.from({length: all.snapshotLength}, (_, i) => all.snapshotItem(i));  // in document order
// Colours as [r, g, b, alpha]; `top` painted over `under`; WCAG's contrast ratio.
window.rgba = colour => { const [r, g, b, a = 1] = colour.match(/[\d.]+/g).map(Number); return [r, g, b, a]; };
window.over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
window.luminance = c => c.slice(0, 3).map(v => (v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
  .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
window.contrast = (a, b) => [a, b].map(luminance).sort((p, q) => q - p).reduce((x, y) => (x + 0.05) / (y + 0.05));
// A code block's copy button covers none of its text (as laid out, unscrolled), at either width.
window.coveredCode = () => {
  const range = document.createRange(), overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  return each(document.querySelectorAll(".md-content pre > .md-code__nav"), nav => {
    const code = nav.parentElement.querySelector("code"), button = nav.getBoundingClientRect();
    if (!code || !nav.checkVisibility()) return;
    const box = code.getBoundingClientRect(), covered = textNodes(code).filter(node => node.data.trim()).find(node => {
      range.selectNodeContents(node);
      return [...range.getClientRects()].some(r => overlap(r, button) && overlap(r, box));
    });
    return covered && `the copy button covers ${snippet(covered.data, 30)} in the code block ` +
      snippet(code.textContent, 40);
  });
};"""


@pytest.fixture(scope="session")
def session_tab(browser, site_url, events):  # the browser first: without one, the site is not built
    context = browser.new_context(viewport=DESKTOP, color_scheme="light", base_url=site_url, service_workers="block")
    context.add_init_script(HELPERS)
    # The language switch reads the other edition's sitemap, which names the site_url it was built for: this one.
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
    events.problems.clear()
    return session_tab


def open_page(tab, url: str) -> list[str]:
    """Go to `url` (relative to the site) and wait until the theme has set it up; problems of the document."""
    response = tab.goto(url, wait_until="load")
    with contextlib.suppress(AssertionError):  # Material mounts copy buttons just after load; the checks say if not
        expect(tab.locator(".md-content pre:not(:has([data-clipboard-target]))>code:not(.no-copy *)")).to_have_count(0)
    return [] if response and response.status == 200 else [
        f"the page itself answered {response.status if response else 'nothing'}"]


# Every page, at a desktop's width and at a phone's; the checks made inside the page, in one round trip.
INSPECT_PAGE = r"""([source, stored]) => {
  const content = document.querySelector(".md-content") || document.body;
  const room = content.querySelector("article")?.clientWidth || content.clientWidth;
  const latex = new RegExp(String.raw`\\(frac|sigma|partial|sum|prod|cdot|times|mathbf|mathrm|left|right|quad|begin)\b`
    + String.raw`|\$\$|\$[^$\s][^$]*[\\^_][^$]*\$`);
  const svgIds = [...document.querySelectorAll("svg [id]")].map(el => el.id);
  const cells = [...content.querySelectorAll(".jp-CodeCell")].filter(cell => !cell.querySelector(".jp-CodeCell"));
  const withOutput = cells.filter(cell => cell.querySelector(".jp-OutputArea-output")).length;
  const problems = [
    // Code blocks and their copy buttons (Material: button[data-clipboard-target] in the <pre>).
    ...each(content.querySelectorAll("pre > code:not(.no-copy, .no-copy *)"), (code, i) => {
      const name = `code block ${i + 1} ${snippet(code.textContent)}`;
      const button = code.parentElement.querySelector(
        "button:is(.md-clipboard, [data-md-type=copy])[data-clipboard-target]");
      const target = button && document.querySelector(button.dataset.clipboardTarget);
      return !button ? `${name} has no copy button`
        : !target ? `${name}: its copy button's target ${button.dataset.clipboardTarget} is missing`
        : !target.textContent.trim() ? `${name}: its copy button's target is empty`
        : target !== code && `${name}: its copy button copies another element`;
    }),
    // Math: MathML rendered at build time must be laid out (hidden tabs and closed details aside).
    ...each(content.querySelectorAll("math"), (math, i) => [
      shown(math) && !sized(math) && `math ${i + 1} ${snippet(math.textContent)} has an empty bounding box`,
      math.querySelector("merror") && `math ${i + 1} ${snippet(math.textContent)} contains <merror>`]),
    // LaTeX that was never rendered: in prose, outside code and math.
    ...each(textNodes(content), node => latex.test(node.textContent)
      && !node.parentElement.closest("pre, code, math, script, style, svg, textarea")
      && `raw LaTeX in the text: ${snippet(node.textContent)}`),
    // Diagrams: an inline SVG in every figure.diagram, laid out; much narrower than drawn and the column, unreadable.
    ...each(content.querySelectorAll("figure.diagram"), (figure, i) => {
      const svg = figure.querySelector("svg"), drawn = svg?.viewBox.baseVal?.width;
      const width = svg?.getBoundingClientRect().width, space = Math.min(drawn || Infinity, room);
      return !svg ? `diagram ${i + 1} has no <svg>` : !shown(svg) || !sized(svg) ? `diagram ${i + 1} is not visible`
        : width < 0.75 * space && `diagram ${i + 1} is shown ${Math.round(width)} px wide, drawn ${drawn} px wide, ` +
          `with ${Math.round(space)} px of room: give figure.diagram (and its svg) the full width of the column`;
    }),
    // Accessible names: every <img> has alt text, every svg[role=img] a name (by ids each on one element).
    ...each(document.querySelectorAll("img"), img => !img.alt.trim() && `<img src="${img.src}"> has no alt`),
    ...each(document.querySelectorAll('svg[role="img"]'), (svg, i) => {
      const ids = (svg.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean);
      const named = ids.map(id => document.getElementById(id)?.textContent.trim() || "").join(" ").trim();
      return [!named && !(svg.getAttribute("aria-label") || "").trim()
        && `svg[role=img] ${i + 1} has no accessible name (aria-labelledby or aria-label)`,
        ...ids.map(id => [id, document.querySelectorAll(`[id="${CSS.escape(id)}"]`).length])
          .map(([id, count]) => count !== 1 && `svg[role=img] ${i + 1}: id "${id}" is on ${count} elements`)];
    }),
    // Inlined SVGs share the page's ids: a marker or gradient defined twice breaks the second figure.
    ...[...new Set(svgIds.filter((id, i) => svgIds.indexOf(id) !== i))]
      .map(id => `id "${id}" is defined more than once inside inline SVGs`),
    // Notebooks (mkdocs-jupyter): outputs shown and not empty, under as many cells as the notebook has them.
    stored !== null && (!withOutput || withOutput !== stored) && `notebook page shows outputs under ${withOutput} ` +
      `of its ${cells.length} code cells, ${source} has ${stored} with outputs`,
    ...each(content.querySelectorAll(".jp-OutputArea-output"), (out, i) => (!shown(out) || !sized(out)
      || !out.innerText.trim() && !out.querySelector("img, svg, canvas, table"))
      && `notebook output ${i + 1} is empty or not shown`),
    ...coveredCode(),
  ];
  return [problems.filter(Boolean), content.querySelectorAll("figure.diagram").length];
}"""

# Sets the palette as the toggle does; each diagram's colour (its text and lines use currentColor).
PALETTE = """scheme => { document.body.setAttribute("data-md-color-scheme", scheme);
  return [...document.querySelectorAll(".md-content figure.diagram svg")].map(svg => getComputedStyle(svg).color); }"""
MIN_TEXT_PX = 9  # diagram and plot text smaller than this is hard to read on a phone
MIN_CONTRAST = 4.5  # WCAG AA for text, which axe cannot check on SVG text over shapes

# Shown diagram and plot text against what is painted under it at three points, its colour composited the same way.
TEXT_CONTRAST = r"""minimum => ["slate", "default"].flatMap(scheme => {  // light last, as the page opened
  document.body.setAttribute("data-md-color-scheme", scheme);
  const opacity = el => el.localName === "figure" ? 1 : getComputedStyle(el).opacity * opacity(el.parentElement);
  const paint = (el, style = getComputedStyle(el)) => style.fill === "none" ? null
    : rgba(style.fill).map((v, i) => i < 3 ? v : v * style.fillOpacity * opacity(el));
  const page = rgba(getComputedStyle(document.body).backgroundColor);
  return each(document.querySelectorAll(".md-content :is(figure.diagram, figure.plot)"), (figure, i) => {
    const svg = [...figure.querySelectorAll(":scope > svg")].find(shown);
    return each(svg?.querySelectorAll("text") || [], text => {
      const box = text.getBoundingClientRect();
      if (!box.width || !text.textContent.trim()) return;
      const worst = Math.min(...[0.15, 0.5, 0.85].map(f => {
        const ground = document.elementsFromPoint(box.left + box.width * f, box.top + box.height / 2)
          .filter(el => svg.contains(el) && el.matches("rect, circle, ellipse, path, polygon, image")
                  && !el.closest("text, defs") && el.compareDocumentPosition(text) & Node.DOCUMENT_POSITION_FOLLOWING)
          .reverse().reduce((under, shape) => { const p = paint(shape); return p ? over(p, under) : under; }, page);
        return contrast(over(paint(text), ground), ground);
      }));
      return worst < minimum && `${scheme} palette: ${figure.classList.contains("plot") ? "plot" : "diagram"} ` +
        `${i + 1}: ${snippet(text.textContent, 40)} is ${worst.toFixed(2)}:1 against what lies under it`;
    });
  });
})"""

MIN_CODE_SHARE = 0.75  # of the text column, for every code block
# Where code in a table may wrap: after these inside an identifier (a hyphen: the browser's), a space between tokens.
BREAKS_AFTER = "._/- "

INSPECT_PHONE = r"""([minText, minShare, breaksAfter]) => {
  const content = document.querySelector(".md-content article") || document.querySelector(".md-content");
  const column = content.clientWidth, columnBox = content.getBoundingClientRect(), page = document.documentElement;
  // No sideways scroll: name the innermost element that sticks out of the window.
  const out = el => el.getBoundingClientRect().right > page.clientWidth + 1;
  const culprit = page.scrollWidth > page.clientWidth && [...document.body.querySelectorAll("*:not(svg *)")]
    .find(el => out(el) && ![...el.children].some(out));
  return [page.scrollWidth > page.clientWidth && `the page scrolls sideways (${page.scrollWidth} px in a ` +
    `${page.clientWidth} px window): ${culprit ? `${tag(culprit)} ${snippet(culprit.textContent)}` : "?"}`,
    // Code blocks, notebook cells included, keep most of the column.
    ...each([...content.querySelectorAll("pre")].filter(wide).map(pre => [pre, pre.getBoundingClientRect().width]),
      ([pre, width], i) => width < minShare * column && `code block ${i + 1} ${snippet(pre.textContent)} is ` +
        `${Math.round(width)} px wide in a ${column} px column (less than ${minShare * 100}%)`),
    // Output wraps: recorded output (text blocks) and notebook outputs never scroll sideways.
    ...each(content.querySelectorAll(".language-text pre > code, .jp-OutputArea-output pre"), out => wide(out)
      && scrolls(out) && `output ${snippet(out.textContent)} does not wrap: ${out.scrollWidth} px of text in ` +
      `${out.clientWidth} px`),
    // Diagrams and plots whole (one drawing shown: a narrow variant), inside the column and viewBox; text big enough.
    ...each(content.querySelectorAll("figure.diagram, figure.plot"), (figure, i) => {
      const name = `${figure.classList.contains("plot") ? "plot" : "diagram"} ${i + 1}`;
      const svgs = [...figure.querySelectorAll(":scope > svg")].filter(wide);
      if (svgs.length !== 1) return `${name} shows ${svgs.length} drawings, not 1`;
      const svg = svgs[0], box = svg.getBoundingClientRect(), drawn = svg.getBBox(), view = svg.viewBox.baseVal;
      const cut = box.left < columnBox.left - 1 || box.right > columnBox.right + 1 || scrolls(figure);
      const outside = drawn.x < view.x - 1 || drawn.y < view.y - 1 || drawn.x + drawn.width > view.x + view.width + 1
        || drawn.y + drawn.height > view.y + view.height + 1;
      const scale = svg.getScreenCTM()?.a || 0;
      const small = [...svg.querySelectorAll("text")].map(t => [t, parseFloat(getComputedStyle(t).fontSize) * scale])
        .filter(([, px]) => px < minText);
      return [cut && `${name} is cut: ${Math.round(box.width)} px wide in a ${Math.round(columnBox.width)} px column`,
        outside && `${name} draws outside its viewBox (${view.width} × ${view.height}): content from ` +
          `(${drawn.x.toFixed(0)}, ${drawn.y.toFixed(0)}), ${drawn.width.toFixed(0)} × ${drawn.height.toFixed(0)}`,
        small.length && `${name}: ${small.length} labels under ${minText} px, e.g. ` +
          `${snippet(small[0][0].textContent)} at ${small[0][1].toFixed(1)} px`];
    }),
    // Output titles stay one line; what an output depends on goes in a note under it.
    ...each([...content.querySelectorAll(".language-text > .filename")].filter(wide), title => {
      const style = getComputedStyle(title), lines = (title.clientHeight - parseFloat(style.paddingTop)
        - parseFloat(style.paddingBottom)) / parseFloat(style.lineHeight);
      return lines > 1.5 && `output title ${snippet(title.textContent)} takes ${Math.round(lines)} lines`;
    }),
    // Formulas and tables fit the column: nothing of them behind a sideways scroll.
    ...each(content.querySelectorAll('math[display="block"], .md-typeset__scrollwrap'), el => wide(el) && scrolls(el)
      && `${el.matches("math") ? "formula" : "table"} ${snippet(el.textContent)} is ${el.scrollWidth} px wide in ` +
      `${el.clientWidth} px: ${el.matches("math") ? "split it into rows (\\begin{array}{rl})"
        : "its last columns are off screen"}`),
    // Identifiers in tables wrap only after a dot, an underscore, a slash or a hyphen.
    ...each(content.querySelectorAll("table code"), code => {
      const range = document.createRange(), chars = textNodes(code).flatMap(node => node.data.split("").map((c, k) => {
        range.setStart(node, k); range.setEnd(node, k + 1);
        return [c, range.getBoundingClientRect().top];
      }));
      return chars.map(([, top], k) => k && top > chars[k - 1][1] + 2 && !breaksAfter.includes(chars[k - 1][0])
        && `table cell: ${snippet(code.textContent)} wraps in the middle of a word, after "${chars[k - 1][0]}"`);
    }),
    ...coveredCode(),
  ].filter(Boolean);
}"""

# Each collapsible closed (then opened again): the page's height, and that of the list of what our scripts change.
LENGTH = """() => {
  const open = [...document.querySelectorAll("details[open]")], list = document.querySelector(".script-changes");
  open.forEach(d => { d.open = false; });
  const heights = [document.documentElement.scrollHeight, list ? list.getBoundingClientRect().height : 0];
  open.forEach(d => { d.open = true; });
  return heights;
}"""

# The book's parts on A.9.3 that a phone shows folded and a desktop open (docs/assets/open-wide.js).
FOLDED_WIDE = """() => [...document.querySelectorAll("details[data-open-wide]:not([open]) > summary")]
  .map(summary => summary.textContent)"""

# On A.9.3, every code block (folded ones opened) wraps rather than scrolls, each line a block of its own, and a line
# that wraps has the bar beside its continued rows.
CODE_WRAPS = r"""() => {
  const closed = [...document.querySelectorAll(".md-content details:not([open])")];
  closed.forEach(d => { d.open = true; });
  const problems = each(document.querySelectorAll(".md-content pre > code"), (code, i) => {
    const name = `code block ${i + 1} ${snippet(code.textContent)}`, lines = code.textContent.split("\n").length - 1;
    if (scrolls(code)) return `${name} hides ${code.scrollWidth - code.clientWidth} px behind a sideways scroll`;
    const blocks = [...code.children].filter(line => getComputedStyle(line).display === "block");
    if (blocks.length !== lines) return `${name}: ${blocks.length} of its ${lines} lines are blocks, which mark a wrap`;
    return blocks.map(line => [line, getComputedStyle(line)]).filter(([line, style]) =>
      line.getBoundingClientRect().height > 1.5 * parseFloat(style.lineHeight) && style.backgroundImage === "none")
      .slice(0, 1).map(([line]) => `${name}: the line ${snippet(line.textContent, 40)} wraps with no mark beside it`);
  });
  closed.forEach(d => { d.open = false; });
  return problems;
}"""

# Beside an output line that does not wrap, the bar marking continued lines draws nothing (judged by the pixels).
OUTPUT_LINES = ".md-content .highlight.recorded pre > code > span"
UNWRAPPED_LINES = r"""selector => [...document.querySelectorAll(selector)].flatMap(line => {
  const box = line.getBoundingClientRect(), style = getComputedStyle(line);
  if (!line.checkVisibility() || box.height > 1.5 * parseFloat(style.lineHeight)) return [];
  return [[box.left + scrollX, box.top + scrollY, box.left + scrollX + parseFloat(style.paddingLeft),
           box.bottom + scrollY, line.textContent.trim().slice(0, 30)]];
})"""


def marks_beside_unwrapped_lines(tab) -> list[str]:
    from PIL import Image, ImageChops  # matplotlib's dependency: in requirements.txt, not the site's

    lines = tab.evaluate(UNWRAPPED_LINES, OUTPUT_LINES)
    shown = tab.screenshot(full_page=True)
    bare = tab.add_style_tag(content=f"{OUTPUT_LINES} {{ background: none !important; }}")
    marks = ImageChops.difference(*(Image.open(io.BytesIO(png)).convert("RGB")
                                    for png in (shown, tab.screenshot(full_page=True))))
    bare.evaluate("style => style.remove()")
    return [f"a mark beside the output line {text!r}, which does not wrap" for *box, text in lines
            if marks.crop(tuple(map(round, box))).getbbox()] + [
        f"found {len(lines)} output lines of one row on the page, not more than 10"] * (len(lines) <= 10)


# Accessibility: axe-core in each palette (WCAG 2.0 to 2.2, A and AA, best practices), Material's chrome included.
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # pinned in package.json; `npm ci` installs it
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa", "best-practice"]
AXE_COLOUR_RULES = ["color-contrast", "link-in-text-block"]  # what the dark palette changes; the rest gave the same
# Colours are measured once the palette has switched, not halfway through Material's transitions.
NO_TRANSITIONS = "*, *::before, *::after { transition: none !important; animation: none !important; }"
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


# In a palette, the focused element (or a content tab's labels, the toggle's icon) shows a ring of 2 px, 3:1 or more.
FOCUS_RING = r"""([scheme, minRatio]) => {
  document.body.setAttribute("data-md-color-scheme", scheme);
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const name = `${tag(el)} ${snippet(el.getAttribute("aria-label") || el.title || el.textContent, 40)}`;
  const ringed = el.matches(".tabbed-set > input") ? el.parentElement.querySelector(":scope > .tabbed-labels")
    : el.matches("input.md-option") ? el.nextElementSibling : el;
  if (!shown(ringed) || !sized(ringed)) return `${name} takes a Tab stop but is not shown`;
  const style = getComputedStyle(ringed);
  if (style.outlineStyle === "none" || parseFloat(style.outlineWidth) < 2)
    return `${name} shows no focus ring (outline: ${style.outlineStyle} ${style.outlineWidth})`;
  const under = node => node  // the ancestors' backgrounds, composed from the page's up over white
    ? over(rgba(getComputedStyle(node).backgroundColor), under(node.parentElement)) : [255, 255, 255, 1];
  const behind = under(ringed.parentElement), ratio = contrast(rgba(style.outlineColor), behind);
  return ratio < minRatio ? `${name}: its focus ring ${style.outlineColor} is ${ratio.toFixed(2)}:1 against ` +
    `rgb(${behind.slice(0, 3).map(Math.round)}) behind it` : "";
}"""
MIN_FOCUS_CONTRAST = 3  # WCAG 2.2 (1.4.11, 2.4.13)
MAX_TAB_STOPS = 250  # more than any page has: the walk stops when focus leaves the page


def unringed_tab_stops(tab) -> list[str]:
    """Pressing Tab from the top of the page: each stop without a focus ring that stands out, in either palette."""
    problems = {}
    for _ in range(MAX_TAB_STOPS):
        tab.keyboard.press("Tab")
        found = {scheme: tab.evaluate(FOCUS_RING, [scheme, MIN_FOCUS_CONTRAST]) for scheme in ("slate", "default")}
        if found["default"] is None:  # past the last stop
            return list(problems)
        problems |= {f"pressing Tab, {scheme} palette: {problem}": None for scheme, problem in found.items() if problem}
    return [*problems, f"still inside the page after {MAX_TAB_STOPS} Tab presses"]


@pytest.fixture
def screenshots(pytestconfig, output_path):
    """With --screenshot on (or only-on-failure), the page at each width and each diagram light and dark."""
    option, folder = pytestconfig.getoption("--screenshot"), Path(output_path)

    def take(tab, failed: bool):
        if option == "on" or (option == "only-on-failure" and failed):
            folder.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=folder / "desktop.png", full_page=True, animations="disabled")
            for scheme, shade in (("slate", "dark"), ("default", "light")):
                tab.evaluate(PALETTE, scheme)
                for i, figure in enumerate(tab.locator(".md-content figure.diagram").all()):
                    figure.screenshot(path=folder / f"diagram-{i + 1}-{shade}.png", animations="disabled")
            tab.set_viewport_size(PHONE)
            tab.screenshot(path=folder / "phone.png", full_page=True, animations="disabled")
    return take


@pytest.mark.parametrize(("source", "url"), PAGES, ids=[url or "index" for _, url in PAGES])
def test_page_works_in_a_browser(tab, events, screenshots, axe_script, source, url):
    """Each page at the desktop's width, at the phone's (laid out anew, not loaded again), then with axe-core."""
    stored = sum(1 for cell in json.loads((ROOT / source).read_text())["cells"]  # code cells with outputs
                 if cell["cell_type"] == "code" and cell.get("outputs")) if source.endswith(".ipynb") else None
    problems = open_page(tab, url)
    inside, figures = tab.evaluate(INSPECT_PAGE, [source, stored])
    problems += inside + (tab.evaluate(CODE_WRAPS) if url in A93_PAGES else [])
    problems += [f"the book's part '{title}' is folded on a desktop" for title in tab.evaluate(FOLDED_WIDE)]
    if figures:  # each diagram's colour follows the palette
        dark, light = (tab.evaluate(PALETTE, scheme) for scheme in ("slate", "default"))  # light again
        problems += [f"diagram {i + 1} has the same colour ({colour}) in the light and the dark palette"
                     for i, (colour, other) in enumerate(zip(light, dark)) if colour == other]
        problems += tab.evaluate(TEXT_CONTRAST, MIN_CONTRAST)
    problems += events.settled(tab)
    events.problems.clear()  # what it did at the desktop's width is reported already
    tab.set_viewport_size(PHONE)  # the diagrams: their narrow variants now
    on_a_phone = tab.evaluate(INSPECT_PHONE, [MIN_TEXT_PX, MIN_CODE_SHARE, BREAKS_AFTER])
    if url in A93_PAGES:  # the book's scripts first, ours folded away: at most 12 screens, every collapsible closed
        on_a_phone += tab.evaluate(CODE_WRAPS)
        height, changes = (length / PHONE["height"] for length in tab.evaluate(LENGTH))  # in phone screens
        on_a_phone += [f"{height:.1f} phone screens long, more than 12"] * (height > 12) + [
            f"the list of what our scripts change takes {changes:.1f} phone screens, not one"] * (changes > 1)
    on_a_phone += events.settled(tab) + (tab.evaluate(TEXT_CONTRAST, MIN_CONTRAST) if figures else [])
    tab.add_style_tag(content=NO_TRANSITIONS)
    on_a_phone += marks_beside_unwrapped_lines(tab) if url == OUTPUTS_PAGE else []
    problems += [f"at {PHONE['width']} × {PHONE['height']} px: {problem}" for problem in on_a_phone]
    tab.set_viewport_size(DESKTOP)
    tab.add_script_tag(content=axe_script)
    for scheme, rules in (("slate", ["rule", AXE_COLOUR_RULES]), ("default", ["tag", AXE_TAGS])):  # light last
        tab.evaluate(PALETTE, scheme)
        problems += [f"axe-core, {scheme} palette: {violation}" for violation in tab.evaluate(RUN_AXE, rules)]
    problems += unringed_tab_stops(tab) if url in FOCUS_PAGES else []
    screenshots(tab, failed=bool(problems))
    assert not problems, f"{url or 'index'} ({tab.url}):\n  " + "\n  ".join(problems)


def search_finds(tab, query: str, *page_urls: str, first: bool = False) -> list[str]:
    """Type `query` into the open search field; [] once a result (the first, if `first`) links to one of `page_urls`,
    else the problem."""
    search_field = tab.locator("input.md-search__input")
    search_field.fill(query)
    search_field.press("End")  # Material reads the query on keyup: one keyup, one search
    links = tab.locator(".md-search-result__item a.md-search-result__link")
    shown = tab.locator(".md-search-result__item").first.locator("a.md-search-result__link").first if first else links
    try:
        expect(shown.and_(tab.locator(", ".join(f'[href^="{url}"]' for url in page_urls))).first).to_be_attached(
            timeout=10_000)
    except AssertionError:
        meta = tab.locator(".md-search-result__meta").inner_text()
        found = [href.split("?")[0] for href in links.evaluate_all("links => links.map(a => a.href)")]
        return [f"searching for {query} does not find {' or '.join(page_urls)}{' first' * first}; it finds "
                f"{list(dict.fromkeys(found))} (the search says {meta!r})"]
    return []


MAX_PREVIEW_CODE_LINES = 80  # a longer block in a preview is a whole script (150+ lines), not a section
A93 = ("a9-multi-gpu-training", "a9-ddp-in-practice")
# What a reader types, in their edition: the page that explains it (Chinese words: only if jieba split the text).
# The words Chinese readers search for multi-GPU training list A.9.3 (either page) first.
SEARCHES = [(prefix, query, pages) for prefix, searches in {
    ENGLISH.prefix: {"zero_grad": "a7-typical-training-loop", "manual_seed": "a5-multilayer-neural-networks",
                     "from_numpy": "a2-understanding-tensors", "state_dict": "a8-saving-and-loading-models",
                     "set_epoch": "a9-multi-gpu-training", "DistributedSampler": "a9-multi-gpu-training"},
    CHINESE.prefix: {"张量": "a2-understanding-tensors", "梯度": "a4-automatic-differentiation",
                     "数据加载器": "a6-efficient-data-loaders", "state_dict": "a8-saving-and-loading-models",
                     **dict.fromkeys("分布式训练 分布式 数据并行 多卡 单机多卡 多机多卡 梯度同步".split(), A93)},
}.items() for query, pages in searches.items()]


@pytest.mark.parametrize(("edition", "query", "expected"), SEARCHES, ids=[f"{e}{q}" for e, q, _ in SEARCHES])
def test_search_finds_what_readers_type_on_its_page(tab, events, site_url, edition, query, expected):
    problems = open_page(tab, edition)
    tab.keyboard.press("/")  # Material's shortcut; clicking the search field does the same
    if not tab.locator("input.md-search__input").evaluate("el => el === document.activeElement"):
        tab.locator("label.md-search__icon").first.click()
    pages = expected if isinstance(expected, tuple) else (expected,)
    problems += search_finds(tab, query, *(f"{site_url}{edition}{page}/" for page in pages), first=expected == A93)
    problems += [f"the search preview of {href} for {query} shows {lines} lines of code, not prose"
                 for href, lines in tab.locator(".md-search-result__article pre").evaluate_all(
                     "pres => pres.map(p => [p.closest('a').getAttribute('href'), p.textContent.split('\\n').length])")
                 if lines > MAX_PREVIEW_CODE_LINES]
    problems += events.settled(tab)
    assert not problems, "\n".join(problems)


def test_the_language_switch_and_the_palette_toggle_speak_the_editions_words(tab, events):
    """The header's language menu leads to the same page in the other edition, whose palette toggle speaks its words."""
    page = "a6-efficient-data-loaders/"
    problems = open_page(tab, page)
    for edition in (CHINESE, ENGLISH):
        problems += events.settled(tab)  # leaving earlier would abort what is still loading
        events.problems.clear()
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


def test_404_page_under_a_sub_path_has_search_and_the_contents(browser, published_site, published_url):
    events, hrefs = Events(), "links => links.map(a => a.href)"
    with browser.new_context(viewport=DESKTOP, service_workers="block") as context:
        tab = events.watch(context)
        missing = f"{published_url}no/such/page/"
        # What GitHub Pages answers at an address it does not know: the site's 404.html, with status 404.
        tab.route(missing, lambda route: route.fulfill(status=404, path=published_site / SUB_PATH / "404.html"))
        response = tab.goto(missing, wait_until="networkidle")
        assert response.status == 404, f"{missing} answered {response.status}, not 404"
        # Styled (an unstyled header is a plain block): fails with its scripts when asked for at the domain's root.
        expect(tab.locator("header.md-header"), f"the 404 page at {missing} is unstyled, its assets did not "
               f"load: {list(events.problems)} (is site_url read from SITE_URL?)").to_have_css("position", "sticky")
        # The way back: links to every page of the nav, and (for a reader of the Chinese edition) to its home page.
        links = set(tab.locator(".md-content li a").evaluate_all(hrefs))
        problems = [f"the contents on the 404 page have no link to {published_url}{url}"
                    for _, url in nav_pages(ENGLISH) if f"{published_url}{url}" not in links]
        chinese_home = tab.locator(f'.md-content a[hreflang="{CHINESE.language}"]').evaluate_all(hrefs)
        if chinese_home != [f"{published_url}{CHINESE.prefix}"]:
            problems.append(f"the 404 page links the Chinese edition's home as {chinese_home}")
        # Its search finds a page under the sub-path; a link of the contents leads there (by instant navigation).
        tab.locator(".md-content [data-search-button]").click()
        expect(tab.locator("input.md-search__input")).to_be_focused()
        problems += search_finds(tab, "state_dict", f"{published_url}a8-saving-and-loading-models/")
        tab.keyboard.press("Escape")
        tab.locator(".md-content li a[href$='/a8-saving-and-loading-models/']").click()
        expect(tab).to_have_url(f"{published_url}a8-saving-and-loading-models/")
        expect(tab.locator(".md-content h1")).to_contain_text("A.8")
        # Less the 404 itself: its response, and the console's note of it (a network error: line 0).
        the_404 = (f"bad response: 404 {missing}", f"[{missing}:0]")
        problems += [problem for problem in events.settled(tab) if not problem.endswith(the_404)]
        assert not problems, f"404 page at {missing}:\n  " + "\n  ".join(problems)
