"""The site's two editions, English and Simplified Chinese, and the words the tools write in each. Both show the
same code and recorded outputs: a page in docs-zh/ has the English page's name and includes the same snippet
sections in the same order; only the prose differs."""

import re
from dataclasses import dataclass
from pathlib import Path

from tools import ROOT


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


ENGLISH = Edition("en", "English", "mkdocs.yml", ROOT / "docs", "", {
    "output": "Output",
    "output_varies": "Output · yours may differ",  # the title of an output with machine-dependent lines
    "output_note": "{reasons} ({recorded})",  # under it: what they depend on, where they were recorded
    "recorded": "recorded with torch {torch}, {device}",
    "cpu_only": "CPU only, {cores} cores",  # the device of a recording
    "on_mps": "Apple silicon (MPS)",
    "reasons_joiner": "; ",  # between the reasons under an output
    "list": ", ",  # between the names in a list
    "output_on_gpu": "Output on a GPU",
    "differs": "Differs from the book",  # the title of a note from snippets/book_differences.toml
    # A code block's title: the book's cell it shows (tools/book.py finds it), or ours and what it adds.
    "book_cell": "Book · {notebook}, cell {cells}",
    "book_cells": "Book · {notebook}, cells {cells}",
    "changed": " · changed, see the note below",
    "ours": "Ours · {adds}",
    # The DDP scripts on A.9.3 (tools/script_diff.py): the book's parts, its torchrun script's changes, ours as diffs.
    "book_script": "Book · {script} · {parts}",
    "book_torchrun_diff": "Book · DDP-script-torchrun.py, as a diff of DDP-script.py · {parts}",
    "colon": ": ",
    "the_books": "the book's",
    "script_diff": "{script}: {part}, as a diff of {base}",
    "script_same": "Unchanged from {base}: {parts}.",
    "book_column": "In the book",
    "page_column": "On this site",
    "why_column": "What differs, and why",
    "earlier_code": "Code from earlier sections",  # the title of the collapsed block at the top of a page
    "earlier_code_cell": "**Code from earlier sections**, so that this part runs on its own:",
    "run_it_yourself": "Run it yourself",
    "download": "Download {script}, this page's code as one script that runs alone with {packages} installed",
    "list_and": "{rest} and {last}",
    # What a reader installs (tools/prerequisites.py): the supported Pythons, the packages by page.
    "python_range": "{oldest} to {newest}",
    "needs_column": "Needs",
    "notebook": "the executed notebook {notebook}",
    "or": "; or ",
    "full_stop": ".",
    "colab": ", or [open it in Colab]({url})",
    "colab_book": ", or [open the book's own notebook in Colab]({url})",  # where this site's repository is unknown
    "read_along": "Read along",
    "read_along_text": "The text and cells below are those of {chapters}, where each one is explained.",
    "read_along_colab": ' <a href="{url}">Open it in Colab</a>, or download it with the button above.',
    "read_along_colab_book": (' Download it with the button above, or <a href="{url}">open the book\'s own '
                              "notebook in Colab</a>."),
    # The header's repository button (repo_name), and the line on Home and Authoring that links this site's.
    "site_repository": "This site's source · {name}",
    "book_repository": "The book's code · {name}",
    "repository_line": "The site's source is at [{name}]({url}); report a mistake or ask a question in "
                       "[its issues]({url}/issues).",
    "not_found": "Looking for a page of the English edition? Start from its home page:",  # on the other's 404 page
    # The theme's words that Material does not translate: the palette toggle, overrides/*.html.
    "dark_mode": "Switch to dark mode",
    "light_mode": "Switch to light mode",
    "download_notebook": "Download the notebook",
    "page_not_found": "Page not found",
    "page_not_found_text": "Nothing lives at this address; the page may have moved. Search for it, or pick it "
                           "from the contents below.",
    "search_the_site": "Search the site",
    "go_home": "Go to the home page",
    "contents": "Contents",
    "made_with": "Made with {generator}",  # the footer's
    "permalink": "Permanent link",  # a heading's link
    "code-part1": "Appendix A, code part 1: A.1 to A.8",  # the notebooks' titles
    "code-part2": "Appendix A, code part 2: A.9 GPU training",
    "exercise-solutions": "Appendix A, exercise solutions",
    "chapter_range": "{first} to {last}",
    # The footer of a figure measured by `make bench` (tools/bench.py), on a page and in README (with the command).
    "measured_on": "*Measured on {date}: {machine}{note}.*",
    "measured_by": "*Measured by `{command}` on {date}: {machine}{note}.*",
    "at_commit": " at commit {commit}",
    "bench_machine": "{system}, {cpu}, {cores} cores, {gpu}, Python {python}, torch {torch}",
    "no_gpu": "no GPU",
    "bench_matmul": ("On the machine below the product took {cpu_us:.0f} µs with {threads} torch threads "
                     "({cpu_1_thread_us:.0f} µs with one){gpu}."),
    "bench_matmul_gpu": "; on the {gpu} it took {gpu_us:.1f} µs",
    "bench_matmul_no_gpu": "; no GPU was available",
    "bench_ddp_header": "| Processes | Launcher | Wall time, {epochs} epochs | Start-up | One training step |",
    "bench_plain": "plain `python`",
    "bench_no_ddp": "1 (no DDP)",
    "bench_ddp_summary": ("Two processes take {wall} as long as one plain process, start-up included, and a "
                          "training step costs {step} as much."),
    "bench_ddp_note": "; medians of {runs} launches per row",
    "bench_launcher": "{ratio} ({launcher})",
    "bench_and": " and ",
    # README's table of figures (tools/bench.py); README is in English only.
    "readme_cold": ("cold `mkdocs build --strict` (new process, empty notebook cache) against a plain Material "
                    "build (no plugins, no hooks, same `docs/`)"),
    "readme_repeat": "repeated `mkdocs build --strict` (notebook cache warm) against the plain build",
    "readme_rebuild": "rebuild as `mkdocs serve` does after an edit, against the plain build in the same process",
    "readme_largest": "largest page (HTML)",
    "readme_tests": "`make test`",
    "readme_ddp_wall": "DDP, 2 processes against 1 plain process, start-up included",
    "readme_ddp_step": "DDP, one step with 2 processes against one plain step",
    "readme_matmul": "Exercise A.4's 100×200 @ 200×300 on the CPU",
    # The table of torch versions that check-appendix-a.py passed with (tools/checker.py).
    "checker_page": "Page",
    "checker_same": "the same",
    "checker_machine": "the same (machine-dependent lines differ)",
    "checker_different": "differs in `{key}`",
    "checker_failed": "failed: {error}",
    "checker_all": "Every page printed what the site shows with torch {versions}.",
    "checker_earlier": "{result}, on an earlier version of the page",
    "checker_changed": "Some pages have changed since they were last checked here: for those, the table "
                       "says what an earlier version of the page printed.",
    "checked_by": "*Checked on {date}: {machine}, Python {python}, torch {torch}; every page in "
                  "{seconds:.0f} s.*",
    "checked_on": "{system}, {cores} cores, {gpu}",
    "notebook_intro": ("The text and code of {chapters} of the executable book, with the outputs recorded when "
                       "it ran. Run the cells from the top: later cells use what earlier ones defined. It needs "
                       "{packages}."),
    # What each plot shows (its alt text and caption), by the section whose code draws it.
    "plot:a6_data_loaders:plot_toy_data": "The three training examples of class 0 (filled dots) and its test "
        "example (a ring) lie together at the upper left, near feature 1 = −1 and feature 2 = 3; the two training "
        "examples of class 1 and its test example lie at the lower right, near (2.5, −1.5). The classes are far apart.",
    "plot:a7_training_loop:plot_loss": "The training loss over the 6 training steps (2 batches in each of 3 "
        "epochs): it falls from 0.75 after the first step to almost 0 after the sixth, fastest between steps 3 and 4.",
    "plot:a7_training_loop:plot_decision_regions": "The class the model predicts at each point of the plane: a "
        "boundary rising gently from lower left to upper right splits it into class 0 (blue) at the upper left and "
        "class 1 (orange) at the lower right; every training example lies inside its own class's region, far from "
        "the boundary.",
})

CHINESE = Edition("zh", "简体中文", "mkdocs.zh.yml", ROOT / "docs-zh", "zh/", {
    "output": "输出",
    "output_varies": "输出 · 你的结果可能不同",
    "output_note": "{reasons}（{recorded}）",
    "recorded": "记录于 torch {torch}，{device}",
    "cpu_only": "仅 CPU，{cores} 核",
    "on_mps": "Apple 芯片（MPS）",
    "reasons_joiner": "；",
    "list": "、",
    "output_on_gpu": "在 GPU 上的输出",
    "differs": "与书中不同",
    "book_cell": "书中 · {notebook}，第 {cells} 个单元格",
    "book_cells": "书中 · {notebook}，第 {cells} 个单元格",
    "changed": " · 有改动，见下方说明",
    "ours": "本站 · {adds}",
    "book_script": "书中 · {script} · {parts}",
    "book_torchrun_diff": "书中 · DDP-script-torchrun.py 与 DDP-script.py 的差异 · {parts}",
    "colon": "：",
    "the_books": "书中",
    "script_diff": "{script}：{part}，与 {base} 的差异",
    "script_same": "与 {base} 相同：{parts}。",
    "book_column": "书中",
    "page_column": "本站",
    "why_column": "有何不同，为什么",
    "earlier_code": "前面各节的代码",
    "earlier_code_cell": "**前面各节的代码**：放在这里，是为了让这一部分能够独立运行：",
    "run_it_yourself": "自己动手运行",
    "download": "下载 {script}：本页的全部代码合成的一个脚本，装好 {packages} 即可独立运行",
    "list_and": "{rest} 和 {last}",
    "python_range": "{oldest} 至 {newest}",
    "needs_column": "需要安装",
    "notebook": "已执行的 Notebook {notebook}",
    "or": "；或",
    "full_stop": "。",
    "colab": "，或[在 Colab 中打开]({url})",
    "colab_book": "，或[在 Colab 中打开原书自己的 Notebook]({url})",
    "read_along": "对照阅读",
    "read_along_text": "下面的文字和代码单元格来自 {chapters}，每一段在那里都有讲解。",
    "read_along_colab": ' <a href="{url}">在 Colab 中打开</a>，或用上方的按钮下载。',
    "read_along_colab_book": '可以用上方的按钮下载它，或<a href="{url}">在 Colab 中打开原书自己的 Notebook</a>。',
    "site_repository": "本站源代码 · {name}",
    "book_repository": "原书代码 · {name}",
    "repository_line": "本站的源代码在 [{name}]({url})；发现错误或有问题，请到[它的 issue 页面]({url}/issues)提出。",
    "not_found": "在找中文版的页面？请从中文版首页开始：",
    "dark_mode": "切换到深色模式",
    "light_mode": "切换到浅色模式",
    "download_notebook": "下载这个 Notebook",
    "page_not_found": "找不到页面",
    "page_not_found_text": "这个地址上没有页面，它可能已经移到别处。你可以搜索它，或者从下面的目录中找到它。",
    "search_the_site": "搜索本站",
    "go_home": "回到首页",
    "contents": "目录",
    "made_with": "本站使用 {generator} 构建",
    "permalink": "永久链接",
    "code-part1": "附录 A 代码，第 1 部分：A.1 至 A.8",
    "code-part2": "附录 A 代码，第 2 部分：A.9 GPU 训练",
    "exercise-solutions": "附录 A 练习参考答案",
    "chapter_range": "{first} 至 {last}",
    "measured_on": "*于 {date} 测得：{machine}{note}。*",
    "at_commit": "（提交 {commit}）",
    "bench_machine": "{system}，处理器（{cpu}），{cores} 核，{gpu}，Python {python}，torch {torch}",  # （）: a name
    "no_gpu": "无 GPU",
    "bench_matmul": ("在下面这台机器上，这次乘法用 {threads} 个 torch 线程耗时 {cpu_us:.0f} µs"
                     "（单线程 {cpu_1_thread_us:.0f} µs）{gpu}。"),
    "bench_matmul_gpu": "；在 {gpu} 上耗时 {gpu_us:.1f} µs",
    "bench_matmul_no_gpu": "；当时没有可用的 GPU",
    "bench_ddp_header": "| 进程数 | 启动方式 | 训练 {epochs} 轮的总耗时 | 启动耗时 | 一个训练步 |",
    "bench_plain": "普通 `python`",
    "bench_no_ddp": "1（不用 DDP）",
    "bench_ddp_summary": "含启动在内，两个进程的总耗时是单个普通进程的 {wall}；一个训练步的开销是它的 {step}。",
    "bench_ddp_note": "；每行取 {runs} 次启动的中位数",
    "bench_launcher": "{ratio}（{launcher}）",
    "bench_and": " 和 ",
    "checker_page": "页面",
    "checker_same": "相同",
    "checker_machine": "相同（仅依赖于机器的行不同）",
    "checker_different": "不同：`{key}`",
    "checker_failed": "运行失败：{error}",
    "checker_all": "使用 torch {versions} 时，每个页面打印的都与本站显示的相同。",
    "checker_earlier": "{result}（检查的是该页面的较早版本）",
    "checker_changed": "有些页面在上次检查之后又改动过：对这些页面，表中给出的是其较早版本打印的结果。",
    "checked_by": "*于 {date} 检查：{machine}，Python {python}，torch {torch}；"
                  "全部页面用时 {seconds:.0f} 秒。*",
    "checked_on": "{system}，{cores} 核，{gpu}",
    "notebook_intro": ("本书可执行版中 {chapters} 的文字和代码，附带运行时记录的输出。请从上往下依次运行各单元格："
                       "后面的单元格会用到前面定义的内容。需要安装 {packages}。"),
    "plot:a6_data_loaders:plot_toy_data": (
        "类别 0 的三个训练样本（实心点）和一个测试样本（圆圈）聚在左上方，特征 1 约为 −1、特征 2 约为 3；"
        "类别 1 的两个训练样本和一个测试样本聚在右下方，约在 (2.5, −1.5)。两个类别相距很远。"),
    "plot:a7_training_loop:plot_loss": (
        "训练损失随 6 个训练步（3 轮，每轮 2 个批次）的变化：从第 1 步的 0.75 降到第 6 步的几乎为 0，"
        "第 3 步到第 4 步之间下降最快。"),
    "plot:a7_training_loop:plot_decision_regions": (
        "模型在平面上每一点预测的类别：一条从左下到右上略微上升的分界线把平面分成两块，左上方是类别 0（蓝色），"
        "右下方是类别 1（橙色）；每个训练样本都落在自己类别的区域内，离分界线很远。"),
})

EDITIONS = {edition.language: edition for edition in (ENGLISH, CHINESE)}
GLOSSARY = ROOT / "tools" / "glossary.zh.toml"  # the Chinese edition's terms
GLOSSARY_MARK = "<!-- glossary -->"  # where the Authoring page shows them


def of(config) -> Edition:  # the edition a MkDocs config builds, by its theme's language
    return EDITIONS[config.theme["language"]]
