"""A WebShop page (HTML) -> its text observation, clickables and search box; the same parser serves both modes.

Visible text nodes are joined with `` [SEP] ``; buttons and product links read ``[button] X [button_]``, option
labels ``[button] X [button_]`` or, when selected, ``[clicked button] X [clicked button_]`` (WebShop's text-rich
markers in its ``[SEP]`` layout). Clickables are keyed by their lower-cased text (options by value), as WebShop's
text env keys ``text_to_clickable``. In browser mode the parser reads Chromium's ``page_source``, so a page gives the
same observation in both modes.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Clickable", "Page", "parse_page", "to_printable"]

_HIDDEN_TAGS = frozenset(("head", "title", "script", "style", "template", "noscript"))
_VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"))
_NON_PRINTABLE = re.compile(r"[^\x20-\x7e\n]")


def to_printable(text: str) -> str:
    """ASCII-fold ``text`` (real product data has accents and symbols) so it fits ``string.printable``."""
    if text.isascii() and not _NON_PRINTABLE.search(text):
        return text
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NON_PRINTABLE.sub(" ", folded)


@dataclass(frozen=True, slots=True)
class Clickable:
    """One clickable element: its key (lower-cased text or option value), kind and where it leads."""

    key: str
    kind: str  # "button" | "link" | "option"
    target: str  # URL path the element navigates to ("" if unknown)
    method: str = "get"
    option_name: str = ""


@dataclass(frozen=True, slots=True)
class Page:
    """What the agent sees on one page."""

    text: str
    clickables: tuple[Clickable, ...]
    search_target: str | None  # form action of the search box, None when the page has none
    selected: tuple[tuple[str, str], ...]  # (option name, value) pairs shown as clicked

    def clickable(self, key: str) -> Clickable | None:
        """The clickable with lower-cased key ``key`` (the last one, as WebShop's dict keeps), or None."""
        found = None
        for c in self.clickables:
            if c.key == key:
                found = c
        return found

    @property
    def has_search_bar(self) -> bool:
        return self.search_target is not None


# One token of HTML: comment | doctype | raw-text element (skipped whole) | tag | text | a stray "<".
_TOKEN = re.compile(
    r"<!--.*?-->|<[!?][^>]*>|<(script|style|template|noscript)\b[^>]*>.*?</\1\s*>"
    r"|<(/?)([A-Za-z][A-Za-z0-9-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>|([^<]+)|<",
    re.S | re.I,
)
_ATTR = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]+))?""")


def _attrs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in _ATTR.findall(text):
        if value[:1] in ("'", '"'):
            value = value[1:-1]
        out.setdefault(name.lower(), html.unescape(value))
    return out


def _hides(tag: str, a: dict[str, str]) -> bool:
    return tag in _HIDDEN_TAGS or "hidden" in a or "display:none" in a.get("style", "").replace(" ", "")


def _walk(source: str) -> tuple[list[str], list[Clickable], str | None, list[tuple[str, str]]]:
    """Visible text segments, clickables, search form action and selected options of a page (one pass)."""
    stack: list[tuple[str, dict[str, str]]] = []
    hidden = 0
    segments: list[str] = []
    clickables: list[Clickable] = []
    radios: dict[str, tuple[str, str, bool, str]] = {}
    form: tuple[str, str] | None = None
    search_target: str | None = None
    selected: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(source):
        raw_tag = m.group(3)
        if raw_tag is not None:
            tag = raw_tag.lower()
            if m.group(2):  # end tag
                if tag == "form":
                    form = None
                if tag in _VOID:
                    continue
                while stack:
                    open_tag, a = stack.pop()
                    hidden -= _hides(open_tag, a)
                    if open_tag == tag:
                        break
                continue
            a = _attrs(m.group(4)) if m.group(4).strip() else {}
            if tag == "form":
                form = (a.get("action", ""), a.get("method", "get").lower())
            elif tag == "input":
                if a.get("id") == "search_input" and form is not None:
                    search_target = form[0]
                elif a.get("type") == "radio":
                    radios[a.get("id", "")] = (a.get("name", ""), a.get("value", ""), "checked" in a,
                                               a.get("data-url", ""))
            if tag in _VOID or m.group(4).rstrip().endswith("/"):
                continue
            stack.append((tag, a))
            hidden += _hides(tag, a)
            continue
        data = m.group(5)
        if data is None or hidden or not stack:
            continue
        text = " ".join(html.unescape(data).split())
        if not text:
            continue
        tag, a = stack[-1]
        if tag == "button":
            action, method = form or ("", "get")
            clickables.append(Clickable(text.lower(), "button", action, method))
            segments.append(f"[button] {text} [button_]")
        elif tag == "a" and "product-link" in a.get("class", "").split():
            clickables.append(Clickable(text.lower(), "link", a.get("href", "")))
            segments.append(f"[button] {text} [button_]")
        elif tag == "label" and a.get("for") in radios:
            name, value, checked, url = radios[a["for"]]
            clickables.append(Clickable(value.lower(), "option", url, "get", name))
            if checked:
                selected.append((name, value))
                segments.append(f"[clicked button] {text} [clicked button_]")
            else:
                segments.append(f"[button] {text} [button_]")
        else:
            segments.append(text)
    return segments, clickables, search_target, selected


@functools.lru_cache(maxsize=256)
def parse_page(source: str) -> Page:
    """Parse one page (a small cache: going back to a page of the same session does not parse it again)."""
    segments, clickables, search_target, selected = _walk(source)
    return Page(
        text=to_printable(" [SEP] ".join(segments)),
        clickables=tuple(clickables),
        search_target=search_target,
        selected=tuple(selected),
    )
