"""`abc serve`: the OpenEnv protocol as a client sees it, the limits, the token, and no leaked env after abuse."""

from __future__ import annotations

import asyncio
import http.client
import importlib.util
import json
import os
import random
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from agentbench_crbc.cli import main
from tests.rollout.servers import Server, need_serve

need_serve()

import websockets  # noqa: E402
import websockets.exceptions  # noqa: E402


@pytest.fixture(scope="module")
def server():
    s = Server("--env", "sokoban", "--max-sessions", "8", "--max-message-bytes", "65536", "--idle-timeout", "30")
    s.url  # noqa: B018  (waits for the startup line)
    yield s
    s.stop()


async def _session(url: str, *messages: dict | str, headers: dict | None = None, origin: str | None = None
                   ) -> list[dict]:
    out = []
    async with websockets.connect(url, additional_headers=headers, origin=origin) as ws:
        for m in messages:
            await ws.send(m if isinstance(m, str) else json.dumps(m))
            out.append(json.loads(await ws.recv()))
    return out


def test_startup_line_names_the_url_and_reset_gives_the_in_process_task(server):
    assert server.line.startswith("abc serve: sokoban (abc/SokobanText-v0) at ws://127.0.0.1:")
    from agentbench_crbc.rollout.hosting.workers import EnvRecipe

    env = EnvRecipe("abc/SokobanText-v0").make()
    obs, info = env.reset(seed=7)
    obs2, r, term, trunc, info2 = env.step("left")
    env.close()
    first, second = asyncio.run(_session(server.url, {"type": "reset", "data": {"seed": 7}},
                                         {"type": "step", "data": {"text": "left"}}))
    o = first["data"]["observation"]
    assert o["text"] == obs and o["admissible_actions"] == info["admissible_actions"]
    assert o["subtask"] == info["subtask"] and o["success"] is False and o["action_valid"] is True
    assert o["anchor"] == {"__tuple__": [info["anchor"][0], {"__tuple__": list(info["anchor"][1])}]}
    s = second["data"]
    assert s["observation"]["text"] == obs2 and s["reward"] == r and s["done"] == (term or trunc)
    assert s["observation"]["action_valid"] == info2["action_valid"]


def test_bad_requests_get_one_clear_error_each(server):
    from agentbench_crbc.rollout.hosting.serve import MAX_WIRE_ACTION_CHARS

    answers = asyncio.run(_session(
        server.url, "not json", {"type": "fly"}, {"type": "step", "data": {"text": "up"}},
        {"type": "reset", "data": {"seed": -1}}, {"type": "reset", "data": {"seed": 0, "colour": "red"}},
        {"type": "reset", "data": {"env_id": "abc/ALFWorld-v0"}}, {"type": "reset", "data": {"seed": 0}},
        {"type": "step", "data": {"txt": "up"}}, {"type": "step", "data": {"text": "x" * (MAX_WIRE_ACTION_CHARS + 1)}},
        {"type": "step", "data": {"text": "up"}}, {"type": "reset", "data": {"seed": 0, "expert": "false"}}))
    errs = [a["data"] for a in answers]
    assert [a["type"] for a in answers] == ["error"] * 6 + ["observation"] + ["error"] * 2 + ["observation", "error"]
    assert "expert must be true or false, got 'false'" in errs[10]["message"]
    assert errs[0]["code"] == "INVALID_JSON" and "Unknown message type: fly" in errs[1]["message"]
    assert errs[2]["message"] == "no episode is running in this session: send a reset first"
    assert "seed must be a non-negative integer" in errs[3]["message"]
    assert "unknown reset field(s) colour" in errs[4]["message"]
    assert "this server serves abc/SokobanText-v0, not abc/ALFWorld-v0" in errs[5]["message"]
    assert errs[7]["code"] == errs[8]["code"] == "VALIDATION_ERROR"
    assert not any("Traceback" in json.dumps(e) for e in errs)
    assert server.wait_idle()["active_sessions"] == 0


def test_reset_options_are_refused_unless_the_family_opens_them(server, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # an env reading it would block until the step timeout
    level = "#####\n#@$.#\n#####"
    answers = asyncio.run(_session(
        server.url, {"type": "reset", "data": {"seed": 0, "options": {"game_file": "/dev/zero"}}},
        {"type": "reset", "data": {"seed": 0, "options": {"game_file": str(fifo)}}},
        {"type": "reset", "data": {"seed": 0, "options": {"level": level}}},
        {"type": "reset", "data": {"seed": 0, "options": {}}}, {"type": "reset", "data": {"seed": 0}}))
    assert [a["type"] for a in answers] == ["error"] * 3 + ["observation"] * 2
    for a, key in zip(answers, ["game_file", "game_file", "level"], strict=False):
        assert a["data"]["message"] == (f"reset option(s) '{key}' are not open to clients: sokoban takes none "
                                        "(choose the task by seed)")
    assert answers[3]["data"]["observation"]["text"] == answers[4]["data"]["observation"]["text"]
    assert server.wait_idle()["active_sessions"] == 0


def test_client_options_take_only_declared_keys_with_plain_values():
    from agentbench_crbc.rollout.hosting.serve import MAX_OPTION_CHARS, client_options

    assert client_options(None, (), "x") is None and client_options({}, ("k",), "x") is None
    assert client_options({"k": 3, "t": "pick"}, ("k", "t"), "x") == {"k": 3, "t": "pick"}
    for bad in ({"path": "/etc/passwd"}, {"k": 1, "size": 10**6}):
        with pytest.raises(ValueError, match=r"are not open to clients: x takes only k$"):
            client_options(bad, ("k",), "x")
    for value in (True, 1.5, 1 << 31, -(1 << 31) - 1, "x" * (MAX_OPTION_CHARS + 1), [1], {"__tuple__": [1]}, None,
                  "\ud800"):
        with pytest.raises(ValueError, match="must be an integer or a string of at most"):
            client_options({"k": value}, ("k",), "x")
    with pytest.raises(ValueError, match="options must be an object"):
        client_options([1, 2], ("k",), "x")


def _family_module(name: str):
    """The family module of ``envs/NAME`` (imported as a package module: families import their siblings)."""
    return importlib.import_module(f"agentbench_crbc.envs.{name}.family")


def test_families_open_only_task_ids_to_clients():
    from agentbench_crbc.errors import PluginError
    from agentbench_crbc.family import EnvFamily, EnvId

    assert _family_module("webshop").WEBSHOP.client_reset_options == ("goal_index",)  # range-checked by the env
    assert _family_module("alfworld").ALFWORLD.client_reset_options == ()  # game_file is a path, index unbounded
    assert _family_module("sokoban").SOKOBAN.client_reset_options == ()  # a level text is any size
    ids = (EnvId("x/X-v0", "m:X", 5),)
    for bad in ("goal_index", ("",), (3,)):
        with pytest.raises(PluginError, match="client_reset_options must be a tuple of option names"):
            EnvFamily("x", "X", ids, "x/X-v0", client_reset_options=bad)


async def _abuse(url: str, http: str, n: int, rng: random.Random) -> dict[str, int]:
    """``n`` abusive requests, six at a time: malformed frames, bad fields, oversized messages, unknown sessions,
    clients vanishing mid-episode, more sessions than allowed, oversized HTTP bodies."""
    seen: dict[str, int] = {}
    sem = asyncio.Semaphore(6)

    def count(kind: str) -> None:
        seen[kind] = seen.get(kind, 0) + 1

    async def one(i: int) -> None:
        kind = rng.choice(["json", "type", "step-first", "seed", "field", "action", "vanish", "oversize",
                           "session", "http-body", "http-route", "long-action", "vanish-mid-step"])
        async with sem:
            try:
                if kind in ("http-body", "http-route"):
                    await asyncio.to_thread(_http_abuse, http, kind)
                elif kind == "session":
                    async with websockets.connect(url + "?session_id=nope") as ws:
                        await ws.recv()
                else:
                    async with websockets.connect(url, max_size=None) as ws:
                        if kind in ("vanish", "vanish-mid-step", "action", "long-action"):
                            await ws.send(json.dumps({"type": "reset", "data": {"seed": i}}))
                            await ws.recv()
                        msg = {"json": "{{", "type": json.dumps({"type": 7}),
                               "step-first": json.dumps({"type": "step", "data": {"text": "up"}}),
                               "seed": json.dumps({"type": "reset", "data": {"seed": "many"}}),
                               "field": json.dumps({"type": "reset", "data": {"options": [1, 2]}}),
                               "action": json.dumps({"type": "step", "data": {"text": ["up"]}}),
                               "long-action": json.dumps({"type": "step", "data": {"text": "up" * 3000}}),
                               "oversize": json.dumps({"type": "reset", "data": {"seed": 0, "pad": "x" * 70000}}),
                               "vanish": None,
                               "vanish-mid-step": json.dumps({"type": "step", "data": {"text": "down"}})}[kind]
                        if msg is not None:
                            await ws.send(msg)
                        if kind.startswith("vanish"):
                            ws.transport.abort()  # no close frame: the client just disappears
                        else:
                            await ws.recv()
            except (websockets.exceptions.ConnectionClosed, OSError):
                pass  # the server closed an oversized or hopeless connection
            count(kind)

    await asyncio.gather(*(one(i) for i in range(n)))

    async def hold() -> list[str]:  # more sessions at once than --max-sessions
        conns = [await websockets.connect(url) for _ in range(12)]
        try:
            replies = await asyncio.gather(*(_first_reply(c) for c in conns))
        finally:
            for c in conns:
                await c.close()
        return replies

    replies = await hold()
    seen["capacity"] = sum("CAPACITY_REACHED" in r for r in replies)
    return seen


async def _first_reply(ws) -> str:
    try:
        return str(await asyncio.wait_for(ws.recv(), 1.0))  # a refused session is told so at once
    except TimeoutError:
        pass
    except websockets.exceptions.ConnectionClosed:
        return "closed"
    try:
        await ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        return str(await asyncio.wait_for(ws.recv(), 30))
    except websockets.exceptions.ConnectionClosed:
        return "closed"


def _http_abuse(http: str, kind: str) -> None:
    if kind == "http-body":
        req = urllib.request.Request(http + "/mcp", data=b"{" * 70000, method="POST",
                                     headers={"content-type": "application/json"})
    else:
        req = urllib.request.Request(http + "/reset", data=b"{}", method="POST",
                                     headers={"content-type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30).close()
    except urllib.error.HTTPError as exc:
        exc.close()
        assert exc.code in (404, 405, 413), exc.code


@pytest.mark.slow
def test_a_thousand_abusive_requests_leave_no_session_and_no_env_process(server):
    before = server.status()
    seen = asyncio.run(_abuse(server.url, server.http, 1000, random.Random(0)))
    assert sum(seen.values()) >= 1000 and seen["capacity"] >= 4
    after = server.wait_idle(timeout=30)
    assert after["active_sessions"] == 0 and after["child_processes"] == 0, (before, after, seen)
    assert "Traceback" not in server.stderr()  # every bad request was answered, none crashed a handler
    # and it still serves
    first, second = asyncio.run(_session(server.url, {"type": "reset", "data": {"seed": 0}},
                                         {"type": "step", "data": {"text": "up"}}))
    assert first["type"] == second["type"] == "observation"
    assert server.wait_idle()["active_sessions"] == 0


@pytest.mark.slow
def test_idle_sessions_are_closed_and_big_observations_refused():
    s = Server("--env", "sokoban", "--idle-timeout", "1", "--max-observation-bytes", "40")

    async def go() -> tuple[dict, Any, float, dict]:
        async with websockets.connect(s.url) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            big = json.loads(await ws.recv())
            t0 = time.monotonic()
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:  # the server closes the socket
                await asyncio.wait_for(ws.recv(), 20)
            return big, closed.value.rcvd, time.monotonic() - t0, await asyncio.to_thread(s.status)

    try:
        big, close, idle, status = asyncio.run(go())
    finally:
        s.stop()
    o = big["data"]["observation"]
    assert big["data"]["done"] and "over this server's limit of 40" in o["error"] and o["text"] == ""
    assert 0.9 < idle < 20 and close.code == 4408
    assert close.reason == "idle for 1 s: the session is closed; reconnect and reset"
    assert status["active_sessions"] == 0 and status["child_processes"] == 0


def _raw(server: Server, method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> int:
    """The status a request with exactly these headers (``Host`` included, as given) gets."""
    conn = http.client.HTTPConnection("127.0.0.1", int(server.http.rsplit(":", 1)[1]), timeout=30)
    try:
        conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for k, v in {**headers, **({"Content-Length": str(len(body))} if body is not None else {})}.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


_UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def test_browser_pages_and_rebound_names_are_refused(server):
    port = server.http.rsplit(":", 1)[1]
    # a web page elsewhere: its WebSocket, its cross-site POST
    with pytest.raises(websockets.exceptions.InvalidStatus) as e:
        asyncio.run(_session(server.url, {"type": "reset", "data": {"seed": 0}}, origin="http://evil.example"))
    assert e.value.response.status_code == 403
    assert _raw(server, "GET", "/ws", {**_UPGRADE, "Origin": "null"}) == 403
    mcp = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}).encode()
    assert _raw(server, "POST", "/mcp", {"Content-Type": "text/plain"}, mcp) == 415  # needs no CORS preflight
    assert _raw(server, "POST", "/mcp", {"Content-Type": "application/json", "Origin": "https://evil.example"},
                mcp) == 403
    assert _raw(server, "GET", "/status", {"Origin": "http://localhost.evil.example"}) == 403
    # DNS rebinding: evil.example now resolves to 127.0.0.1, the browser sends its name
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{int(port) + 1}", "127.0.0.1", "", "[::1",
                 f"localhost:{port}0", f"127.0.0.1:{port}:{port}"):
        assert _raw(server, "GET", "/status", {"Host": host}) == 421, host
        assert _raw(server, "GET", "/ws", {**_UPGRADE, "Host": host}) == 403, host
    assert server.status()["active_sessions"] == 0
    # this machine's names and pages are served
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        assert _raw(server, "GET", "/status", {"Host": host}) == 200, host
        assert _raw(server, "GET", "/ws", {**_UPGRADE, "Host": host, "Origin": "http://localhost:3000"}) == 101
    assert _raw(server, "GET", "/status", {"Origin": "http://127.0.0.1:5173"}) == 200
    first, = asyncio.run(_session(server.url, {"type": "reset", "data": {"seed": 0}}, origin="http://[::1]:8080"))
    assert first["type"] == "observation"
    assert _raw(server, "POST", "/mcp", {"Content-Type": "application/json; charset=utf-8"}, b"{}") == 404
    # the project's own clients: no Origin, the Host of the URL they are given
    from agentbench_crbc.rollout.hosting.openenv_client import AbcEnvClient
    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    with RemoteEnvPool([f"localhost:{port}", server.url], 2) as pool:
        assert all(r.error is None for r in pool.reset({0: 0, 1: 1}).values())
    with AbcEnvClient(server.url).sync() as env:
        assert env.reset(seed=0).observation.text == first["data"]["observation"]["text"]
    assert server.wait_idle()["active_sessions"] == 0
    assert "Traceback" not in server.stderr()


def test_allowed_origins_and_host_names_are_served(capsys):
    s = Server("--env", "sokoban", "--allow-origin", "http://App.example:3000/", "--allow-host", "Proxy.LAN")
    try:
        assert _raw(s, "GET", "/status", {"Origin": "http://app.example:3000"}) == 200
        assert _raw(s, "GET", "/status", {"Origin": "http://app.example:3001"}) == 403
        assert _raw(s, "GET", "/status", {"Host": "proxy.lan"}) == 200  # a proxy's name, any port
        assert _raw(s, "GET", "/ws", {**_UPGRADE, "Host": "proxy.lan:443", "Origin": "http://app.example:3000"}) == 101
        assert _raw(s, "GET", "/status", {"Host": "evil.example"}) == 421
    finally:
        s.stop()
    assert main(["serve", "--env", "sokoban", "--allow-origin", "evil.example"]) == 2
    assert "--allow-origin 'evil.example' must be an origin like http://" in capsys.readouterr().err
    assert main(["serve", "--env", "sokoban", "--allow-host", "a/b"]) == 2
    assert "--allow-host 'a/b' must be a host name or address" in capsys.readouterr().err


def test_host_headers_parse_strictly():
    from agentbench_crbc.rollout.hosting.serve import parse_host

    assert parse_host("LocalHost:8000") == ("localhost", 8000) and parse_host("[::1]:80") == ("::1", 80)
    assert parse_host("example.org") == ("example.org", None) and parse_host("[::1]") == ("::1", None)
    for bad in ("", ":80", "::1", "[::1", "[::1]80", "a:b", "a:8000:1", "a:\u0661", "a:123456", "a b", "a:"):
        assert parse_host(bad) is None, bad


def test_token_guards_every_route():
    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    s = Server("--env", "sokoban", env={"ABC_SERVE_TOKEN": "s3cret"})
    try:
        assert "token required" in s.line or "token required" in (s.url and s.line)
        with pytest.raises(websockets.exceptions.InvalidStatus):
            asyncio.run(_session(s.url, {"type": "reset", "data": {}}))
        with pytest.raises(websockets.exceptions.InvalidStatus):
            asyncio.run(_session(s.url, {"type": "reset", "data": {}}, headers={"Authorization": "Bearer nope"}))
        with pytest.raises(urllib.error.HTTPError) as e:
            s.status()
        assert e.value.code == 401
        e.value.close()
        assert s.status(token="s3cret")["active_sessions"] == 0
        with RemoteEnvPool([s.url], 1, token="s3cret") as pool:
            assert pool.reset({0: 0})[0].error is None
        with RemoteEnvPool([s.url], 1, token="wrong") as pool:
            assert "no remote env server answered" in pool.reset({0: 0})[0].error
    finally:
        s.stop()


def test_binding_beyond_loopback_needs_a_flag_and_a_token(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("ABC_SERVE_TOKEN", raising=False)
    assert main(["serve", "--env", "sokoban", "--host", "0.0.0.0"]) == 2
    assert "--host 0.0.0.0 reaches beyond this machine; pass --allow-remote" in capsys.readouterr().err
    assert main(["serve", "--env", "sokoban", "--host", "0.0.0.0", "--allow-remote"]) == 2
    assert "needs a token: set ABC_SERVE_TOKEN or pass --token-file" in capsys.readouterr().err
    empty = tmp_path / "token"
    empty.write_text("\n")
    assert main(["serve", "--env", "sokoban", "--host", "0.0.0.0", "--allow-remote", "--token-file",
                 str(empty)]) == 2
    assert "is empty" in capsys.readouterr().err
    assert main(["serve", "--env", "sokobam"]) == 2
    assert "unknown environment 'sokobam'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["serve", "--env", "sokoban", "--max-sessions", "0"])
    assert e.value.code == 2 and "'0' is out of range; give an integer in [1, 4096]" in capsys.readouterr().err


def test_a_session_lives_as_long_as_its_websocket_and_its_env_process_is_counted(server):
    server.wait_idle()
    # no session without a connection: HTTP /mcp (openenv/session/create), the Task API, the simulation routes
    mcp = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}).encode()
    for method, path, body in (("POST", "/mcp", mcp), ("GET", "/list_environments", None),
                               ("POST", "/sokoban/tasks", b"{}"), ("POST", "/sokoban/num_tasks", b"{}"),
                               ("GET", "/sokoban/splits", None), ("POST", "/reset", b"{}"), ("GET", "/state", None),
                               ("GET", "/mcp", None)):
        assert _raw(server, method, path, {"Content-Type": "application/json"}, body) in (404, 405), path
    assert server.status()["active_sessions"] == 0

    async def go() -> tuple[dict, dict, dict, Any, dict, dict]:
        async with websockets.connect(server.url) as owner:
            await owner.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            await owner.recv()
            during = await asyncio.to_thread(server.status)
            await owner.send(json.dumps({"type": "mcp", "data": {  # reaches sessions by id: refused
                "jsonrpc": "2.0", "id": 1, "method": "openenv/session/close", "params": {"session_id": "x"}}}))
            mcp_reply = json.loads(await owner.recv())
            async with websockets.connect(f"{server.url}?session_id={uuid.uuid4()}") as other:  # attach by id
                refused = json.loads(await other.recv())
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    await other.recv()
            await owner.send(json.dumps({"type": "step", "data": {"text": "up"}}))
            stepped = json.loads(await owner.recv())
            return during, mcp_reply, refused, closed.value.rcvd, stepped, await asyncio.to_thread(server.status)

    during, mcp_reply, refused, close, stepped, still = asyncio.run(go())
    assert during["active_sessions"] == 1 and during["child_processes"] == 1  # the env process forked for it
    assert mcp_reply["type"] == "error" and mcp_reply["data"]["message"].startswith("mcp messages are not served")
    assert refused["type"] == "error" and refused["data"]["message"].startswith(
        "attaching to a session by id is not served: each WebSocket is one session") and close.code == 1008
    assert stepped["type"] == "observation" and still["active_sessions"] == 1
    after = server.wait_idle()
    assert after["active_sessions"] == 0 and after["child_processes"] == 0


def test_a_lone_surrogate_is_answered_and_the_session_kept(server):
    # OpenEnv could not encode its own reply to these ("surrogates not allowed") and ended the session
    answers = asyncio.run(_session(
        server.url, {"type": "reset", "data": {"seed": 0}}, r'{"type": "step", "data": {"text": "\ud800"}}',
        r'{"type": "\udfff"}', {"type": "step", "data": {"text": "up"}}))
    assert [a["type"] for a in answers] == ["observation", "error", "error", "observation"]
    assert all(a["data"]["message"].startswith("the message holds a lone surrogate") for a in answers[1:3])
    assert answers[3]["data"]["observation"]["text"]  # the same episode goes on
    assert server.wait_idle()["active_sessions"] == 0


def test_start_up_refuses_what_could_never_serve(capsys, monkeypatch, tmp_path):
    import agentbench_crbc.rollout.hosting.serve as serve_mod

    def started(*a: Any, **k: Any) -> None:
        raise AssertionError("abc serve started")

    monkeypatch.setattr(serve_mod, "serve", started)
    monkeypatch.delenv("ABC_SERVE_TOKEN", raising=False)
    lines = {}
    for flags in (["--set", "bogus_kw=1"], ["--set", "chromium=/bin/sh"], ["--set", "max_steps=1e12"],
                  ["--set", "size=100000"]):
        assert main(["serve", "--env", "sokoban", *flags]) == 2, flags
        lines[flags[-1]] = capsys.readouterr().err.strip()
    assert lines["bogus_kw=1"].startswith("abc serve: error: --set: abc/SokobanText-v0 has no option 'bogus_kw';")
    assert lines["chromium=/bin/sh"].startswith("abc serve: error: --set: abc/SokobanText-v0 has no option 'chromium'")
    assert "max_steps" in lines["max_steps=1e12"] and "size" in lines["size=100000"]
    for value in ("inf", "1e300", "1e7", "nan", "0"):
        with pytest.raises(SystemExit) as e:
            main(["serve", "--env", "sokoban", "--step-timeout", value])
        assert e.value.code == 2
        lines[value] = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --step-timeout: 'inf' is not a finite number" in lines["inf"]
    assert "argument --step-timeout: '1e7' is out of range" in lines["1e7"]
    for name, data in (("two", b"abc\ndef\n"), ("spaces", b" abc \n"), ("latin1", b"\xffabc\n"),
                       ("blank", b" \n")):
        (tmp_path / name).write_bytes(data)
        assert main(["serve", "--env", "sokoban", "--token-file", str(tmp_path / name)]) == 2, name
        lines[name] = capsys.readouterr().err.strip()
    assert lines["two"].endswith("holds more than one line; a token is one line")
    assert "a token is printable ASCII without spaces" in lines["spaces"]
    assert "not UTF-8 text (byte 0" in lines["latin1"] and lines["blank"].endswith("is empty; write the token into it")
    monkeypatch.setenv("ABC_SERVE_TOKEN", " x ")
    assert main(["serve", "--env", "sokoban"]) == 2
    lines["env"] = capsys.readouterr().err.strip()
    assert lines["env"].startswith("abc serve: error: $ABC_SERVE_TOKEN: a token is printable ASCII without spaces")
    assert all(len(v.splitlines()) == 1 and "Traceback" not in v for v in lines.values()), lines
    (tmp_path / "ok").write_text("s3cret\n")  # the file's own newline is no part of the token
    with pytest.raises(AssertionError, match="abc serve started"):
        main(["serve", "--env", "sokoban", "--token-file", str(tmp_path / "ok")])


#: Messages OpenEnv answered with Python's own exception text before ending the session (#54 item 2).
ODD_MESSAGES = {"[]": "not an array", "null": "not null", "1": "not a number", '"x"': "not a string",
                "true": "not a boolean", "-2.5e3": "not a number", "[{}]": "not an array",
                '{"a": ' * 500 + "1" + "}" * 500: "nested over 32 levels deep",
                "[" * 500 + "]" * 500: "not an array",
                '{"type": "step", "data": {"text": ' + "9" * 4301 + "}}": "integer of over 4,300 digits",
                '{"type": "reset", "data": {"seed": 0, "options": ' + "[" * 40 + "]" * 40 + "}}":
                    "nested over 32 levels deep"}


def test_odd_messages_are_answered_in_the_servers_words_and_the_session_goes_on(server):
    texts = list(ODD_MESSAGES)
    answers = asyncio.run(_session(server.url, {"type": "reset", "data": {"seed": 0}}, *texts,
                                   {"type": "step", "data": {"text": "up"}}, {"type": "state"}))
    assert answers[0]["type"] == "observation" and answers[-2]["type"] == "observation"  # the same episode goes on
    assert answers[-1]["type"] == "state" and answers[-1]["data"]["step_count"] == 1
    for text, answer in zip(texts, answers[1:-2], strict=True):
        msg = answer["data"]["message"]
        assert answer["type"] == "error" and answer["data"]["code"] == "INVALID_JSON", (text[:40], answer)
        assert ODD_MESSAGES[text] in msg and "object has no attribute" not in msg and "recursion" not in msg
    assert server.wait_idle()["active_sessions"] == 0


@pytest.mark.parametrize("episode_id", [{"a": 1}, [1], 7, 1.5, True, "x" * 257])
def test_a_bad_episode_id_is_refused_at_reset(server, episode_id):
    # #54 item 3: accepted, after which every `state` answered pydantic's "Invalid message" until the next reset
    answers = asyncio.run(_session(server.url, {"type": "reset", "data": {"seed": 0, "episode_id": episode_id}},
                                   {"type": "reset", "data": {"seed": 0, "episode_id": "run-1/ep-3"}},
                                   {"type": "state"}))
    assert answers[0]["type"] == "error" and answers[0]["data"]["message"].startswith(
        "episode_id must be a string of at most 256 characters (or left out), got ")
    assert answers[1]["type"] == "observation" and answers[2]["data"]["episode_id"] == "run-1/ep-3"
