"""The edition a config builds (tools/editions.py): its site_url, its words in the theme, the header's repository, the
language switch, and in the Chinese edition the English edition's assets."""

import sys
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # mkdocs loads a hook by its path
from tools import editions, pages


def on_config(config):
    edition = editions.of(config)
    words = edition.words
    english_url = config.site_url.removesuffix(edition.prefix)
    config.site_url = urljoin(english_url, edition.prefix)
    # Each edition's root; on each page, partials/alternate.html leads to the same page instead.
    config.extra["alternate"] = [{"name": other.name, "lang": other.language,
                                  "link": urlsplit(english_url).path + other.prefix,
                                  "not_found": other.words["not_found"]}  # for overrides/404.html
                                 for other in editions.EDITIONS.values()]
    for palette, toggle in zip(config.theme["palette"], ("dark_mode", "light_mode")):
        palette["toggle"]["name"] = words[toggle]
    config.extra["words"] = words  # for overrides/*.html
    config.mdx_configs.setdefault("toc", {})["permalink_title"] = words["permalink"]
    # The header's repository button: this site's where REPO_URL says where it is, else the book's code.
    site = config.repo_url.rstrip("/") or None
    config.extra["site_repository"] = site  # for the Colab links (tools/pages.py)
    config.repo_url = site or pages.BOOK_REPOSITORY
    name = urlsplit(config.repo_url).path.strip("/")
    config.repo_name = words["site_repository" if site else "book_repository"].format(name=name)
    config.extra["repository_line"] = words["repository_line"].format(url=site, name=name) if site else ""
    return config


def on_files(files, /, *, config):
    for path in sorted((editions.ENGLISH.docs / "assets").glob("*.*")):
        if not files.get_file_from_path(f"assets/{path.name}"):
            files.append(File.generated(config, f"assets/{path.name}", abs_src_path=str(path)))
    return files


def on_page_context(context: dict, /, *, page, config, nav) -> dict:
    """The language switch (partials/alternate.html): {language: this page in that edition, else its home}."""
    edition, url = editions.of(config), page.url
    if url.endswith(".html"):  # the 404 page, served at any depth: the editions' roots, from site_url
        return context
    to_english_root = "../" * url.count("/") + "../" * edition.prefix.count("/")
    context["counterparts"] = {
        other.language: to_english_root + other.prefix + (url if (other.docs / page.file.src_uri).exists() else "")
        for other in editions.EDITIONS.values()}
    return context
