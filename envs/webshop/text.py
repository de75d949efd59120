"""A WebShop page (HTML) -> its text observation, clickables and search box; the same parser serves both modes.

Visible text nodes are joined with `` [SEP] ``; buttons and product links read ``[button] X [button_]``, option
labels ``[button] X [button_]`` or, when selected, ``[clicked button] X [clicked button_]`` (WebShop's text-rich
markers in its ``[SEP]`` layout). Clickables are keyed by their lower-cased text (options by value), as WebShop's
text env keys ``text_to_clickable``. In browser mode the parser reads Chromium's ``page_source``, so a page gives the
same observation in both modes.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from html.parser import HTMLParser

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


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.hidden = 0
        self.segments: list[str] = []
        self.clickables: list[Clickable] = []
        self.radios: dict[str, tuple[str, str, bool, str]] = {}
        self.form_action: tuple[str, str] | None = None
        self.search_target: str | None = None
        self.selected: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.form_action = (a.get("action", ""), a.get("method", "get").lower())
        elif tag == "input":
            if a.get("id") == "search_input" and self.form_action is not None:
                self.search_target = self.form_action[0]
            elif a.get("type") == "radio":
                self.radios[a.get("id", "")] = (a.get("name", ""), a.get("value", ""), "checked" in a,
                                                a.get("data-url", ""))
        if tag in _VOID:
            return
        hides = tag in _HIDDEN_TAGS or "hidden" in a or "display:none" in a.get("style", "").replace(" ", "")
        self.stack.append((tag, a))
        self.hidden += hides

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.form_action = None
        if tag in _VOID:
            return
        while self.stack:
            open_tag, a = self.stack.pop()
            self.hidden -= open_tag in _HIDDEN_TAGS or "hidden" in a or \
                "display:none" in a.get("style", "").replace(" ", "")
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.hidden or not self.stack:
            return
        text = " ".join(data.split())
        if not text:
            return
        tag, a = self.stack[-1]
        if tag == "button":
            action, method = self.form_action or ("", "get")
            self.clickables.append(Clickable(text.lower(), "button", action, method))
            self.segments.append(f"[button] {text} [button_]")
        elif tag == "a" and "product-link" in a.get("class", "").split():
            self.clickables.append(Clickable(text.lower(), "link", a.get("href", "")))
            self.segments.append(f"[button] {text} [button_]")
        elif tag == "label" and a.get("for") in self.radios:
            name, value, checked, url = self.radios[a["for"]]
            self.clickables.append(Clickable(value.lower(), "option", url, "get", name))
            if checked:
                self.selected.append((name, value))
                self.segments.append(f"[clicked button] {text} [clicked button_]")
            else:
                self.segments.append(f"[button] {text} [button_]")
        else:
            self.segments.append(text)


@functools.lru_cache(maxsize=4096)
def parse_page(html: str) -> Page:
    """Parse one page (cached: the G rollouts of a group revisit the same pages)."""
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return Page(
        text=to_printable(" [SEP] ".join(parser.segments)),
        clickables=tuple(parser.clickables),
        search_target=parser.search_target,
        selected=tuple(parser.selected),
    )
