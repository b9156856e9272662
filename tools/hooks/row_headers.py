"""A table with an empty corner names its rows in its first column: those cells become row headers, the corner an
empty data cell (screen readers announce an empty header)."""

import re

ROW_NAMED_TABLE = re.compile(r"<table>\s*<thead>\s*<tr>\s*<th></th>.*?</table>", re.S)
FIRST_CELL = re.compile(r"(<tr>\s*)<td([^>]*)>(.*?)</td>", re.S)


def _row_headers(table: re.Match) -> str:
    head, body = table[0].replace("<th></th>", "<td></td>", 1).split("<tbody>", 1)
    return head + "<tbody>" + FIRST_CELL.sub(r'\1<th scope="row"\2>\3</th>', body)


def on_page_content(html: str, /, *, page, config, files) -> str:
    return ROW_NAMED_TABLE.sub(_row_headers, html)
