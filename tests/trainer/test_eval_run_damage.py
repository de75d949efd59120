"""``abc eval --run`` on damaged or moved run folders (#40 item 12): a truncated ``model.safetensors`` is one line
naming it (it was a safetensors traceback), and a run whose recorded ``out_dir`` cannot be written evaluates into
``--out`` (it was refused for a folder it never writes)."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("torch")

from ._util import run_abc, set_args


@pytest.fixture(scope="module")
def made_run(tmp_path_factory):
    """A tiny run with no RL updates (its model exported), made once; each test works on a copy."""
    root = tmp_path_factory.mktemp("made")
    r = run_abc(["train", "--credit", "grpo", *set_args([f"out_dir={root}", "updates=0", "sft.steps=0",
                                                         "eval.references=false"])], cwd=root, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = [p for p in root.iterdir() if (p / "config.toml").exists()]
    return run


@pytest.fixture
def run(made_run, tmp_path):
    copy = tmp_path / made_run.name
    shutil.copytree(made_run, copy)
    return copy


@pytest.mark.timeout(600)
def test_a_truncated_model_file_is_one_line_naming_it(run, tmp_path):
    weights = run / "model" / "model.safetensors"
    os.truncate(weights, 3000)
    out = tmp_path / "elsewhere"
    r = run_abc(["eval", "--run", str(run), "--episodes", "1", "--no-greedy", "--out", str(out)], cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"abc eval: error: {weights} is truncated or damaged (") and "save the model again" in line
    assert not out.exists()


@pytest.mark.timeout(600)
def test_a_run_whose_recorded_out_dir_is_unwritable_evaluates_into_out(run, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    toml = run / "config.toml"
    lines = [f'out_dir = "{blocker / "runs"}"' if line.startswith("out_dir = ") else line
             for line in toml.read_text().splitlines()]
    toml.write_text("\n".join(lines) + "\n")
    out = tmp_path / "elsewhere"
    r = run_abc(["eval", "--run", str(run), "--episodes", "1", "--no-greedy", "--out", str(out)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "records.jsonl").is_file() and blocker.read_text() == "x"
