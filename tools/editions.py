"""The site's two editions, English and Simplified Chinese, and the words the tools write in each (tools/words.toml,
each phrase beside its translation). Both show the same code and recorded outputs: a page in docs-zh/ has the English
page's name and includes the same snippet sections in the same order; only the prose differs."""

import re
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT, tomllib


@dataclass(frozen=True)
class Edition:
    language: str  # theme.language in its MkDocs config, and <html lang>
    name: str  # in the language switch
    config: str  # its MkDocs config file
    docs: Path
    prefix: str  # where it is built and published, under the English site's root
    words: dict[str, str]

    @property
    def notebooks(self) -> Path:
        return self.docs / "notebooks"

    def device(self, environment: dict) -> str:
        """Where a recording ran, from the environment that tools/record.py stores, in this language."""
        return environment["gpu"] or self.words["on_mps" if environment["mps"] else "cpu_only"].format(**environment)

    def recorded(self, environment: dict) -> str:
        return self.words["recorded"].format(torch=environment["torch"], device=self.device(environment))

    def listing(self, items: list[str]) -> str:
        """"a, b and c" in this language."""
        *rest, last = items
        return self.words["list_and"].format(rest=self.words["list"].join(rest), last=last) if rest else last

    def spaced(self, sentence: str) -> str:
        """A generated sentence as this edition writes it: in Chinese, a space where a Chinese character meets a
        Latin letter or a digit, none between Chinese characters (与 {base} 的差异 filled with 书中: 与书中的差异)."""
        if self is ENGLISH:
            return sentence
        sentence = re.sub(r"(?<=[\u4e00-\u9fff，。：；、）]) +(?=[\u4e00-\u9fff（])", "", sentence)
        return re.sub(r"(?<=[\u4e00-\u9fff])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[\u4e00-\u9fff])", " ", sentence)


WORDS = tomllib.loads((ROOT / "tools" / "words.toml").read_text())  # {key: {"en": ..., "zh": ...}}
ENGLISH = Edition("en", "English", "mkdocs.yml", ROOT / "docs", "",
                  {key: words["en"] for key, words in WORDS.items()})
CHINESE = Edition("zh", "简体中文", "mkdocs.zh.yml", ROOT / "docs-zh", "zh/",
                  {key: words["zh"] for key, words in WORDS.items() if "zh" in words})
EDITIONS = {edition.language: edition for edition in (ENGLISH, CHINESE)}
GLOSSARY = ROOT / "tools" / "glossary.zh.toml"  # the Chinese edition's terms
GLOSSARY_MARK = "<!-- glossary -->"  # where the Authoring page shows them


def of(config) -> Edition:  # the edition a MkDocs config builds, by its theme's language
    return EDITIONS[config.theme["language"]]
