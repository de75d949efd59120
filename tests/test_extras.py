"""A missing optional dependency ends every command in one line naming the pip extra, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentbench_crbc import extras
from agentbench_crbc.cli import main
from agentbench_crbc.errors import AbcError, MissingDependencyError
from agentbench_crbc.extras import from_import_error, install_hint, require, require_env


def _block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make the install check see ``modules`` as not installed (the test process has them all; the release test
    ``tests/test_release.py`` sees the real thing in a venv without the extras)."""
    real = extras._missing
    monkeypatch.setattr(extras, "_missing", lambda name: name in modules or real(name))


def test_require_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "matplotlib")
    with pytest.raises(MissingDependencyError) as info:
        require("numpy", "matplotlib")
    assert str(info.value) == "matplotlib is not installed; pip install 'agentbench-crbc[leaderboard]'"
    assert isinstance(info.value, AbcError) and isinstance(info.value, ImportError)
    require("numpy")  # installed: no error


def test_torch_hint_points_cpu_users_at_the_cpu_index(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "torch")
    hint = install_hint("torch")
    assert hint.startswith("torch is not installed; pip install 'agentbench-crbc[train]'")
    assert "--index-url https://download.pytorch.org/whl/cpu" in hint


def test_env_families(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "rapidfuzz")
    require_env("sokoban")
    with pytest.raises(MissingDependencyError, match=r"rapidfuzz .*\[webshop\]"):
        require_env("webshop")


def test_from_import_error_maps_submodules_and_ignores_unknown_names() -> None:
    err = from_import_error(ModuleNotFoundError("No module named 'matplotlib.figure'", name="matplotlib.figure"))
    assert err is not None and "[leaderboard]" in str(err)
    assert from_import_error(ModuleNotFoundError("x", name="not_an_optional_dep")) is None


ROOT = Path(__file__).resolve().parents[1]
CASES = [
    (["train", "--credit", "crbc"], ("torch",), "[train]"),
    (["sft"], ("torch",), "[train]"),
    (["train", "--env", "webshop"], ("rapidfuzz",), "[webshop]"),
    (["eval", "--model", "tiny", "--env", "sokoban"], ("torch",), "[train]"),
    (["rollout", "--env", "sokoban", "--policy", "tiny", "--groups", "1"], ("torch",), "[train]"),
    (["rollout", "--env", "webshop", "--groups", "1"], ("rapidfuzz",), "[webshop]"),
    (["rollout", "--env", "alfworld", "--groups", "1"], ("textworld",), "[alfworld]"),
    (["leaderboard", "render", "--records", "leaderboards/records.jsonl"], ("matplotlib",), "[leaderboard]"),
    (["play", "webshop"], ("flask",), "[webshop]"),
]


@pytest.mark.parametrize(("argv", "blocked", "extra"), CASES, ids=[" ".join(c[0][:2]) for c in CASES])
def test_cli_missing_extra_is_one_line(argv: list[str], blocked: tuple[str, ...], extra: str,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    _block(monkeypatch, *blocked)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"abc {argv[0]}: error: " in err and f"pip install 'agentbench-crbc{extra}'" in err


def test_print_config_needs_no_torch(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _block(monkeypatch, "torch")
    assert main(["train", "--print-config"]) == 0
    assert "[credit]" in capsys.readouterr().out


def test_deep_import_error_is_caught_by_main(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import agentbench_crbc.cli.envs as envs

    def boom(args: object) -> int:
        import matplotlib.figure  # noqa: F401

        return 0

    monkeypatch.setattr(envs, "run", boom)
    for name in ("matplotlib", "matplotlib.figure"):  # None in sys.modules: `import` raises ModuleNotFoundError
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["envs"]) == 1
    assert "matplotlib is not installed; pip install 'agentbench-crbc[leaderboard]'" in capsys.readouterr().err


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "hub-unreachable"])
def test_uncached_model_is_one_line_and_no_run_folder(offline: bool, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # an empty cache
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: connection refused at once
    import transformers

    def no_hub(*_a: object, **_k: object) -> None:
        raise AssertionError("the hub was asked (its client retries for about 26 s without network)")

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", no_hub)
    code = main(["train", "--model", "some-org/not-cached-model", "--set", f"out_dir={tmp_path / 'runs'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    # offline, load_config's model.name check answers first; with HF_HUB_OFFLINE unset, rollout.models does
    assert "'some-org/not-cached-model' is not " in err and ("local folder" in err)
    assert not (tmp_path / "runs").exists()


def test_the_remote_pool_needs_only_the_light_remote_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """#51 item 5: `[serve]` brings OpenEnv, which requires gradio (pandas, pillow<13, tomlkit<0.15), fastmcp and
    openai; the trainer's side of a remote env pool needs websockets only, so it has an extra of its own."""
    import tomllib

    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    extras_of = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    assert extras_of["remote"] == ["websockets>=15"]
    assert "agentbench-crbc[remote]" in extras_of["serve"] and any(d.startswith("openenv") for d in extras_of["serve"])
    _block(monkeypatch, "websockets")
    with pytest.raises(MissingDependencyError) as info:
        RemoteEnvPool(["127.0.0.1:1"], 1)
    assert str(info.value) == "websockets is not installed; pip install 'agentbench-crbc[remote]'"
