"""The built site in the system's headless Chromium (pytest-playwright): every page of both editions, their 404 pages
too, at 1280 and 390 px, and search, the language switch, the palette toggle and the 404 page as a reader uses them
(Material's own JS aside)."""

import contextlib
import io
import json
import os
import shutil
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import PUBLISHED, ROOT, SUB_PATH, nav_pages
from mkdocs.utils.yaml import yaml_load

from tools.editions import CHINESE, EDITIONS, ENGLISH

INSTALL_HINT = ("install it with `sudo apt-get install -y chromium-headless-shell` (or chromium; or run "
                ".ci/install-browser.sh), and `pip install -r requirements.txt`; `playwright install` is never needed. "
                "CHROMIUM=/path/to/it picks another.")


def cannot_run(reason: str, hint: str = INSTALL_HINT):
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
SITE_URL = yaml_load((ROOT / ENGLISH.config).read_text())["site_url"]  # where the site is built for and served
QUIET_S = 0.2  # Playwright's "networkidle" waits 500 ms, which was a fifth of this file's time
PAGES = [page for edition in EDITIONS.values() for page in nav_pages(edition)]  # so that a new page is checked
PAGES += [("overrides/404.html", f"{edition.prefix}404.html") for edition in EDITIONS.values()]  # and the 404 pages
# Pages with checks of their own: A.9.3 fits a phone; Tab through content tabs, notebook cells; outputs of one line.
A93 = ("a9-multi-gpu-training", "a9-ddp-in-practice")
A93_PAGES = {f"{edition.prefix}{page}/" for edition in EDITIONS.values() for page in A93}
FOCUS_PAGES, OUTPUTS_PAGE = {"setup/", "notebooks/code-part2/"}, "a2-understanding-tensors/"
assert A93_PAGES | FOCUS_PAGES | {OUTPUTS_PAGE} <= {url for _, url in PAGES}, "a page checked on its own left the nav"
CHECKS = "\n".join(path.read_text() for path in sorted((ROOT / "tests" / "browser").glob("*.js")))


class Events:
    """A tab served the site in `site` at `url` as a static host serves it (a missing path: 404.html, status 404), and
    nothing else; the checks in each page; what it did wrong (each problem once, in order) since `problems.clear()`."""

    def __init__(self, browser, site: Path, url: str):
        self.site, self.url = site, url
        self.page = page = browser.new_context(viewport=DESKTOP, service_workers="block", base_url=url).new_page()
        self.problems = {}  # an ordered set: a resource the page asks for twice fails twice
        self.in_flight = set()  # not cleared with the problems: a request started before it ends after it
        self.last_activity = time.monotonic()  # when a request last started or ended
        page.add_init_script(CHECKS)
        page.set_default_timeout(15_000)
        page.route("**/*", self.route)
        for event, handler in dict(request=self.started, requestfinished=self.ended, requestfailed=self.ended,
                                   response=self.answered, console=self.console, pageerror=self.page_error).items():
            page.on(event, handler)

    def route(self, route):
        url = route.request.url.split("?")[0]
        if not url.startswith(self.url):
            self.problems[f"request outside the site (blocked): {route.request.url}"] = None
            return route.abort("blockedbyclient")
        path = self.site / unquote(url.removeprefix(self.url))
        path = path / "index.html" if path.is_dir() else path
        route.fulfill(path=path) if path.is_file() else route.fulfill(status=404, path=self.site / "404.html")

    def started(self, request):
        self.in_flight.add(request)
        self.last_activity = time.monotonic()

    def ended(self, request):
        self.in_flight.discard(request)
        self.last_activity = time.monotonic()
        if request.failure and request.url.startswith(self.url):  # requests outside are reported as such
            self.problems[f"request failed: {request.url} ({request.failure})"] = None

    def answered(self, response):
        if response.status != 200:
            self.problems[f"bad response: {response.status} {response.url}"] = None

    def console(self, message):
        if message.type == "error":
            url, line = message.location.get("url"), message.location.get("lineNumber")
            self.problems[f"console error: {message.text}" + (f" [{url}:{line}]" if url else "")] = None

    def page_error(self, error):
        self.problems[f"uncaught page error: {error}"] = None

    def settled(self) -> list[str]:
        """The problems, once the page has loaded and asked for nothing for QUIET_S (or for at most 15 s)."""
        self.page.wait_for_load_state("load")
        deadline = time.monotonic() + 15
        self.page.wait_for_timeout(50)  # events arrive while Playwright waits
        while (self.in_flight or time.monotonic() - self.last_activity < QUIET_S) and time.monotonic() < deadline:
            self.page.wait_for_timeout(50)
        return list(self.problems) + [f"still loading after 15 s: {request.url}" for request in self.in_flight]


@pytest.fixture(scope="session")
def browser(browser_type, browser_type_launch_args):
    """The system's Chromium: $CHROMIUM, else the headless shell (a quarter less CPU than Chromium), else Chromium."""
    names = [os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else [
        "chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
    search_path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin"])
    path = next(filter(None, (shutil.which(name, path=search_path) for name in names)), None)
    if not path:
        cannot_run(f"Chromium is not installed (no executable {' or '.join(names)} on PATH or in /usr/bin)")
    try:  # Playwright adds the rest: --headless, --no-sandbox, --disable-dev-shm-usage, no background networking
        browser = browser_type.launch(**browser_type_launch_args, executable_path=path, args=["--disable-gpu"])
    except PlaywrightError as error:
        pytest.fail(f"Chromium at {path} did not start: {error}\nTo fix it, {INSTALL_HINT}", pytrace=False)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def events(browser, built_site) -> Events:  # the browser first: without one, the site is not built
    """One tab for the session: a page loads faster where the theme's assets were loaded before."""
    events = Events(browser, built_site, SITE_URL)
    yield events
    events.page.context.close()


@pytest.fixture
def page(events):  # not pytest-playwright's
    """The session's tab, at the desktop's width, with a fresh record of what it does."""
    events.page.set_viewport_size(DESKTOP)
    events.problems.clear()
    return events.page


def open_page(page, url: str):
    """Go to `url` (relative to the site) and wait until the theme has set it up (its status: in the events)."""
    page.goto(url)
    with contextlib.suppress(AssertionError):  # Material mounts copy buttons just after load; the checks say if not
        expect(page.locator(".md-content pre:not(:has([data-clipboard-target]))>code:not(.no-copy *)")).to_have_count(0)


# Beside an output line that does not wrap, the bar marking continued lines draws nothing (judged by the pixels).
OUTPUT_LINES = ".md-content .highlight.recorded pre > code > span"


def marks_beside_unwrapped_lines(page) -> list[str]:
    from PIL import Image, ImageChops  # matplotlib's dependency: in requirements.txt, not the site's

    lines = page.evaluate("unwrappedLines", OUTPUT_LINES)
    marks = ImageChops.difference(*(Image.open(io.BytesIO(page.screenshot(full_page=True, style=style))).convert("RGB")
                                    for style in (None, f"{OUTPUT_LINES} {{ background: none !important; }}")))
    return [f"a mark beside the output line {text!r}, which does not wrap" for *box, text in lines
            if marks.crop(tuple(map(round, box))).getbbox()] + [
        f"found {len(lines)} output lines of one row on the page, not more than 10"] * (len(lines) <= 10)


# Accessibility: axe-core in each palette (tests/browser/accessibility.js), Material's chrome included.
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"  # pinned in package.json; `npm ci` installs it
# Colours are measured once the palette has switched, not halfway through Material's transitions.
NO_TRANSITIONS = "*, *::before, *::after { transition: none !important; animation: none !important; }"


MAX_TAB_STOPS = 250  # more than any page has: the walk stops when focus leaves the page


def unringed_tab_stops(page) -> list[str]:
    """Pressing Tab from the top of the page: each stop without a focus ring that stands out, in either palette."""
    problems = {}
    for _ in range(MAX_TAB_STOPS):
        page.keyboard.press("Tab")
        if (found := page.evaluate("focusRing")) is None:  # past the last stop
            return list(problems)
        problems |= dict.fromkeys(f"pressing Tab, {problem}" for problem in found)
    return [*problems, f"still inside the page after {MAX_TAB_STOPS} Tab presses"]


@pytest.mark.parametrize(("source", "url"), PAGES, ids=[url or "index" for _, url in PAGES])
def test_page_works_in_a_browser(page, events, source, url):
    """Each page at the desktop's width, at the phone's (laid out anew, not loaded again), then with axe-core."""
    if not AXE.exists():
        cannot_run(f"axe-core is not installed ({AXE.relative_to(ROOT)} is missing)",
                   "run `npm ci` in the repository (package-lock.json pins axe-core).")
    stored = sum(1 for cell in json.loads((ROOT / source).read_text())["cells"]  # code cells with outputs
                 if cell["cell_type"] == "code" and cell.get("outputs")) if source.endswith(".ipynb") else None
    open_page(page, url)
    problems = page.evaluate("inspectPage", [source, stored, url in A93_PAGES]) + events.settled()
    events.problems.clear()  # what it did at the desktop's width is reported already
    page.set_viewport_size(PHONE)  # the diagrams: their narrow variants now
    on_a_phone = page.evaluate("inspectPhone", url in A93_PAGES) + events.settled() + page.evaluate("textContrast")
    page.add_style_tag(content=NO_TRANSITIONS)
    on_a_phone += marks_beside_unwrapped_lines(page) if url == OUTPUTS_PAGE else []
    problems += [f"at {PHONE['width']} × {PHONE['height']} px: {problem}" for problem in on_a_phone]
    page.set_viewport_size(DESKTOP)
    page.add_script_tag(path=AXE)
    for scheme in ("slate", "default"):  # light last
        problems += [f"axe-core, {scheme} palette: {violation}" for violation in page.evaluate("axeViolations", scheme)]
    problems += unringed_tab_stops(page) if url in FOCUS_PAGES else []
    assert not problems, f"{url or 'index'} ({page.url}):\n  " + "\n  ".join(problems)


def search_finds(page, query: str, *page_urls: str, first: bool = False) -> list[str]:
    """Types `query` in the open search field: [] once a result (the first, if `first`) links to one of `page_urls`,
    else the problem."""
    search_field = page.locator("input.md-search__input")
    search_field.fill(query)
    search_field.press("End")  # Material reads the query on keyup: one keyup, one search
    links = page.locator(".md-search-result__item a.md-search-result__link")
    shown = page.locator(".md-search-result__item").first.locator("a.md-search-result__link").first if first else links
    try:
        expect(shown.and_(page.locator(", ".join(f'[href^="{url}"]' for url in page_urls))).first).to_be_attached(
            timeout=10_000)
    except AssertionError:
        meta = page.locator(".md-search-result__meta").inner_text()
        found = [href.split("?")[0] for href in links.evaluate_all("hrefs")]
        return [f"searching for {query} does not find {' or '.join(page_urls)}{' first' * first}; it finds "
                f"{list(dict.fromkeys(found))} (the search says {meta!r})"]
    return []


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
def test_search_finds_what_readers_type_on_its_page(page, events, edition, query, expected):
    open_page(page, edition)
    page.keyboard.press("/")  # Material's shortcut; clicking the search field does the same
    if not page.locator("input.md-search__input:focus").count():
        page.locator("label.md-search__icon").first.click()
    pages = expected if isinstance(expected, tuple) else (expected,)
    problems = search_finds(page, query, *(f"{SITE_URL}{edition}{name}/" for name in pages), first=expected == A93)
    problems += page.evaluate("scriptsInPreviews", query) + events.settled()
    assert not problems, "\n".join(problems)


def test_the_language_switch_and_the_palette_toggle_speak_the_editions_words(page, events):
    """The header's language menu leads to the same page in the other edition, whose palette toggle speaks its words."""
    url = "a6-efficient-data-loaders/"
    open_page(page, url)
    problems = []
    for edition in (CHINESE, ENGLISH):
        problems += events.settled()  # leaving earlier would abort what is still loading
        events.problems.clear()
        page.locator(".md-header .md-select").hover()  # the menu opens on hover (and on focus)
        page.locator(f".md-select__link[hreflang={edition.language}]").click()
        expect(page).to_have_url(f"{SITE_URL}{edition.prefix}{url}")
        expect(page.locator("html")).to_have_attribute("lang", edition.language)
        expect(page.locator(".md-content h1")).to_contain_text("A.6")
        toggle = page.locator("form[data-md-component=palette] label:visible")
        expect(toggle).to_have_attribute("title", edition.words["dark_mode"])
        expect(page.locator(f"#{toggle.get_attribute('for')}")).to_have_attribute("data-md-color-scheme", "slate")
    problems += events.settled()
    assert not problems, "\n".join(problems)


def test_404_page_under_a_sub_path_has_search_and_the_contents(browser, published_site):
    published_url = PUBLISHED["SITE_URL"]  # served as GitHub Pages serves it: an unknown path gets 404.html
    page = (events := Events(browser, published_site / SUB_PATH, published_url)).page
    with page.context:
        missing = f"{published_url}no/such/page/"
        response = page.goto(missing, wait_until="networkidle")
        assert response.status == 404, f"{missing} answered {response.status}, not 404"
        # Styled (an unstyled header is a plain block): fails with its scripts when asked for at the domain's root.
        expect(page.locator("header.md-header"), f"the 404 page at {missing} is unstyled, its assets did not "
               f"load: {list(events.problems)} (is site_url read from SITE_URL?)").to_have_css("position", "sticky")
        # The way back: links to every page of the nav, and (for a reader of the Chinese edition) to its home page.
        links = set(page.locator(".md-content li a").evaluate_all("hrefs"))
        problems = [f"the contents on the 404 page have no link to {published_url}{url}"
                    for _, url in nav_pages(ENGLISH) if f"{published_url}{url}" not in links]
        chinese_home = page.locator(f'.md-content a[hreflang="{CHINESE.language}"]').evaluate_all("hrefs")
        if chinese_home != [f"{published_url}{CHINESE.prefix}"]:
            problems.append(f"the 404 page links the Chinese edition's home as {chinese_home}")
        # Its search finds a page under the sub-path; a link of the contents leads there (by instant navigation).
        page.locator(".md-content [data-search-button]").click()
        expect(page.locator("input.md-search__input")).to_be_focused()
        problems += search_finds(page, "state_dict", f"{published_url}a8-saving-and-loading-models/")
        page.keyboard.press("Escape")
        page.locator(".md-content li a[href$='/a8-saving-and-loading-models/']").click()
        expect(page).to_have_url(f"{published_url}a8-saving-and-loading-models/")
        expect(page.locator(".md-content h1")).to_contain_text("A.8")
        # Less the 404 itself: its response, and the console's note of it (a network error: line 0).
        the_404 = (f"bad response: 404 {missing}", f"[{missing}:0]")
        problems += [problem for problem in events.settled() if not problem.endswith(the_404)]
        assert not problems, f"404 page at {missing}:\n  " + "\n  ".join(problems)
