"""``abc train`` on bad input (#24 item 11): one line naming what and where, exit 2, no traceback, nothing written."""

from __future__ import annotations

import pytest

from agentbench_crbc.cli import main


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def _one_line(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(("setup", "argv", "words"), [
    (lambda d: (d / "bad.toml").write_bytes(b"updates = 3\n\xff\xfe = 1\n"), ["--config", "bad.toml"],
     ["bad.toml", "not UTF-8"]),
    (lambda d: (d / "deep.toml").write_text("a = " + "[" * 3000 + "]" * 3000 + "\n"), ["--config", "deep.toml"],
     ["deep.toml", "nested"]),
    (lambda d: (d / "folder").mkdir(), ["--config", "folder"], ["folder", "is a folder"]),
    (None, ["--set", "out_dir=runs\0x"], ["'out_dir'", "NUL"]),
    (None, ["--set", "model.name=/tmp"], ["'model.name'", "/tmp", "holds no model"]),
    (None, ["--set", "model.name="], ["'model.name'", "empty"]),
    (None, ["--set", "model.lora_targets=[1,2]"], ["'model.lora_targets'", "a list of strings"]),
    (None, ["--set", "env.id=CartPole-v1"], ["'env.id'", "CartPole-v1"]),
])
@pytest.mark.parametrize("print_config", [True, False])
def test_bad_train_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, setup, argv, words,
                                                               print_config):
    monkeypatch.chdir(tmp_path)
    if setup is not None:
        setup(tmp_path)
    before = _files(tmp_path)
    rc = main(["train", *argv, "--set", f"out_dir={tmp_path / 'runs'}" if "out_dir" not in argv[-1] else argv[-1],
               *(["--print-config"] if print_config else [])])
    assert rc == 2
    line = _one_line(capsys)
    for w in words:
        assert w in line, line
    assert _files(tmp_path) == before  # no run folder made, nothing written
