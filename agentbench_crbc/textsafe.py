"""Text that records, plugins or MDP files supply, made inert for the format it is written in (Markdown, CSV)."""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["csv_safe", "md_code", "md_text"]

#: Markdown that could make a link, an image, raw HTML, code, emphasis (bold marks a table's best) or a new cell.
_MD_SPECIAL = re.compile(r"[\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
#: Spreadsheets run a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def md_text(text: Any) -> str:
    """``text`` as inert Markdown on one line: ``\\ ` * [ ] | ~`` and word-edge ``_`` backslash-escaped (no link,
    image, code span, emphasis or table cell can start), ``& < >`` HTML-escaped (no tag), line breaks as spaces."""
    one_line = " ".join(str(text).splitlines())
    return html.escape(_MD_SPECIAL.sub(lambda m: "\\" + m.group(0), one_line), quote=False)


def md_code(text: Any) -> str:
    """``text`` as one Markdown code span (shown literally), fenced with more backticks than it holds."""
    one_line = " ".join(str(text).splitlines())
    run = max((len(m) for m in re.findall(r"`+", one_line)), default=0)
    fence = "`" * (run + 1)
    pad = " " if one_line.startswith("`") or one_line.endswith("`") or not one_line.strip() else ""
    return f"{fence}{pad}{one_line}{pad}{fence}"


def csv_safe(text: Any) -> Any:
    """A string cell that a spreadsheet would run as a formula (``= + - @``, tab, CR first), prefixed with ``'``;
    anything else as it is."""
    return "'" + text if isinstance(text, str) and text.startswith(_FORMULA_START) else text
