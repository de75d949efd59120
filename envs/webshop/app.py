"""The local WebShop web app: WebShop's routes over a :class:`Shop`, served on loopback or called in process.

Routes (as WebShop's ``web_agent_site/app.py``)::

    /<session>                                                      search page; POST search_query -> results
    /search_results/<session>/<keywords>/<page>                     10 results per page out of the top 50
    /item_page/<session>/<asin>/<keywords>/<page>/<options>         options as JSON
    /item_sub_page/<session>/<asin>/<keywords>/<page>/<sub_page>/<options>
    /done/<session>/<asin>/<options>                                buys, scores, ends the session

Every page is rendered by the :class:`Shop` methods below; the Flask routes and the in-process text mode
(:meth:`Shop.open`) both call them, so text and browser observations of an episode are identical.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any
from urllib.parse import quote, unquote

import jinja2

from agentbench_crbc.errors import ConfigError, EnvError
from agentbench_crbc.io import json_text

from .catalogue import Catalogue
from .reward import RewardInfo, get_reward
from .search import get_index

__all__ = [
    "LOOPBACK_HOSTS",
    "MAX_QUERY_CHARS",
    "NotFound",
    "ServerHandle",
    "Shop",
    "create_app",
    "parse_options",
    "serve",
    "split_query",
]

PRODUCT_WINDOW = 10
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_SESSION = re.compile(r"^[A-Za-z0-9_\-]{1,80}$")


class NotFound(EnvError):
    """A URL that names no page (unknown session, product or option); the app answers 404."""


def _q(text: str) -> str:
    return quote(text, safe="")


def _keywords_str(keywords: Sequence[str]) -> str:
    return " ".join(keywords)


def _options_str(options: Mapping[str, str]) -> str:
    return json_text(dict(options), separators=(",", ":"), sort_keys=True)


def parse_options(text: str) -> dict[str, str]:
    """The options segment of a URL (a JSON object of strings), else :class:`NotFound`."""
    try:
        options = json.loads(text)
    except (ValueError, RecursionError) as err:  # RecursionError: nested thousands deep
        raise NotFound(f"options {text[:60]!r} are not a JSON object") from err
    if not isinstance(options, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in options.items()):
        raise NotFound("options must map option names to values")
    return options


#: Longer search queries are cut here (a query is a sentence; a megabyte one made a megabyte ``Location`` header).
MAX_QUERY_CHARS = 1000


def split_query(query: str) -> list[str]:
    """Search keywords of a query as WebShop splits them (lower case, on spaces; ``/`` is a separator too); only
    the first :data:`MAX_QUERY_CHARS` characters count."""
    return query[:MAX_QUERY_CHARS].lower().replace("/", " ").split()


class Shop:
    """The WebShop server state: catalogue, shared search index, sessions, and the page renderers.

    :param catalogue: products and goals (from :func:`~.catalogue.get_catalogue`).
    :param show_attrs: show the Attributes tab on item pages (WebShop's ``--attrs``).
    :param max_sessions: sessions kept; the oldest are dropped beyond it.
    """

    def __init__(self, catalogue: Catalogue, *, show_attrs: bool = False, max_sessions: int = 10_000) -> None:
        self.catalogue = catalogue
        self.search_index = get_index(catalogue)
        self.show_attrs = show_attrs
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        loader = jinja2.FileSystemLoader(str(resources.files(__package__).joinpath("templates")))
        self._jinja = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                                         trim_blocks=True, lstrip_blocks=True)
        self._tpl = {n: self._jinja.get_template(f"{n}.html")
                     for n in ("search_page", "results_page", "item_page", "sub_page", "done_page", "error_page")}
        self._weights = [g["weight"] for g in catalogue.goals]
        self._routes = self._url_map()

    # -- sessions ------------------------------------------------------------------------------------------
    def session(self, session_id: str) -> dict[str, Any]:
        """The state of ``session_id``, created on first visit (``..._fixed_<i>`` plays goal ``i``)."""
        if not _SESSION.match(session_id):
            raise NotFound(f"bad session id {session_id[:40]!r} (letters, digits, _ and - only)")
        with self._lock:
            state = self._sessions.get(session_id)
            if state is None:
                goals = self.catalogue.goals
                tail = session_id.rsplit("_", 1)[-1]
                if "fixed" in session_id and tail.isdigit() and int(tail) < len(goals):
                    goal_idx = int(tail)
                else:
                    goal_idx = random.Random(session_id).choices(range(len(goals)), self._weights)[0]
                state = {"goal": goals[goal_idx], "goal_index": goal_idx, "done": False, "reward": None}
                self._sessions[session_id] = state
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
            return state

    def drop_session(self, session_id: str) -> None:
        """Forget ``session_id`` (envs call it on reset and close)."""
        with self._lock:
            self._sessions.pop(session_id, None)

    def reward_of(self, session_id: str) -> RewardInfo | None:
        """The purchase reward of a finished session, None before Buy Now."""
        with self._lock:
            state = self._sessions.get(session_id)
        return None if state is None else state["reward"]

    # -- URLs ----------------------------------------------------------------------------------------------
    @staticmethod
    def index_url(sid: str) -> str:
        return f"/{_q(sid)}"

    @staticmethod
    def search_url(sid: str, keywords: Sequence[str], page: int) -> str:
        return f"/search_results/{_q(sid)}/{_q(_keywords_str(keywords))}/{page}"

    @staticmethod
    def item_url(sid: str, asin: str, keywords: Sequence[str], page: int, options: Mapping[str, str]) -> str:
        return f"/item_page/{_q(sid)}/{_q(asin)}/{_q(_keywords_str(keywords))}/{page}/{_q(_options_str(options))}"

    @staticmethod
    def sub_url(sid: str, asin: str, keywords: Sequence[str], page: int, sub: str,
                options: Mapping[str, str]) -> str:
        return (f"/item_sub_page/{_q(sid)}/{_q(asin)}/{_q(_keywords_str(keywords))}/{page}/{_q(sub)}/"
                f"{_q(_options_str(options))}")

    @staticmethod
    def done_url(sid: str, asin: str, options: Mapping[str, str]) -> str:
        return f"/done/{_q(sid)}/{_q(asin)}/{_q(_options_str(options))}"

    # -- pages ---------------------------------------------------------------------------------------------
    def _product(self, asin: str) -> dict[str, Any]:
        product = self.catalogue.by_asin.get(asin)
        if product is None:
            raise NotFound(f"no product {asin[:20]!r}")
        return product

    def index(self, sid: str) -> str:
        """The search page."""
        state = self.session(sid)
        return self._tpl["search_page"].render(instruction_text=state["goal"]["instruction_text"],
                                               index_url=self.index_url(sid))

    def search_results(self, sid: str, keywords: Sequence[str], page: int) -> str:
        """Page ``page`` of the top-50 BM25 hits for ``keywords``."""
        state = self.session(sid)
        keywords = list(keywords)
        hits = self.search_index.search(keywords)
        start = (page - 1) * PRODUCT_WINDOW
        products = [(self.catalogue.by_asin[a], self.item_url(sid, a, keywords, page, {}))
                    for a in hits[max(start, 0):start + PRODUCT_WINDOW]]
        return self._tpl["results_page"].render(
            instruction_text=state["goal"]["instruction_text"], index_url=self.index_url(sid),
            prev_url=self.search_url(sid, keywords, page - 1) if page > 1 else None,
            next_url=self.search_url(sid, keywords, page + 1) if page * PRODUCT_WINDOW < len(hits) else None,
            keywords=keywords, page=page, total=len(hits), products=products)

    def item_page(self, sid: str, asin: str, keywords: Sequence[str], page: int,
                  options: Mapping[str, str]) -> str:
        """A product page with its options (``options`` are the selected ones)."""
        state = self.session(sid)
        product = self._product(asin)
        groups = []
        for g, (name, values) in enumerate(product["options"].items()):
            rows = [(v, self.item_url(sid, asin, keywords, page, {**options, name: v}), options.get(name) == v,
                     f"radio_{g}_{i}") for i, v in enumerate(values)]
            groups.append((name, rows))
        subs = SUB_PAGES if self.show_attrs else SUB_PAGES[:3]
        return self._tpl["item_page"].render(
            instruction_text=state["goal"]["instruction_text"], index_url=self.index_url(sid),
            prev_url=self.search_url(sid, keywords, page), next_url=None, keywords=keywords, product=product,
            option_groups=groups, sub_pages=[(s, self.sub_url(sid, asin, keywords, page, s, options)) for s in subs],
            buy_url=self.done_url(sid, asin, options))

    def item_sub_page(self, sid: str, asin: str, keywords: Sequence[str], page: int, sub_page: str,
                      options: Mapping[str, str]) -> str:
        """Description, Features, Reviews or Attributes of a product."""
        state = self.session(sid)
        product = self._product(asin)
        if sub_page not in SUB_PAGES:
            raise NotFound(f"no sub page {sub_page[:20]!r}; one of {', '.join(SUB_PAGES)}")
        return self._tpl["sub_page"].render(
            instruction_text=state["goal"]["instruction_text"], index_url=self.index_url(sid),
            prev_url=self.item_url(sid, asin, keywords, page, options), next_url=None, keywords=keywords,
            product=product, sub_page=sub_page)

    def done(self, sid: str, asin: str, options: Mapping[str, str]) -> str:
        """Buy ``asin`` with ``options``: score it against the session's goal and end the session."""
        state = self.session(sid)
        product = self._product(asin)
        info = get_reward(product, state["goal"], self.catalogue.prices[asin], options)
        with self._lock:
            state["done"], state["reward"], state["purchase"] = True, info, (asin, dict(options))
        return self._tpl["done_page"].render(instruction_text=state["goal"]["instruction_text"],
                                             reward=info.reward, asin=asin)

    def error_page(self, code: int, message: str) -> str:
        return self._tpl["error_page"].render(code=code, message=message)

    # -- in-process navigation (text mode) -----------------------------------------------------------------
    def _url_map(self) -> Any:
        from werkzeug.routing import Map, Rule

        return Map([
            Rule("/<session_id>", endpoint="index"),
            Rule("/search_results/<session_id>/<keywords>/<int:page>", endpoint="search_results"),
            Rule("/item_page/<session_id>/<asin>/<keywords>/<int:page>/<path:options>", endpoint="item_page"),
            Rule("/item_sub_page/<session_id>/<asin>/<keywords>/<int:page>/<sub_page>/<path:options>",
                 endpoint="item_sub_page"),
            Rule("/done/<session_id>/<asin>/<path:options>", endpoint="done"),
        ]).bind("127.0.0.1")

    def route(self, path: str) -> tuple[str, dict[str, Any]]:
        """``(endpoint, arguments)`` of a decoded URL path, else :class:`NotFound`."""
        from werkzeug.exceptions import HTTPException

        try:
            endpoint, args = self._routes.match(path, method="GET")
        except HTTPException as err:
            raise NotFound(f"no page at {path[:80]!r}") from err
        return endpoint, args

    def render(self, endpoint: str, args: Mapping[str, Any]) -> str:
        """Render a routed page (the one view function behind both the Flask routes and :meth:`open`)."""
        sid = args["session_id"]
        keywords = split_query(args.get("keywords", ""))
        if endpoint == "index":
            return self.index(sid)
        if endpoint == "search_results":
            return self.search_results(sid, keywords, args["page"])
        options = parse_options(args["options"])
        if endpoint == "item_page":
            return self.item_page(sid, args["asin"], keywords, args["page"], options)
        if endpoint == "item_sub_page":
            return self.item_sub_page(sid, args["asin"], keywords, args["page"], args["sub_page"], options)
        return self.done(sid, args["asin"], options)

    def open(self, url: str, form: Mapping[str, str] | None = None) -> tuple[str, str]:
        """Visit ``url`` (a path as it appears in a page) in process: ``(html, final path)``.

        A search form post redirects to its results page as the app does; no socket is opened.
        """
        path = unquote(url.split("?", 1)[0])
        endpoint, args = self.route(path)
        if endpoint == "index" and form is not None and "search_query" in form:
            keywords = split_query(form["search_query"])
            if keywords:
                path = unquote(self.search_url(args["session_id"], keywords, 1))
                endpoint, args = self.route(path)
        return self.render(endpoint, args), path


def create_app(shop: Shop) -> Any:
    """The Flask app of ``shop`` (WebShop's routes; pages escaped by Jinja autoescape)."""
    import flask

    app = flask.Flask(__name__, static_folder=str(resources.files(__package__).joinpath("static")),
                      static_url_path="/static")
    app.config["SEND_FILE_MAX_AGE_DEFAULT"] = 3600  # the browser keeps CSS/JS/images between page loads

    def view(endpoint: str, **args: Any) -> Any:
        try:
            if endpoint == "index" and flask.request.method == "POST":
                keywords = split_query(flask.request.form.get("search_query", ""))
                if keywords:
                    return flask.redirect(Shop.search_url(args["session_id"], keywords, 1), code=302)
            return shop.render(endpoint, args)
        except NotFound as err:
            return shop.error_page(404, str(err)), 404

    @app.route("/")
    def home() -> Any:
        return flask.redirect("/abc", code=302)

    for rule in shop._routes.map.iter_rules():
        app.add_url_rule(rule.rule, endpoint=rule.endpoint, methods=["GET", "POST"],
                         view_func=lambda _e=rule.endpoint, **kw: view(_e, **kw))
    return app


class ServerHandle:
    """A WSGI server running ``app`` on loopback in a daemon thread; ``url`` is its base URL."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server, self._thread = server, thread
        self.host, self.port = server.server_address[:2]
        self.url = f"http://{self.host}:{self.port}"

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(shop: Shop, host: str = "127.0.0.1", port: int = 0) -> ServerHandle:
    """Serve ``shop`` on ``host:port`` (port 0 = a free port) in a background thread; loopback only.

    :raises ConfigError: for a non-loopback host (the app has no authentication: never expose it).
    """
    from werkzeug.serving import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per request would flood the logs
            pass

    if host not in LOOPBACK_HOSTS:
        raise ConfigError(f"host={host!r}: the WebShop app binds loopback only ({', '.join(LOOPBACK_HOSTS)})")
    server = make_server(host, port, create_app(shop), threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name=f"webshop-{server.server_port}", daemon=True)
    thread.start()
    return ServerHandle(server, thread)
