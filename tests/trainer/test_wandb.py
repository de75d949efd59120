"""wandb logging as openrlbenchmark reads it: two updates offline, then the run's own ``.wandb`` file carries the
config keys it filters on (``env_id``, ``exp_name``, ``seed``) and the metrics per ``global_step``.

Runs in the ``wandb`` tox environment (``tox -e wandb``); skips where wandb is not installed."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

pytest.importorskip("torch")
pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")

from ._util import run_abc, set_args  # noqa: E402

_BLOCK, _HEADER = 32768, 7  # LevelDB log blocks after the 7-byte ":W&B" file header


def read_wandb_records(path: Path) -> list[object]:
    """The protobuf records of an offline ``run-*.wandb`` file (LevelDB log format: 32 KiB blocks of chunks, each
    with a 7-byte header crc32c/length/type; type 1 is a whole record, 2-3-4 first/middle/last pieces)."""
    raw = path.read_bytes()
    assert raw[:4] == b":W&B", path
    pos, piece, out = _HEADER, b"", []
    while pos + _HEADER <= len(raw):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # block trailer padding
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", raw[pos:pos + _HEADER])
        pos += _HEADER
        if n == 0 and kind == 0:  # zero padding up to the block end
            pos += left - _HEADER
            continue
        piece += raw[pos:pos + n]
        pos += n
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(piece)
            out.append(record)
            piece = b""
    return out


@pytest.mark.slow
def test_two_updates_offline_log_the_openrlbenchmark_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    r = run_abc(["train", "--credit", "crbc", *set_args(["updates=2", "wandb=true", "exp_name=crbc-tiny",
                                                         f"out_dir={tmp_path}"])], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir() and (p / "config.toml").exists()]
    (wandb_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    config: dict[str, object] = {}
    history: list[dict[str, object]] = []
    for rec in read_wandb_records(wandb_file):
        kind = rec.WhichOneof("record_type")
        if kind in ("run", "config"):
            items = rec.run.config.update if kind == "run" else rec.config.update
            config.update({it.key: json.loads(it.value_json) for it in items})
        elif kind == "history":
            history.append({it.key or "/".join(it.nested_key): json.loads(it.value_json) for it in rec.history.item})
    assert config["env_id"] == "abc/SokobanText-v0" and config["exp_name"] == "crbc-tiny" and config["seed"] == 0
    rl = [h for h in history if "rl/success" in h]
    assert [h["global_step"] for h in rl] == [1, 2]
    assert all({"rl/kl", "rl/loss", "rl/return", "rl/adv_mean"} <= h.keys() for h in rl)
    evals = [h for h in history if "eval/val_t0.4_success" in h]
    assert [h["global_step"] for h in evals] == [0, 0, 2]  # untrained, after the warm start, after RL
