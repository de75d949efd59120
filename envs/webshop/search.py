"""BM25 product search (bm25s): one read-only index per catalogue per process, shared by every env and server."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from .shared import SharedPerOwner

if TYPE_CHECKING:
    from .catalogue import Catalogue

__all__ = ["SEARCH_RETURN_N", "SearchIndex", "get_index"]

SEARCH_RETURN_N = 50  # WebShop returns the top 50 hits, 10 per page
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def _document(product: dict) -> str:
    options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product["options"].items())
    bullets = product["BulletPoints"][0] if product["BulletPoints"] else ""
    return " ".join((product["Title"], product["Description"], bullets, options))


class SearchIndex:
    """Lucene-style BM25 over title, description, first bullet point and options (as WebShop indexes them)."""

    def __init__(self, catalogue: Catalogue) -> None:
        import bm25s

        self._bm25s = bm25s
        self.asins = tuple(p["asin"] for p in catalogue.products)
        tokens = bm25s.tokenize([_document(p) for p in catalogue.products], stopwords="en", show_progress=False)
        self._retriever = bm25s.BM25()
        self._retriever.index(tokens, show_progress=False)
        self._vocab = frozenset(self._retriever.vocab_dict)
        from bm25s.stopwords import STOPWORDS_EN

        self._stop = frozenset(STOPWORDS_EN)

    def search(self, keywords: list[str], k: int = SEARCH_RETURN_N) -> list[str]:
        """The asins of the best ``k`` products for ``keywords`` (score > 0; ties in catalogue order)."""
        # bm25s.tokenize's own rule (lower case, \w\w+ tokens, English stop words), without its per-call overhead
        query = [t for t in _TOKEN.findall(" ".join(keywords).lower()) if t in self._vocab and t not in self._stop]
        if not query:
            return []
        scores = self._retriever.get_scores(query)
        hits = np.flatnonzero(scores > 0)
        order = hits[np.lexsort((hits, -scores[hits]))][:k]
        return [self.asins[i] for i in order]


_INDEXES: SharedPerOwner[Catalogue, SearchIndex] = SharedPerOwner(lambda catalogue: SearchIndex(catalogue))


def get_index(catalogue: Catalogue) -> SearchIndex:
    """The shared index of ``catalogue`` (built on first use, about 30 ms per 1,000 products)."""
    return _INDEXES.get(catalogue)
