"""docs/training.md's short-run command and table name real config keys (so the list cannot go stale)."""

from __future__ import annotations

import re
from pathlib import Path

from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.schema import TrainConfig

SECTION = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text().split(
    "## A short run")[1].split("\n## ")[0]


def test_the_short_run_command_resolves_to_a_short_config():
    command = re.search(r"```bash\n(.*?)```", SECTION, re.S).group(1)
    cfg = load_config(overrides=re.findall(r"--set (\S+)", command))
    assert cfg.updates == 3 and cfg.sft.steps == 4 and cfg.rollout.groups * cfg.rollout.group_size == 8


def test_every_key_in_the_table_is_a_config_key():
    keys = re.findall(r"`([a-z_]+(?:\.[a-z_]+)?)`", "".join(line for line in SECTION.splitlines(True)
                                                              if line.startswith("| `")))
    assert len(keys) >= 15
    cfg = TrainConfig()
    for key in keys:
        obj = cfg
        for part in key.split("."):
            assert hasattr(obj, part), f"docs/training.md names {key!r}, which is not a config key"
            obj = getattr(obj, part)
