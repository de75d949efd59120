"""Where a run stands (:class:`RunState`, each checkpoint's ``state.json``) and resuming a run folder from its
newest intact checkpoint, with the KL reference it needs."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import read_json
from .checkpoint import find_checkpoint, set_aside, trusted_reference, verify_folder
from .config import TrainConfig, config_hash, flatten, to_dict
from .distributed import Dist, broadcast_object
from .metrics import MetricsLogger
from .schema import ENV_PLACEMENT_KEYS
from .validations import Validations

__all__ = ["RESUME_MUTABLE", "RunState", "check_edited", "check_outputs", "check_resume", "check_run_folder",
           "find_resume", "finished_summary", "fixed_config", "reference_source"]

#: The config keys a resume may change (``--set`` on ``abc train --resume``): how long the run goes on, how often it
#: checkpoints and validates, and where and how it logs. Every other key must match the run's saved config.
RESUME_MUTABLE = ("updates", "max_minutes", "sft.max_minutes", "checkpoint_every", "keep_checkpoints",
                  "eval.every", "out_dir", "exp_name", "progress", "tensorboard", "wandb", "wandb_mode",
                  "wandb_project", "threads", *ENV_PLACEMENT_KEYS)


def fixed_config(cfg: TrainConfig) -> dict[str, Any]:
    """``{dotted key: value}`` of the keys a resume must keep (all but :data:`RESUME_MUTABLE`)."""
    fixed = {k: v for k, v in flatten(to_dict(cfg)).items() if k not in RESUME_MUTABLE}
    if not fixed.get("deterministic"):  # off (the default): as saved by a run from before the key existed
        fixed.pop("deterministic", None)
    return fixed


def _changed(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The keys whose values differ from ``a`` (older) to ``b`` (newer); ``optim.kl_coef`` set to 0 is no change
    (the documented way on past a lost KL reference: the run goes on without the KL term)."""
    out = {k for k in a.keys() | b.keys() if a.get(k, "<unset>") != b.get(k, "<unset>")}
    if b.get("optim.kl_coef") == 0:
        out.discard("optim.kl_coef")
    return sorted(out)


def check_run_folder(run_dir: Path) -> Path:
    """The run folder's ``config.toml``: it must be a regular file of the folder, not a link to one elsewhere.

    :raises ConfigError: not a run folder, or ``config.toml`` is a symlink or not a regular file.
    """
    toml = run_dir / "config.toml"
    if toml.is_symlink():
        raise ConfigError(f"--resume: {toml} is a symlink (to {os.readlink(toml)}); a run folder keeps its own "
                          "config.toml: copy the file in place of the link")
    if not toml.exists():
        raise ConfigError(f"--resume: {run_dir} is not a run folder (no config.toml)")
    if not toml.is_file():
        raise ConfigError(f"--resume: {toml} is not a regular file")
    return toml


@dataclass(slots=True)
class RunState:
    """Where a run stands, as each checkpoint's ``state.json`` holds it: the stage, its step counters and seconds
    spent, the validations so far (tag -> aggregates) and the config a resume must keep."""

    stage: str
    """``"sft"`` (the imitation warm start) or ``"rl"``."""
    sft_step: int = 0
    update: int = 0
    evals: Validations = field(default_factory=Validations)
    """The validations so far, by tag."""
    config_hash: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    """``{dotted key: value}`` of the keys a resume must keep (:func:`fixed_config`)."""
    sft_seconds: float = 0.0
    rl_seconds: float = 0.0
    sft_optimizer: bool = False
    """Whether the checkpoint holds the warm start's optimizer state."""

    @classmethod
    def start(cls, cfg: TrainConfig) -> RunState:
        """The state of a new run of ``cfg``."""
        return cls(stage="sft" if cfg.sft.steps > 0 else "rl", config_hash=config_hash(cfg),
                   config=fixed_config(cfg))

    def to_json(self) -> dict[str, Any]:
        """The ``state.json`` object."""
        return {**dataclasses.asdict(dataclasses.replace(self, evals=Validations())), "evals": self.evals.to_json()}

    @classmethod
    def from_json(cls, state: Any, ckpt: Path) -> RunState:
        """A checkpoint's ``state.json`` object, checked field by field (older checkpoints may lack the later
        fields: they take their defaults; unknown keys are ignored).

        :raises ConfigError: one line naming the checkpoint and the bad field.
        """
        where = f"--resume: {ckpt.name}/state.json"
        if not isinstance(state, dict):
            raise ConfigError(f"{where} is not a JSON object")
        if state.get("stage") not in ("sft", "rl"):
            raise ConfigError(f"{where}: stage {state.get('stage')!r} is not 'sft' or 'rl'; the checkpoint is not "
                              "one the trainer wrote")
        for key in ("update", "sft_step"):
            v = state.get(key)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
                raise ConfigError(f"{where}: {key} {v!r} is not a non-negative integer")
        for key in ("sft_seconds", "rl_seconds"):
            v = state.get(key, 0.0)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf"):
                raise ConfigError(f"{where}: {key} {v!r} is not a non-negative number of seconds")
        for key, kind, name in (("config", dict, "a JSON object"),
                                ("config_hash", str, "a string"), ("sft_optimizer", bool, "true or false")):
            if key in state and not isinstance(state[key], kind):
                raise ConfigError(f"{where}: {key} is not {name}")
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in state.items() if k in known}
        fields["evals"] = Validations.from_json(state.get("evals", {}), where)
        return cls(**fields)

    @classmethod
    def read(cls, ckpt: Path) -> RunState:
        """Checkpoint ``ckpt``'s ``state.json``.

        :raises ConfigError: unreadable, not JSON, or a bad field (one line).
        """
        try:
            state = read_json(ckpt / "state.json", error=ConfigError)
        except ConfigError:
            raise ConfigError(f"--resume: {ckpt.name}/state.json is unreadable") from None
        return cls.from_json(state, ckpt)


def check_resume(run_dir: Path, saved: TrainConfig, cfg: TrainConfig) -> None:
    """Refuse a resume that would silently change the run: ``--set`` of a key outside :data:`RESUME_MUTABLE`, a
    ``config.toml`` edited since the newest intact checkpoint (its saved config, or its ``config_hash``), or a
    checkpoint whose trainer state is not one the trainer wrote. Reads only; writes nothing.

    :param saved: the run folder's ``config.toml`` as it is; ``cfg``: with the resume's ``--set`` applied.
    :raises ConfigError: one line naming the changed keys (or the bad checkpoint field).
    """
    keep = ", ".join(RESUME_MUTABLE)
    changed = _changed(fixed_config(saved), fixed_config(cfg))
    if changed:
        raise ConfigError(f"--resume: --set cannot change {', '.join(changed)} of a run (a resume may change only "
                          f"{keep}); start a new run for another config")
    check_outputs("--resume", objects=(run_dir / "results.json",), records=(run_dir / "eval" / "records.jsonl",))
    trusted_reference(run_dir)
    ckpt, damaged = find_checkpoint(run_dir)
    if ckpt is None and damaged:  # refused here, before find_resume sets any of them aside
        whys = "; ".join(f"{bad.name}: {why}" for bad, why in damaged[:3])
        more = f"; and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        raise ConfigError(f"--resume: no intact checkpoint in {run_dir / 'checkpoints'} ({whys}{more}); repair "
                          "the file named, or start a new run")
    if ckpt is None:
        return
    state = RunState.read(ckpt)
    if state.config:
        changed = _changed(state.config, fixed_config(saved))
        if changed:
            raise ConfigError(f"--resume: {run_dir / 'config.toml'} was edited since {ckpt.name} "
                              f"({', '.join(changed)} changed); undo the edit, or start a new run (a resume may "
                              f"change only {keep}, with --set)")
    elif state.config_hash and state.config_hash != config_hash(saved):
        raise ConfigError(f"--resume: {run_dir / 'config.toml'} does not match {ckpt.name} (config_hash "
                          f"{config_hash(saved)}, the checkpoint's {state.config_hash}); undo the edit, or start "
                          "a new run")



def check_edited(run_dir: Path, toml: Path) -> None:
    """Refuse a ``config.toml`` edited since the newest intact checkpoint, by the keys the edit changed, read from
    the file as it is (before the config is resolved: an edit from ``crbc`` to ``grpo`` would otherwise fail on
    ``crbc``'s options first, ``unknown option 'beta'``). Reads only; a file that cannot be read, a folder without
    an intact checkpoint or one saved before checkpoints kept their config pass (the later checks say why).

    :raises ConfigError: ``config.toml was edited since ckpt-... (credit.name changed)``.
    """
    from .config import read_toml

    try:
        ckpt, _ = find_checkpoint(run_dir)
        state = RunState.read(ckpt) if ckpt is not None else None
        table = flatten(read_toml(toml))
    except ConfigError:
        return
    if ckpt is None or state is None or not state.config:
        return
    changed = sorted(k for k, v in table.items() if k in state.config and state.config[k] != v
                     and not (k == "optim.kl_coef" and v == 0))
    if changed:
        raise ConfigError(f"--resume: {toml} was edited since {ckpt.name} ({', '.join(changed)} changed); undo the "
                          f"edit, or start a new run (a resume may change only {', '.join(RESUME_MUTABLE)}, with "
                          "--set)")


def finished_summary(run_dir: Path, cfg: TrainConfig) -> dict[str, Any] | None:
    """A run that already finished what ``cfg`` asks (its newest intact checkpoint validated after its last
    update, ``updates`` not raised, ``results.json`` there): its saved summary, read without writing anything (no
    lock, no ``metrics.jsonl`` row, no rewritten config). ``None`` otherwise."""
    ckpt, _ = find_checkpoint(run_dir)
    results = run_dir / "results.json"
    if ckpt is None or not results.is_file():
        return None
    state = RunState.read(ckpt)
    after = state.evals.after
    if not (after is not None and after.update == state.update >= cfg.updates and state.stage == "rl"):
        return None
    summary = read_json(results, error=ConfigError)
    return summary if isinstance(summary, dict) else None


def check_outputs(where: str, *, objects: tuple[Path, ...] = (), records: tuple[Path, ...] = ()) -> None:
    """Files a command reads back must parse: each of ``objects`` one JSON object, each of ``records`` JSON Lines
    of objects (missing files pass). A damaged one is one line starting with ``where`` and naming it, before
    anything is written."""
    from ..io import read_text, text_lines

    for path, lines in [*((p, False) for p in objects), *((p, True) for p in records)]:
        if not path.exists():
            continue
        text = read_text(path, error=ConfigError, where=f"{where}: {path}")
        try:
            docs = [json.loads(ln) for ln in text_lines(text) if ln.strip()] if lines else [json.loads(text)]
        except (ValueError, RecursionError):
            docs = [None]
        if not all(isinstance(d, dict) for d in docs):
            raise ConfigError(f"{where}: {path} is damaged (not JSON {'records' if lines else 'object'}); repair "
                              "it or move it away, then run again")


def find_resume(run_dir: Path, dist: Dist, log: MetricsLogger) -> Path | None:
    """The newest intact checkpoint (rank 0 verifies, sets damaged ones aside, and tells the other ranks)."""
    found: list[str] = ["", ""]  # checkpoint path, error
    if dist.main:
        ckpt, damaged = find_checkpoint(run_dir)
        for bad, why in damaged:
            aside = set_aside(bad)
            then = f"resuming from {ckpt.name}" if ckpt is not None else "no intact checkpoint is left"
            print(f"resume: {bad.name} is damaged ({why}); set aside as {aside.name}, {then}", flush=True)
        if ckpt is None and damaged:
            found[1] = (f"--resume: no intact checkpoint in {run_dir / 'checkpoints'}; start a new run "
                        "(the damaged ones are kept as damaged-ckpt-*)")
        elif ckpt is None:
            print(f"resume: no checkpoint in {run_dir} yet; starting from the beginning", flush=True)
            log.rewind(0, sft_step=0, update=0)  # the rows of the lost start are logged again
        found[0] = str(ckpt or "")
    broadcast_object(dist, found)
    if found[1]:
        raise ConfigError(found[1])
    return Path(found[0]) if found[0] else None


def reference_source(cfg: TrainConfig, state: RunState, run_dir: Path,
                     say: Callable[[str], None]) -> Path | str | None:
    """On resume mid-RL: ``None`` when the saved KL reference is intact (or none is needed), else where to rebuild
    it from: ``"base"`` (the base model, when there was no warm start) or the RL stage's checkpoint 0.

    :raises ConfigError: the reference is damaged and the policy the RL stage started from is gone.
    """
    if state.stage != "rl" or state.update == 0 or cfg.optim.kl_coef <= 0 or cfg.model.lora:
        return None  # no reference yet (it is the policy now), none needed, or the base with adapters off
    saved = run_dir / "reference"
    try:
        verify_folder(saved)
        if not (saved / "state.pt").is_file():
            raise ConfigError("state.pt is missing")
        return None
    except ConfigError as exc:
        why = f"reference/{exc}" if saved.is_dir() else "reference/ is missing"
    if not state.sft_step:
        source: Path | str = "base"
        text = f"the base model {cfg.model.name!r} (no warm start)"
    else:
        ckpt0 = run_dir / "checkpoints" / "ckpt-000000"
        try:
            verify_folder(ckpt0, require_manifest=True)
            state0 = RunState.read(ckpt0)
            if (state0.stage, state0.update) != ("rl", 0):
                raise ConfigError("it is not the start of the RL stage")
        except (ConfigError, OSError):
            raise ConfigError(
                f"--resume: {why}, and the policy the RL stage started from (checkpoints/ckpt-000000) is gone; "
                f"put that policy back as {run_dir / 'reference'}, or resume with --set optim.kl_coef=0 "
                "to go on without the KL term") from None
        source, text = ckpt0, "checkpoints/ckpt-000000 (the end of the warm start)"
    say(f"resume: {why}; the KL reference is rebuilt from {text}")
    return source
