"""Both editions build strictly; a chapter page shows its download's code with the recorded output under it; the
Chinese edition is the English one in Chinese; links lead somewhere; the build refuses a broken repository."""

import ast
import html
import json
import posixpath
import re
import shutil
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup
from conftest import PUBLISHED, ROOT, SUB_PATH, mkdocs_build, nav_pages

from tools import BOOK, book, claims, pages, prerequisites, sections, tomllib
from tools.editions import CHINESE, EDITIONS, ENGLISH, GLOSSARY
from tools.page_runner import run


def soup_of(site: Path, url: str) -> BeautifulSoup:
    return BeautifulSoup((site / url / "index.html").read_text(), "html.parser")


def without(element, selector: str):
    for found in element.select(selector):
        found.decompose()
    return element


def blocks(soup: BeautifulSoup) -> list[tuple[str, str]]:
    """(title, text) of every Python and Output block in page order, collapsed too (shell commands are prose)."""
    return [(title.get_text() if (title := block.select_one(".filename")) else "",
             code.get_text() if (code := block.select_one("pre > code")) else "")
            for block in soup.select(".md-content div.highlight:is(.language-python, .language-text)")]


@pytest.mark.parametrize("page", pages.chapter_pages())
def test_a_page_shows_its_download_and_the_outputs_it_prints(page, built_site, recording):
    """Its blocks, copied, are the download the recording ran alone; under them, what that run printed and drew."""
    url = Path(page).stem
    text = (built_site / url / "index.html").read_text()
    shown = blocks(soup := BeautifulSoup(text, "html.parser"))
    download = (built_site / "downloads" / pages.download_name(page)).read_text()
    assert download == pages.download_text(page), "the served download is not the page's program"
    # A block may show several sections (parted by a blank line where the book's cell has one): blank lines aside.
    code = [line for title, text in shown if not title.startswith("Output") for line in text.splitlines()
            if line.strip()]
    assert code == [line for cell in pages.split_download(download) for line in cell.splitlines() if line.strip()], (
        f"the code blocks of {url}/, copied top to bottom, are not its download")
    run = recording.runs[page]
    printed = [recording.outputs[key] for key, text in run["outputs"].items() if text]
    outputs = [text for title, text in shown if title.startswith("Output")]
    # Markdown expands tabs (A.8's error message has one) to 4 columns.
    assert "".join(outputs) == "".join(printed).expandtabs(4), f"the Output blocks of {url}/ are not what it printed"
    # Each plot inline under the block that draws it, named by its caption: what the plot shows.
    shown_plots = [(figure.svg["aria-labelledby"], figure.figcaption.get("id"), figure.figcaption.get_text())
                   for figure in soup.select(".md-content figure.plot")]
    drawn = [(f"plot-{key.replace(':', '-').replace('_', '-')}",) * 2 + (ENGLISH.words[f"plot:{key}"],)
             for key in run["plots"]]
    assert shown_plots == drawn, f"{url}/ shows the plots {shown_plots}, its run drew {drawn}"
    # And what one page adds: Exercises' box after the solutions, A.4's math rendered as MathML at build time.
    assert page != "exercises.md" or text.index("Run it yourself") > text.rindex("Exercise A.4"), "box first"
    if page == "a4-automatic-differentiation.md":
        assert len(re.findall(r'<math [^>]*display="block"', text)) == 2 and "\\frac" not in html.unescape(text)


# --- Outside links: where they lead, built with and without REPO_URL

COLAB = re.compile(r"https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/(.+)")


def generated_links(site: Path) -> dict[str, str]:
    """{outside link: a page that shows it} for every link that no source (page, notebook, measured figure) types."""
    sources = [*ROOT.glob("docs*/**/*.md"), *ROOT.glob("docs*/notebooks/*.ipynb"), *ROOT.glob("measured/*.md")]
    typed, found = {url for path in sources for url in re.findall(r"https?://[^\s)\"'<>\]]+", path.read_text())}, {}
    for page in sorted(site.rglob("*.html")):
        for link in BeautifulSoup(page.read_text(), "html.parser").select("a[href^='http']"):
            if link["href"] not in typed and not link["href"].startswith("https://squidfunk.github.io/"):
                found.setdefault(link["href"], str(page.relative_to(site)))  # ^ the theme's footer credit
    return found


def where_it_leads(url: str, repository: str | None) -> str | None:
    """None if `url` leads to something that exists at that address, else what is wrong with it."""
    site = repository and repository.removeprefix("https://github.com/")
    if colab := COLAB.fullmatch(url):
        owner_name, ref, path = colab.groups()
        if site:
            return None if (owner_name, ref) == (site, "main") and (ROOT / path).is_file() else "not this repository's"
        pinned = (urlsplit(pages.BOOK_REPOSITORY).path.strip("/"), pages.book_commit())
        return None if (owner_name, ref) == pinned and path.startswith(pages.BOOK_NOTEBOOKS + "/") and (
            BOOK / Path(path).name).is_file() else "not the book's notebook at the pinned commit"
    if site and url.startswith(repository):
        rest = url.removeprefix(repository)
        found = rest in ("", "/issues") or (rest.startswith("/edit/main/") and (ROOT / rest[11:]).is_file())
        return None if found else "not a file of this repository"
    if url.startswith(book.ISSUES):  # a fix of the book's repository that a page follows, or that a reason cites
        declared = {str(difference.fix) for difference in book.differences()} | {
            number for difference in book.differences() for number in book.ISSUE.findall(difference.reasons["en"])}
        return None if url.removeprefix(book.ISSUES) in declared else "no declared fix has this number"
    # The header's button of a local build; nothing else.
    return None if url == pages.BOOK_REPOSITORY and not site else "no check knows this kind of link"


def test_every_outside_link_the_hooks_make_leads_somewhere(built_site, published_site):
    """Built with and without REPO_URL: whose repository the header, Colab, Home and Authoring link, and that it is."""
    builds = {"without REPO_URL": (built_site, None),
              f"with REPO_URL={PUBLISHED['REPO_URL']}": (published_site / SUB_PATH, PUBLISHED["REPO_URL"])}
    for build, (site, repository) in builds.items():
        links = generated_links(site)
        wrong = [f"{url} (on {page}): {problem}" for url, page in links.items()
                 if (problem := where_it_leads(url, repository))]
        assert not wrong, f"built {build}, outside links that lead nowhere:\n" + "\n".join(wrong)
        assert any(COLAB.fullmatch(url) for url in links), f"built {build}: no Colab link at all"
        for edition in EDITIONS.values():
            button = soup_of(site, edition.prefix).select_one("a.md-source")
            assert button["href"] == (repository or pages.BOOK_REPOSITORY), build
            name = urlsplit(button["href"]).path.strip("/")
            whose = edition.words["site_repository" if repository else "book_repository"].format(name=name)
            assert button.get_text(" ", strip=True) == whose, f"built {build}, the header's button says {button}"
            for page in ("", "authoring/") if edition is ENGLISH else ("",):  # zh/authoring/ includes docs/'s
                links_here = {a["href"] for a in soup_of(site, edition.prefix + page).select("article p a")}
                expected = {repository, f"{repository}/issues"} if repository else set()
                assert {url for url in links_here if PUBLISHED["REPO_URL"] in url} == expected, (
                    f"built {build}, {edition.prefix}{page or 'index'} links {links_here & expected or 'nothing'}")


# --- The Chinese edition

PAIRS = list(zip(nav_pages(ENGLISH), nav_pages(CHINESE)))  # ((source, url) in English, in Chinese)
HAN = re.compile(r"[\u4e00-\u9fff]")
ENGLISH_ONLY = "authoring.md"  # a maintainers' page: the Chinese edition shows it in English


def words_a_reader_sees(page: Path) -> dict[str, list[str]]:
    """The words of a built page by where they are: its prose, its blocks' (and tabs') titles, what it draws and its
    interface (title, chrome, labels, alt texts, Material's scripts' words). Inline code, and English in italics (an
    error message as printed), read `…`: a word of their own, which no check takes for English."""
    soup = BeautifulSoup(page.read_text(), "html.parser")
    config = soup.select_one("script#__config")
    interface = list(json.loads(config.string)["translations"].values()) if config else []
    interface += [element[attribute] for attribute in ("title", "aria-label", "alt", "placeholder")
                  for element in soup.select(f"[{attribute}]")]
    without(soup, "[lang]:not(html), pre, math, script, style, .headerlink")  # e.g. the other edition's line
    for code in soup.select("code") + [em for em in soup.select("article em") if not HAN.search(em.get_text())]:
        code.string = "`…`"
    article = soup.select_one("article") or soup
    places = {"prose": (article, "h1, h2, h3, h4, p, li, td, th, figcaption, summary, .admonition-title"),
              "titles": (article, ".filename, .tabbed-labels label"), "drawn": (soup, "svg text"),
              "interface": (soup, "title, .md-nav__link, .md-header, .md-footer")}
    seen = {kind: [element.get_text("") for element in root.select(where)] for kind, (root, where) in places.items()}
    seen["interface"] += interface
    return seen


# Two or more English words in a row, which a Chinese page should not show but for names (of products, people, the
# book), terms Chinese readers use in English (world size) and English glossed or quoted: in （…）, “…”, italics.
LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z'’]+(?:[\s,;:()!?]+[A-Za-z][A-Za-z'’]+)+")
TOKEN = r"[^\s，。：；、（）“”「」]*"
CODE_LIKE = re.compile(TOKEN + r"[./_+=<>{}\[\]`#@\d-]" + TOKEN)  # paths, API names, versions, flags
KEPT_ENGLISH = re.compile(r"\b(?:(?:NVIDIA|Apple|CUDA|MPS) GPU|CUDA toolkit|Google Colab|Colab Notebook|"
                          r"Jupyter Notebook|VS Code|Sebastian Raschka|Material for MkDocs|"
                          r"(?:Build a )?Large Language Model(?: \(From Scratch\))?|world size|local rank|run id)")
GLOSSED = re.compile(r"（[^）]*）|“[^”]*”|「[^」]*」")


def english_runs(text: str) -> list[str]:
    return LATIN_RUN.findall(CODE_LIKE.sub("|", KEPT_ENGLISH.sub("|", GLOSSED.sub("|", text))))


def chinese_texts() -> dict[str, str]:
    """Every Chinese text by where it is kept: pages, diagrams, notebooks, nav, tools' words, reasons, figures."""
    paths = [*CHINESE.docs.rglob("*.md"), *CHINESE.docs.glob("assets/diagrams/*.svg"),
             *CHINESE.notebooks.glob("*.ipynb"), *ROOT.glob("measured/*.zh.md"), ROOT / CHINESE.config]
    texts = {str(path.relative_to(ROOT)): path.read_text() for path in paths}
    texts["tools/words.toml (zh)"] = "\n".join(CHINESE.words.values())
    for declared in sorted(ROOT.glob("snippets/*.toml")):
        texts[f"{declared.relative_to(ROOT)} (reason_zh, summary_zh)"] = "\n".join(re.findall(
            r'^(?:reason|summary)_zh = (.*?)(?=^\w|\Z)', declared.read_text(), re.S | re.M))
    return texts


def glossary_problems(texts: dict[str, str]) -> list[str]:
    return [f"{where}: {found[0]!r} where the glossary says {term['chinese']} ({term['english']})"
            for term in tomllib.loads(GLOSSARY.read_text())["term"] for variant in term.get("avoid", [])
            for where, text in texts.items() for found in re.finditer(variant, text)]


# The Chinese edition's typography, one rule each, as most Chinese technical writing has it (code aside):
# - spacing: a space where a Chinese character meets a Latin letter, a digit, inline code or a placeholder (第 19 个,
#   与 `DDP-script.py` 的差异, 与 {base} 的差异), and none beside Chinese punctuation (1.2×（spawn）和 1.5×);
# - numerals: in one sentence, the counts are all digits or all Chinese numerals (2 个隐藏层，分别有 30 个和 20 个
#   单元), and so are the ordinals (第 6 步（第 2 轮的第 1 步）, not 第六步（第 2 轮的第一步）); 一 meaning "a" (一个
#   进程) is a word, not a count, and a section's number (A.5 节) no count;
# - bullet leads: a list item's bold lead ends in a full-width colon outside the bold (- **防火墙**：…); bold that
#   begins the item's sentence (- **张量**（A.2）是…) is no lead.
PUNCTUATION = "，。、；：？！（）“”「」《》"
WORD = r"[\u4e00-\u9fffA-Za-z0-9`*\[\]]"  # not a separator (Material's title - site, a table's |, { #anchor })
UNSPACED = re.compile(r"[\u4e00-\u9fff][A-Za-z0-9`{]|[A-Za-z0-9`}][\u4e00-\u9fff]"
                      rf"|(?<={WORD})[ \t]+[{PUNCTUATION}]|[{PUNCTUATION}]\**[ \t]+(?={WORD})")
MEASURE = r"(?:[个块步轮次行秒份台种条倍位层项处遍节章批名组件列]|分钟|小时)"
NUMERAL = "两二三四五六七八九十百千"
COUNTS = (re.compile(rf"(?<!第)(?<!第 )(?<![.\d])\d+\s*{MEASURE}"),
          re.compile(rf"(?<![第一{NUMERAL}])[{NUMERAL}]+{MEASURE}"))
ORDINALS = (re.compile(r"第\s*\d"), re.compile(rf"第[一{NUMERAL}]"))  # each: (in digits, in Chinese numerals)
BULLET_LEAD = re.compile(r"^[ \t]*(?:[-*+]|\d+\.)[ \t]+\*\*(.+?)\*\*(.?)", re.M)


def unspaced(text: str) -> list[str]:  # each pair of characters (or space) that breaks the rule, in its context
    text = claims.FENCE.sub("", text)
    return [f"{m[0]} in {text[max(0, m.start() - 15):m.end() + 15]!r}" for m in UNSPACED.finditer(text)]


def mixed_numerals(text: str) -> list[str]:  # the sentences that count, or number, in digits and in Chinese numerals
    return [sentence.strip() for sentence in re.split(r"[。！？\n]", claims.FENCE.sub("", text))
            if any(digits.search(sentence) and numerals.search(sentence) for digits, numerals in (COUNTS, ORDINALS))]


def loose_leads(markdown: str) -> list[str]:
    return [m[0].strip() for m in BULLET_LEAD.finditer(markdown)
            if m[1][-1] in "，。、；：？！" or m[2] in " \t，。、；？！"]


@pytest.mark.parametrize(("check", "text", "found"), [
    (english_runs, "输出 · 录制于 torch 2.13.0+cpu，CPU only, 2 cores。在 NVIDIA GPU 上，Expected all tensors 与 "
     "`scripts/DDP-script.py` 的“Set sampler in DDP example”（world size）", ["CPU only", "Expected all tensors"]),
    (lambda text: [found.split(": ")[1].split(" where")[0] for found in glossary_problems({"docs-zh/a6.md": text})],
     "在 macOS 上使用笔记本时，用 2 个 GPU 的笔记本电脑", ["'笔记本'", "'个 GPU'"]),
    (lambda text: [found.split(" in ")[0] for found in unspaced(text)],
     "本站 · DDP-script.py：main，与DDP-script.py的差异\n第19个单元格，用`torch.save`保存\n"
     "第 19 个单元格，用 `torch.save` 保存（见 A.8）。\n```bash\n# 在每个节点上运行torchrun\n```\n"
     "- **防火墙。** 挡住端口\n1.2×（spawn） 和 1.5×\n"
     "## 有多快？ { #fast }\n| 1（不用 DDP） | 2 |", ["与D", "y的", "第1", "9个", "用`", "`保", "。** ", "） "]),
    (mixed_numerals, "rank 1 在第六步（第 2 轮的第一步）之后被杀死。书中的五个样本，共 20 个样本。"
     "第 6 步（第 2 轮的第 1 步）。用一个进程训练 20 个样本。两块 GPU。第一层有 50·30 + 30 个。A.5 节讲第三个", [
         "rank 1 在第六步（第 2 轮的第一步）之后被杀死", "书中的五个样本，共 20 个样本"]),
    (loose_leads, "- **防火墙。** 挡住\n- **IPv6**。主机\n- **选错了网卡**，可能\n1. **张量库** 是\n"
     "- **防火墙**：挡住\n- **卡住**（死锁）：其他\n- **张量**（A.2）是\n- **计算图**记录", [
         "- **防火墙。**", "- **IPv6**。", "- **选错了网卡**，", "1. **张量库**"]),
], ids=["English", "glossary", "spacing", "numerals", "bullet leads"])
def test_a_check_of_the_chinese_text_finds_what_it_should_and_nothing_else(check, text, found):
    assert check(text) == found


def test_the_chinese_sources_use_the_glossarys_terms_spacing_and_bullet_leads():
    """Notebooks are made of these sources; their spacing is checked as built pages."""
    problems = glossary_problems(texts := chinese_texts())
    assert not problems, f"{len(problems)} variants that tools/glossary.zh.toml rules out:\n" + "\n".join(problems)
    found = [f"{where}: {pair}" for where, text in texts.items() if not where.endswith(".ipynb")
             for pair in unspaced(text)]
    assert not found, f"{len(found)} places spaced against the rule:\n" + "\n".join(found)
    leads = [f"{where}: {lead}" for where, text in texts.items() if where.endswith(".md") for lead in loose_leads(text)]
    assert not leads, f"{len(leads)} bullet leads without a full-width colon (**防火墙**：…):\n" + "\n".join(leads)


def test_the_built_chinese_pages_are_in_chinese_and_space_and_count_as_the_rules_say(built_site):
    """As a reader sees them, the tools' sentences filled in, the chrome's words, the 404 page: no English but names,
    glossed terms and code (Authoring, for maintainers, aside), no prose in English only, every page translated."""
    problems = []
    for page in sorted((built_site / CHINESE.prefix).rglob("*.html")):
        if Path(ENGLISH_ONLY).stem in page.parts:  # Authoring, in English: its glossary lists the variants to avoid
            continue
        name, seen = page.relative_to(built_site), words_a_reader_sees(page)
        problems += [f"{name}: English where a Chinese reader expects Chinese: {run!r} in {text[:80]!r}"
                     for kind in ("prose", "titles", "interface") for text in seen[kind] for run in english_runs(text)]
        for text in (text for texts in seen.values() for text in texts):  # diagrams, plots too
            problems += [f"{name}: spaced against the rule: {pair}" for pair in unspaced(text)]
            problems += [f"{name}: counts in digits and in Chinese numerals: {sentence}"
                         for sentence in mixed_numerals(text)]
        problems += [f"{name}: prose in English only: {text[:200]!r}" for text in seen["prose"]
                     if len(re.findall(r"[A-Za-z]", text)) >= 12 and not HAN.search(text)]
        characters = sum(len(HAN.findall(text)) for text in seen["prose"])
        if characters < 300 and page.name != "404.html":
            problems.append(f"{name} has {characters} Chinese characters: is it translated?")
    problems = list(dict.fromkeys(problems))
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_a_term_with_a_gloss_reads_as_the_glossary_says_where_a_reader_first_meets_it(built_site):
    """rank（进程编号）, world size（进程总数）, 轮（epoch）…: the first use in reading order (the nav's pages, what
    the tools wrote included, code aside) is the glossary's `first_use`; a use inside （…） glosses another word."""
    prose = "".join(without(soup_of(built_site, url).select_one("article"), "pre, code, svg, math, script, style, "
                            ".headerlink, [lang]").get_text("") for _, url in nav_pages(CHINESE))
    glosses = [m.span() for m in re.finditer(r"（[^）]*）", prose)]
    problems = []
    for term in (term for term in tomllib.loads(GLOSSARY.read_text())["term"] if "first_use" in term):
        uses = re.finditer(term.get("word", re.escape(term["first_use"].split("（")[0])), prose)
        first = next((use for use in uses if not any(start < use.start() < end for start, end in glosses)), None)
        if first and not prose.startswith(term["first_use"], first.start()):
            problems.append(f"{term['first_use']}: {prose[max(0, first.start() - 30):first.end() + 20]!r}")
    assert not problems, "where a reader first meets these terms, they are not glossed:\n" + "\n".join(problems)


@pytest.mark.parametrize(("english", "chinese"), PAIRS, ids=[zh[1] for _, zh in PAIRS])
def test_a_chinese_page_matches_its_english_page_and_links_to_it(english, chinese, built_site):
    """The same blocks, plots, diagrams, tables and anchors; each in its language, switching to the other; a notebook's
    page links its chapters and Colab."""
    shown, expected = {}, {ENGLISH.language: "/" + english[1], CHINESE.language: "/" + chinese[1]}
    for (source, url), edition in ((english, ENGLISH), (chinese, CHINESE)):
        soup = soup_of(built_site, url)
        assert soup.html["lang"] == edition.language, f"{url or 'index'} is marked <html lang={soup.html['lang']!r}>"
        if source.endswith(".ipynb"):
            box = soup.select_one(".admonition.info")
            assert box.select_one(".admonition-title").get_text() == edition.words["read_along"]
            chapters = [a["href"] for a in box.select("a") if "colab" not in a["href"]]
            assert chapters == [f"../../{Path(page).stem}/" for page in pages.NOTEBOOKS[Path(source).stem]]
            assert box.select_one('a[href^="https://colab.research.google.com/github/"]'), "no Open in Colab link"
        switch = {link["hreflang"]: posixpath.normpath(posixpath.join("/" + url, link["href"])).rstrip("/") + "/"
                  for link in soup.select("a.md-select__link[hreflang]")}
        assert switch == expected, f"on {url or 'index'}, the language switch leads to {switch}"
        shown[source] = {"code and outputs": [text for _, text in blocks(soup)],
                         "plots": [svg["aria-labelledby"] for svg in soup.select(".md-content figure.plot svg")],
                         "diagrams": len(soup.select(".md-content figure.diagram svg")),
                         # Each table's rows, each row's cells, each cell's code (sorted: word order differs).
                         "tables": [[[sorted(code.get_text() for code in cell.select("code"))
                                      for cell in row.select("th, td")] for row in table.select("tr")]
                                    for table in soup.select("article table")],
                         # Written out on the Chinese headings, so that links and anchors land alike.
                         "heading anchors": [h["id"] for h in soup.select("article > :is(h2, h3, h4)[id]")]}
    for what in shown[english[0]]:
        assert shown[chinese[0]][what] == shown[english[0]][what], (
            f"{chinese[0]} does not show the {what} of {english[0]}: change the pages together")


# --- What a reader needs, said once: the Pythons that pyproject.toml allows, and the packages a page's code imports

def article_text(site: Path, url: str) -> str:
    return " ".join(soup_of(site, url).select_one("article").get_text(" ").split())


PINNED = {re.match(r"[\w.-]+", line)[0].lower() for line in (ROOT / "requirements.txt").read_text().splitlines()
          if line.strip() and not line.startswith("#")}
TYPED_PYTHONS = re.compile(r"\b3\.\d+ ?(?:to|至|or newer|or later|或更高|及以上)")
PYTHON_FENCE = re.compile(r"^[ \t]*```(?:python|py)\b[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=EDITIONS)
def test_the_pages_say_the_pythons_of_pyproject_and_the_packages_the_code_imports(edition, built_site):
    """Said once, where it is kept: requires-python (as the Makefile reads it), each download's imports, snippets/."""
    oldest, newest = prerequisites.pythons()
    for path in sorted(edition.docs.glob("*.md")):
        typed = TYPED_PYTHONS.search(text := path.read_text())
        assert not typed, f"{path.relative_to(ROOT)} types {typed[0]!r}: use a mark of tools/prerequisites.py"
        python = [line for body in PYTHON_FENCE.findall(text) for line in body.splitlines()
                  if line.strip() and "--8<--" not in line]
        assert not python, f"{path.relative_to(ROOT)} types Python instead of including a snippet: {python}"
    [needs_table] = [table for table in soup_of(built_site, f"{edition.prefix}setup").select("article table")
                     if [th.get_text() for th in table.select("th")][1:] == [edition.words["needs_column"]]]
    table = {row.a["href"]: row.select("td")[1].get_text() for row in needs_table.select("tbody tr")}
    everything = []
    for page in pages.chapter_pages():
        download = (built_site / "downloads" / pages.download_name(page)).read_text()
        needs = list(dict.fromkeys(name for cell in pages.split_download(download) for name in pages.imports(cell)))
        everything += needs
        assert set(needs) <= PINNED, f"{page} imports a package that requirements.txt does not pin"
        assert f"It needs {ENGLISH.listing(needs)} (pip install {' '.join(needs)})" in " ".join(
            download.split('"""')[1].split()), f"{page}'s download's docstring does not say it needs {needs}"
        box = soup_of(built_site, edition.prefix + Path(page).stem).select_one(".admonition.tip")
        assert box.select_one(f'a[href="../downloads/{pages.download_name(page)}"][download]'), "no download link"
        assert box.select_one(f'a[href="../notebooks/{pages.notebook_of(page)}/"]'), "no link to the notebook"
        assert edition.listing(needs) in box.text, f"{page}'s box does not say it needs {needs}"
        assert table[f"../{Path(page).stem}/"] == edition.listing(needs), f"Setup's row of {page}"
    # Exercise A.2's solution prints the version of every package the pages import (its list is teaching code).
    versions = sections.section_code("exercise_solutions", "a2_versions")
    listed = ast.literal_eval(re.search(r"^packages = (\[.*\])$", versions, re.M)[1])
    assert set(everything) <= set(listed), f"Exercise A.2 leaves out {set(everything) - set(listed)}"
    assert "matplotlib" not in pages.needs(pages.program("exercises.md")), "the exercises print its version only"
    install = f"pip install {' '.join(dict.fromkeys(everything))}"
    supported = f"Python {edition.words['python_range'].format(oldest=oldest, newest=newest)}"
    for url in ("", "setup"):
        assert install in article_text(built_site, edition.prefix + url), f"{url or 'Home'} does not say {install}"
        assert supported in article_text(built_site, edition.prefix + url), f"{url or 'Home'} does not say {supported}"
    # Exercise A.1 names the oldest, and its solution checks for it.
    assert re.search(rf"[(（]{re.escape(oldest)} ", article_text(built_site, f"{edition.prefix}exercises"))
    assert f"sys.version_info >= (3, {oldest.split('.')[1]})" in sections.section_code(
        "exercise_solutions", "a1_python_version")
    _, stdout, _ = run(["make", "-s", "--no-print-directory", "--eval", "pythons: ; @echo $(SUPPORTED_PYTHONS)",
                        "pythons"], 60, cwd=ROOT)  # also under make -C
    assert stdout.split() == [f"3.{minor}" for minor in range(int(oldest[2:]), int(newest[2:]) + 1)]


# --- Learners' pages teach: how the site is made and checked is on Authoring and in README

TARGETS = re.search(r"^\.PHONY: (.*)$", (ROOT / "Makefile").read_text(), re.M)[1].split()
# A reader's own virtual environment (Setup: `source .venv/bin/activate`) is theirs, not ours.
MACHINERY = re.compile(r"\bmake (?:%s)\b|\b(?:snippets|tools|tests|measured)/|pytest|\.venv/bin/(?!activate)|"
                       r"test suite|the tests|测试套件" % "|".join(map(re.escape, TARGETS)))


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=EDITIONS)
def test_learners_pages_and_downloads_name_none_of_our_machinery(edition, built_site):
    named = [f"{url or 'Home'}: {found}" for source, url in nav_pages(edition) if not source.endswith(ENGLISH_ONLY)
             for found in MACHINERY.findall(article_text(built_site, url))]
    named += [f"{path.name}: {found}" for path in sorted((built_site / edition.prefix / "downloads").rglob("*.*"))
              for found in MACHINERY.findall(path.read_text())]  # the pages' code, the checker, the DDP scripts
    assert not named, "a learner's page or download names the repository's machinery:\n" + "\n".join(named)
    # Home: the map of the sections before what the site promises about itself.
    headings = [h2["id"] for h2 in soup_of(built_site, edition.prefix).select("article h2")]
    assert headings.index("the-path-through-the-appendix") < headings.index("what-you-can-rely-on")


# --- The whole site, the sources

ELEMENTS = 3000  # at most, on any page: pages stay light on a phone (a large DOM slows every style and layout)
CODE_COLUMN = 80  # characters of code that Material's code column shows on a 1280 px screen


def test_every_page_is_light_its_links_lead_to_elements_and_its_code_fits_the_column(built_site):
    """Both editions, notebooks too; ids unique; no `markdown` attribute (Python-Markdown's, not HTML); a #fragment
    names an id of its page; outputs and shell may wrap."""
    books = {line.rstrip() for script in BOOK.glob("*.py") for line in script.read_text().splitlines()}
    outlines, problems = {}, []
    for page in sorted(built_site.rglob("*.html")):
        name, soup = page.relative_to(built_site), BeautifulSoup(page.read_text(), "html.parser")
        elements = soup.find_all(True)  # each element's ids (an `<a name>` too) and links (href, SVG's xlink:href)
        problems += [f"{name}: {len(elements)} elements, more than {ELEMENTS}"] if len(elements) > ELEMENTS else []
        ids = [e["id"] for e in elements if e.has_attr("id")] + [e["name"] for e in soup.select("a[name]")]
        problems += [f"{name}: id={id!r} on {count} elements" for id, count in sorted(Counter(ids).items())
                     if count > 1 or not id.strip()]
        problems += [f"{name}: aria-labelledby names {id!r}, which no element has" for e in elements
                     for id in e.get("aria-labelledby", "").split() if id not in ids]
        problems += [f"{name}: <{e.name} markdown={e['markdown']!r}>, not HTML: Python-Markdown leaves a block of HTML "
                     "as it is without it, so remove it from the page" for e in elements if e.has_attr("markdown")]
        outlines[page] = ids, [link for e in elements if e.name != "link" and (link := e.get("href") or e.get(
            "xlink:href")) and not urlsplit(link).netloc and not urlsplit(link).scheme]
        # Code wider than the column, but the book's own lines in A.9.3's listing and diffs of its DDP scripts
        code = [block.pre for block in soup.select(".md-content div.highlight, .jp-InputArea .highlight-ipynb")
                if not {"language-bash", "language-text"} & set(block.get("class", []))]
        problems += [f"{name}: code wider than {CODE_COLUMN} characters: {line}" for pre in filter(None, code)
                     for line in pre.get_text().splitlines() if len(line.rstrip()) > CODE_COLUMN
                     and not {line.rstrip(), line[1:].rstrip()} & books]
    for page, (_, links) in outlines.items():
        for link in links:
            path, fragment = urlsplit(link).path, unquote(urlsplit(link).fragment)
            target = (page.parent / unquote(path)).resolve() if path else page
            target = target / "index.html" if target.is_dir() else target
            if link.endswith("#") or fragment and fragment not in outlines.get(target, ([fragment],))[0]:
                problems.append(f"{page.relative_to(built_site)}: {link} leads to no element")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(sorted(set(problems))[:30])


def test_the_search_index_holds_the_words_in_few_bytes(built_site):
    """UTF-8, not \\u escapes; Chinese words parted (jieba) by a zero-width space only where nothing else parts them."""
    indexes = {prefix: (built_site / prefix / "search" / "search_index.json").read_text() for prefix in ("", "zh/")}
    for prefix, raw in indexes.items():
        escaped = re.findall(r"(?<!\\)\\u(?!00[01])[0-9a-fA-F]{4}", raw)  # the separator, a regex, spells \\u200b out
        assert not escaped, f"{prefix}search/search_index.json escapes {len(escaped)} characters: {escaped[:5]}"
    texts = [entry["text"] for entry in json.loads(indexes[CHINESE.prefix])["docs"]]
    parts = "[\\s，。、；：！？（）《》“”]"  # what parts two words without a zero-width space
    idle = [text[max(0, m.start() - 20):m.end() + 20] for text in texts
            for m in re.finditer(rf"\u200b(?={parts})|(?<={parts})\u200b", text)]
    assert not idle, f"{len(idle)} zero-width spaces beside a space or a punctuation mark, e.g. {idle[:3]}"
    assert any("\u200b数据加载器\u200b" in text for text in texts), "the Chinese text is not split into words"


@pytest.mark.parametrize("edition", EDITIONS.values(), ids=EDITIONS)
def test_a93_shows_the_books_ddp_script_and_ddp_inside_whole(edition, built_site):
    """Blank lines aside, every line of the book's script, trailing comments included; ddp-inside.py whole, as its
    download, with its recorded run under it."""
    soup = soup_of(built_site, f"{edition.prefix}a9-multi-gpu-training")
    title = edition.words["book_script"].format(script="DDP-script.py", parts="")
    shown = "\n".join(text for name, text in blocks(soup) if name.startswith(title)).splitlines()
    book_lines = (BOOK / "DDP-script.py").read_text().splitlines()
    assert [line for line in shown if line.strip()] == [line for line in book_lines if line.strip()]
    section = soup.select_one("#seeing-it-happen")
    fold = section.find_next_sibling("details")  # the program, folded; its run open under it
    code = fold.select_one("div.highlight pre > code").get_text()
    output = fold.find_next_sibling("div", class_="highlight").select_one("pre > code").get_text()
    script = (ROOT / "scripts" / "ddp-inside.py").read_text()
    assert code == script == (built_site / edition.prefix / "downloads" / "scripts" / "ddp-inside.py").read_text()
    assert output == (ROOT / "scripts" / "outputs" / "ddp-inside.txt").read_text()
    assert section.find_next_sibling("p").select_one('a[href$="downloads/scripts/ddp-inside.py"][download]'), \
        "no download link"


# --- The strict build refuses a broken repository

# {problem: (a file of a copy of the repository, a text in it ("": its end, None: the file) and what replaces it, what
# the warnings must say)}. A missing section stops the build at once: planted alone; --strict fails on the warnings.
MISSING_SECTION = {"a section that does not exist": ("docs/a2-understanding-tensors.md", "", (
    '\n```python\n--8<-- "snippets/a2_tensors.py:no_such_section"\n```\n'), ["no_such_section"])}
WARNINGS = {
    "a broken link": ("docs/a3-computation-graphs.md", "",
                      "\nSee [the missing anchor](a4-automatic-differentiation.md#nowhere).\n", ["#nowhere"]),
    "code changed since its output was recorded": (  # edited without re-recording
        "snippets/a6_data_loaders.py", "# --8<-- [end:shuffled_batches]", "x = 1\n# --8<-- [end:shuffled_batches]",
        ["snippets/a6_data_loaders.py, section 'shuffled_batches'", "changed since its output was recorded",
         "make outputs"]),
    "a part of the book's DDP script left out of A.9.3": (
        "docs/a9-multi-gpu-training.md", "<!-- book's DDP-script.py: main -->", "",
        ["a9-multi-gpu-training.md leaves out the book's parts", "'main'"]),
    "a number mark that names no number": ("docs/a9-multi-gpu-training.md", "",
                                           "\nIt has <!-- ddp book.nothing --> examples.\n",
                                           ["a9-multi-gpu-training.md: <!-- ddp book.nothing --> names no number"]),
    "a folded script of ours that is not there": (
        "docs/a9-multi-gpu-training.md", "<!-- ours, folded: ddp-inside.py -->", "<!-- ours, folded: none.py -->",
        ["a9-multi-gpu-training.md: <!-- ours, folded: none.py --> names no file in scripts/"]),
    "a recorded output deleted": ("snippets/outputs/a2_tensors/shape.txt", None, None, [
        "snippets/a2_tensors.py, section 'shape'", "recorded output is missing", "make outputs"]),
    "a recorded output that a sentence no longer fits": (  # re-recorded, and the prose left as it was
        "snippets/outputs/a7_training_loop/probabilities.txt", "0.9949", "0.9849",
        ["docs/a7-typical-training-loop.md:", "no longer bear out", "over 99%"]),
}


@pytest.mark.parametrize("planted", [MISSING_SECTION, WARNINGS], ids=["a missing section", "warnings"])
def test_the_strict_build_stops_on_a_broken_repository_and_names_each_problem(planted, tmp_path):
    copy = shutil.copytree(ROOT, tmp_path / "repo", ignore=shutil.ignore_patterns(  # to break, the repository untouched
        ".*", "__pycache__", "node_modules", "site"))  # less its git, caches, environments, built site
    for path, old, new, _ in planted.values():
        if old is None:
            (copy / path).unlink()
        else:
            text = (copy / path).read_text()
            (copy / path).write_text(text.replace(old, new) if old else text + new)
    status, stderr = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert status != 0, "the build passed with " + ", ".join(planted)
    warnings = "\n".join(line for line in stderr.splitlines() if line.startswith("WARNING"))
    for problem, (*_, named) in planted.items():
        missing = [text for text in named if text not in warnings]
        assert not missing, f"no warning names {problem} ({missing[0]!r}):\n{stderr}"


# --- Published: built as the Pages workflow builds it, a project site under a sub-path (conftest.PUBLISHED)

def test_every_page_is_in_the_sitemaps_and_has_an_edit_link_where_its_source_is(built_site, published_site):
    """Both editions list the same pages; the edit link of a published page, none on a notebook's or a local build."""
    english, chinese = ([source.split("/", 1)[1] for source, _ in nav_pages(e)] for e in (ENGLISH, CHINESE))
    assert chinese == english, f"{CHINESE.config} lists {chinese}, {ENGLISH.config} lists {english}"
    assert [Path(page).stem for page in english if page.endswith(".ipynb")] == list(pages.NOTEBOOKS)
    site_url, edit_link, problems = PUBLISHED["SITE_URL"], re.compile(r'<a href="([^"]*)"[^>]*rel="edit"'), []
    listed = {url for edition in EDITIONS.values() for url in re.findall(
        r"<loc>([^<]+)</loc>", (published_site / SUB_PATH / edition.prefix / "sitemap.xml").read_text())}
    for source, url in (page for pair in PAIRS for page in pair):  # every page of both editions
        if site_url + url not in listed:
            problems.append(f"{source}: not in the sitemaps of a build with SITE_URL={site_url} (read from it?)")
        links = edit_link.findall((published_site / SUB_PATH / url / "index.html").read_text())
        expected = [] if source.endswith(".ipynb") else [f"{PUBLISHED['REPO_URL']}/edit/main/{source}"]
        if links != expected:
            problems.append(f"{url or 'index'}: edit links {links or 'none'}, expected {expected or 'none'}")
        if local := edit_link.findall((built_site / url / "index.html").read_text()):
            problems.append(f"{url or 'index'}: a local build links to {local[0]}, which is not this repository")
    assert not problems, "\n".join(problems)
