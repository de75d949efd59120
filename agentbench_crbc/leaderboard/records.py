"""Leaderboard records: the frozen :class:`RunRecord` schema, its validation, and an atomic JSON Lines store.

One record is one evaluation: (env, subtask, model, model_scale, method, seed, update, run) is its key, and a store
never holds two records with one key; ``run`` (the run folder's name) keeps a user's own run apart from the rows
shipped with the package, which were measured with the same defaults and seed. ``source`` says where the numbers
come from: ``"measured"`` (a run of this package, with ``seed``, ``n_episodes`` and ``config_hash``) or
``"reported"`` (a published table, with a ``citation``; ``seed`` is null because the paper gives a mean and std
over ``n_seeds`` seeds).

Units: ``success`` is a fraction in [0, 1] (rendered as a percentage); ``score`` is the environment's task score in
the unit the CRBC paper reports it (WebShop: mean final reward x 100; Sokoban: mean episode return); ``None`` where
an environment has no score.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RecordError
from ..io import atomic_open, check_writable, json_text, read_text, resolved, text_lines

__all__ = [
    "KEY_FIELDS",
    "KINDS",
    "SOURCES",
    "RunRecord",
    "add_records",
    "env_name",
    "read_records",
    "record_key",
    "write_records",
]

#: Where a record's numbers come from.
SOURCES = ("measured", "reported")
#: What produced the model: group RL, imitation (a warm start) or prompting alone.
KINDS = ("rl", "sft", "prompting")
#: Longest accepted text field (citations excepted): names, models and runs are short; a board must stay renderable.
MAX_TEXT = 200
MAX_CITATION = 2000
#: Bounds of integer fields (a 64-bit seed; updates, episodes and seeds far beyond any run).
MAX_SEED = 2**63 - 1
MAX_COUNT = 10**9
#: The fields that identify a record; a store holds at most one record per key.
KEY_FIELDS = ("env", "subtask", "model", "model_scale", "method", "seed", "update", "run")

_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_GYM_ID = re.compile(r"^(?:[\w.-]+/)?(?P<name>[A-Za-z][A-Za-z0-9]*)(?:[-_][\w.-]*)?-v\d+$")

Key = tuple[str, str, str, str, str, "int | None", int, "str | None"]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One leaderboard row: success (and score) of one method/model/seed at one update on one subtask."""

    env: str
    """Short lowercase environment name: a registered family's name such as ``alfworld`` (see :func:`env_name`)."""
    subtask: str
    """Subtask name (``pick``, ``clean``, ...), or ``all`` for the whole evaluation set."""
    model: str
    """Model name, e.g. ``Qwen2.5-1.5B-Instruct``, ``SmolLM2-135M-Instruct``, ``tiny-qwen2``."""
    model_scale: str
    """Scale label used to split boards: ``1.5B``, ``7B``, ``3B``, ``135M``, ``tiny-1M``, ``api``."""
    method: str
    """Method key: a credit method (``crbc``, ``gigpo``...) or a baseline (``react``); lowercase."""
    seed: int | None
    """Training seed; ``None`` only for a reported aggregate over ``n_seeds`` seeds."""
    update: int
    """Policy update the evaluation ran after (0 = before training; the paper's RL rows: 150)."""
    success: float | None
    """Fraction of evaluation episodes that succeeded, in [0, 1]."""
    score: float | None
    """Task score (WebShop reward x 100, Sokoban return); ``None`` where the env has none."""
    n_episodes: int | None
    """Evaluation episodes behind this row (required when measured)."""
    config_hash: str | None
    """Hash of the run's resolved configuration (required when measured)."""
    package_version: str
    """agentbench-crbc version that measured or imported the row."""
    date: str
    """ISO date (or date-time) the row was measured or imported."""
    source: str
    """``measured`` or ``reported``."""
    citation: str | None = None
    """Where reported numbers come from (required when reported)."""
    kind: str = "rl"
    """``rl`` (trained with a credit method), ``prompting`` or ``sft``."""
    success_std: float | None = None
    """Reported std of success over seeds (fraction); measured rows leave it empty: the board computes it."""
    score_std: float | None = None
    """Reported std of score over seeds."""
    n_seeds: int | None = None
    """Seeds behind a reported aggregate."""
    run: str | None = None
    """The measuring run's folder name (``{env}__{method}__{model}__{seed}__{time}``), part of the key; ``None`` for
    reported rows and rows written before this field existed."""
    revision: str | None = None
    """The code that measured the row (:func:`~agentbench_crbc.revision.code_revision`: a git commit, ``+dirty``
    with local changes, or ``v{version}`` for an installed release); ``None`` for reported rows and older rows.
    Boards never put two revisions in one table."""
    budget: int | None = None
    """RL updates the measuring run was configured for (``update`` is when this evaluation ran); ``None`` for
    reported rows and older rows. Boards never put two budgets in one table."""
    cut: bool = False
    """Whether the measuring run's time cap (``max_minutes``) stopped it before its planned updates; ``budget`` is
    then the updates it did. Boards never put a cut run beside full runs, and ``abc leaderboard add`` asks first."""
    machine: str | None = None
    """The measuring machine's CPU model and the kernel ISA torch ran (``Intel(R) Xeon(R) ..., AVX512 kernels``);
    ``None`` for reported rows and rows written before this field existed. Boards never put two machines in one
    table, and the heading names it."""

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def key(self) -> Key:
        """The identity of this record in a store (:data:`KEY_FIELDS`)."""
        return record_key(self)

    def to_dict(self) -> dict[str, Any]:
        """All fields, in schema order (``None`` kept as JSON null so every line has the same keys)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "record") -> RunRecord:
        """Build and validate a record; unknown or missing keys raise :class:`RecordError` naming ``where``."""
        if not isinstance(data, Mapping):
            raise RecordError(f"{where}: a record must be a JSON object, got {type(data).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(k) for k in set(data) - set(names))
        if unknown:
            shown = ", ".join(k if k.isprintable() and len(k) <= 60 else _shown(k) for k in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise RecordError(f"{where}: unknown field(s) {shown}{more}; allowed: {', '.join(names)}")
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        missing = [n for n in required if n not in data]
        if missing:
            raise RecordError(f"{where}: missing field(s) {', '.join(missing)} (use null where a value is "
                              "not applicable)")
        try:
            return cls(**dict(data))
        except RecordError as exc:
            raise RecordError(f"{where}: {exc}") from None

    @classmethod
    def measured(cls, **fields: Any) -> RunRecord:
        """A record of this package's own evaluation: ``fields`` are the record's (``env``, ``subtask``, ``model``,
        ``model_scale``, ``method``, ``seed``, ``update``, ``success``, ``n_episodes``, ``config_hash``, and
        optionally ``score``, ``kind``, ``run``, ``budget``, ``cut``, ``machine``), stamped ``source="measured"``
        with the installed version, today's date and the code's revision
        (:func:`~agentbench_crbc.revision.code_revision`) unless ``date`` / ``revision`` are given.

        :raises RecordError: a field a measured row does not take (``package_version`` and ``source`` are stamped;
            ``citation`` and the ``*_std`` / ``n_seeds`` aggregates belong to reported rows)."""
        from .. import __version__
        from ..revision import code_revision

        extra = sorted(fields.keys() - _MEASURED_FIELDS)
        if extra:
            raise RecordError(f"RunRecord.measured takes no {', '.join(extra)}; it takes "
                              f"{', '.join(sorted(_MEASURED_FIELDS))}")
        date, revision = fields.pop("date", None), fields.pop("revision", None)
        return cls(**{"score": None, **fields}, package_version=__version__, date=date or _dt.date.today().isoformat(),
                   source="measured", revision=revision or code_revision())


#: The fields :meth:`RunRecord.measured` takes (the rest it stamps, or belong to reported rows).
_MEASURED_FIELDS = frozenset({"env", "subtask", "model", "model_scale", "method", "seed", "update", "success",
                              "n_episodes", "config_hash", "score", "kind", "date", "run", "budget", "revision", "cut",
                              "machine"})


def record_key(rec: RunRecord) -> Key:
    """``(env, subtask, model, model_scale, method, seed, update, run)``."""
    return (rec.env, rec.subtask, rec.model, rec.model_scale, rec.method, rec.seed, rec.update, rec.run)


def _family_names() -> str:
    from ..host import get_host

    return ", ".join(get_host().families.names()) or "none installed"


def env_name(env_id: str) -> str:
    """The leaderboard name of a Gymnasium id: its registered family's name (``abc/SokobanText-v0`` -> ``sokoban``,
    :func:`~agentbench_crbc.family.resolve_env`); a short name passes through; an id no family declares gives its
    name without namespace, variant and version, lowercased."""
    if _NAME.match(env_id):
        return env_id
    from ..family import find_family

    found = find_family(env_id)
    if found is not None:
        return found.family.name
    m = _GYM_ID.match(env_id)
    if not m:
        raise RecordError(f"cannot derive a leaderboard env name from {env_id!r}; use a short lowercase name "
                          f"such as a family's ({_family_names()})")
    return m.group("name").lower()


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    if _is_int(x):
        return abs(x) <= MAX_SEED  # a 400-digit integer is no float (and math.isfinite would overflow)
    return isinstance(x, float) and math.isfinite(x)


def _shown(value: Any) -> str:
    """``repr`` of a bad value, cut to a readable length (a 400-digit number, a 100k-character name)."""
    if _is_int(value) and len(str(abs(value))) > 30:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _check_text(name: str, value: Any, limit: int) -> None:
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"field {name!r} must be a non-empty string, got {_shown(value)}")
    if len(value) > limit:
        raise RecordError(f"field {name!r} is {len(value):,} characters long; at most {limit} are allowed")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError(f"field {name!r} holds a lone surrogate (an unpaired \\ud800-\\udfff escape); "
                          "it cannot be stored as UTF-8") from None
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
    if bad is not None:  # control characters, and the line breaks str.splitlines and editors see (U+2028, U+0085)
        what = "a control character" if unicodedata.category(bad) == "Cc" else "a line separator"
        raise RecordError(f"field {name!r} holds {what} (U+{ord(bad):04X}); names are one line of text")


def _validate(r: RunRecord) -> None:
    for name in ("env", "subtask", "model", "model_scale", "method", "package_version", "date", "source", "kind"):
        _check_text(name, getattr(r, name), MAX_TEXT)
    if r.kind not in KINDS:
        raise RecordError(f"kind {r.kind!r} must be one of {', '.join(KINDS)}")
    if not _NAME.match(r.env):
        raise RecordError(f"env {r.env!r} must be a short lowercase name such as a family's ({_family_names()}; "
                          "see leaderboard.records.env_name)")
    if r.source not in SOURCES:
        raise RecordError(f"source {r.source!r} must be one of {', '.join(SOURCES)}")
    if r.seed is not None and (not _is_int(r.seed) or not 0 <= r.seed <= MAX_SEED):
        raise RecordError(f"seed must be an integer in [0, 2**63 - 1] (as abc train takes it) or null, got "
                          f"{_shown(r.seed)}")
    if not _is_int(r.update) or not 0 <= r.update <= MAX_COUNT:
        raise RecordError(f"update must be an integer >= 0 and <= {MAX_COUNT:,}, got {_shown(r.update)}")
    for name in ("success", "score", "success_std", "score_std"):
        value = getattr(r, name)
        if value is not None and not _is_num(value):
            raise RecordError(f"{name} must be a finite number or null, got {_shown(value)}")
    if r.success is not None and not 0.0 <= r.success <= 1.0:
        raise RecordError(f"success must be a fraction in [0, 1], got {r.success!r} (divide a percentage by 100)")
    if r.success is None and r.score is None:
        raise RecordError("a record needs success or score (or both)")
    for name in ("success_std", "score_std"):
        value = getattr(r, name)
        if value is not None and value < 0:
            raise RecordError(f"{name} must be >= 0, got {value!r}")
    for name in ("n_episodes", "n_seeds"):
        value = getattr(r, name)
        if value is not None and (not _is_int(value) or not 1 <= value <= MAX_COUNT):
            raise RecordError(f"{name} must be an integer >= 1 and <= {MAX_COUNT:,}, or null, got {_shown(value)}")
    if r.budget is not None and (not _is_int(r.budget) or not 0 <= r.budget <= MAX_COUNT):
        raise RecordError(f"budget must be an integer >= 0 and <= {MAX_COUNT:,}, or null, got {_shown(r.budget)}")
    if not isinstance(r.cut, bool):
        raise RecordError(f"cut must be true or false, got {_shown(r.cut)}")
    if r.cut and (r.source != "measured" or r.budget is None):
        raise RecordError("cut is for measured runs stopped by their time cap, with budget = the updates they did")
    for name, limit in (("config_hash", MAX_TEXT), ("run", MAX_TEXT), ("revision", MAX_TEXT),
                        ("machine", MAX_TEXT), ("citation", MAX_CITATION)):
        if getattr(r, name) is not None:
            _check_text(name, getattr(r, name), limit)
    try:
        _dt.datetime.fromisoformat(r.date)
    except ValueError:
        raise RecordError(f"date {r.date!r} must be ISO 8601, e.g. 2026-11-29") from None
    if r.source == "measured":
        for name in ("seed", "n_episodes", "config_hash", "success"):
            if getattr(r, name) is None:
                raise RecordError(f"a measured record needs {name}")
        for name in ("success_std", "score_std", "n_seeds"):
            if getattr(r, name) is not None:
                raise RecordError(f"{name} is for reported aggregates; a measured record is one seed (the board "
                                  "computes the spread over seeds)")
    else:
        if r.citation is None:
            raise RecordError("a reported record needs a citation (paper, table)")
        if r.run is not None:  # a measuring run's folder on a paper's row: measured and reported must stay apart
            raise RecordError("run names the folder of the run that measured a row; a reported row has none "
                              "(set run to null, or give the row source measured and its run's fields)")
        if r.seed is None and r.n_seeds is None and (r.success_std is not None or r.score_std is not None):
            raise RecordError("a reported std needs n_seeds")


class _NonFinite:
    """What ``NaN``, ``Infinity`` or ``-Infinity`` in a store reads as, until the field holding it is named."""

    def __init__(self, name: str) -> None:
        self.name = name


def _parse_constant(name: str) -> _NonFinite:
    return _NonFinite(name)


def _non_finite_field(data: Any) -> tuple[str, str] | None:
    """``(field, constant)`` of the first top-level field holding (anywhere inside) a ``NaN``/``Infinity``."""
    if not isinstance(data, dict):
        return None
    for key, value in data.items():
        todo = [value]
        while todo:
            v = todo.pop()
            if isinstance(v, _NonFinite):
                return str(key), v.name
            if isinstance(v, dict):
                todo += v.values()
            elif isinstance(v, list):
                todo += v
    return None


def _read(path: Path) -> list[tuple[int, RunRecord]]:
    """Records with their line numbers; malformed lines and duplicate keys raise naming ``path:line``."""
    text = read_text(path)
    out: list[tuple[int, RunRecord]] = []
    seen: dict[Key, int] = {}
    for lineno, line in enumerate(text_lines(text), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            data = json.loads(line, parse_constant=_parse_constant)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise RecordError(f"{where}: JSON nested too deeply; a record is one flat object") from None
        except ValueError as exc:  # an integer beyond Python's digit limit
            raise RecordError(f"{where}: {exc}") from None
        bad = _non_finite_field(data)
        if bad is not None:
            raise RecordError(f"{where}: field {bad[0][:40]!r} holds {bad[1]}, which is not a finite number; give "
                              "a number or null")
        rec = RunRecord.from_dict(data, where)
        if rec.key in seen:
            raise RecordError(f"{where}: duplicate record {_describe(rec)}, already at line {seen[rec.key]}; "
                              "remove one of them")
        seen[rec.key] = lineno
        out.append((lineno, rec))
    return out


def _describe(rec: RunRecord) -> str:
    return "(" + ", ".join(f"{k}={getattr(rec, k)}" for k in KEY_FIELDS if k != "run" or rec.run) + ")"


def read_records(path: str | Path, *, missing_ok: bool = False) -> list[RunRecord]:
    """Read a JSON Lines store (blank lines skipped); any malformed or duplicate line raises naming file:line.

    :param missing_ok: return ``[]`` for a file that does not exist (a new store).
    """
    path = Path(path)
    if missing_ok and not path.exists():
        return []
    return [rec for _, rec in _read(path)]


def write_records(path: str | Path, records: Iterable[RunRecord]) -> None:
    """Write records atomically (temp file + rename: a failure leaves the old file as it was)."""
    records = list(records)
    seen: set[Key] = set()
    for rec in records:
        if rec.key in seen:
            raise RecordError(f"{path}: refusing to write duplicate record {_describe(rec)}")
        seen.add(rec.key)
    with atomic_open(path) as fh:
        for rec in records:
            fh.write(json_text(rec.to_dict(), ensure_ascii=False) + "\n")


def add_records(store: str | Path, new: Sequence[RunRecord] | str | Path, *, replace: bool = False,
                origin: str = "record", source: str | None = None) -> int:
    """Append records (a list, or a JSONL file) to ``store`` atomically; returns how many were added.

    A record whose key is already in the store is refused (naming both places) unless ``replace`` is true, in which
    case it overwrites the stored one. Nothing is written unless every record is valid.

    The read-modify-write holds a file lock (``STORE.lock`` beside the store's resolved path), so concurrent adds
    to one store, from any number of processes and through any symlink to it, all land.

    :param origin: how errors name a record of a list (``f"{origin} {i}"``, counting from 1).
    :param source: refuse records of any other source (``abc leaderboard add`` takes ``measured`` ones only).
    """
    from filelock import FileLock

    if isinstance(new, (str, Path)):  # a bad file is refused before the store (or its lock) is touched
        src = Path(new)
        incoming = [(f"{src}:{lineno}", rec) for lineno, rec in _read(src)]
    else:
        incoming = [(f"{origin} {i + 1}", rec) for i, rec in enumerate(new)]
        seen: dict[Key, str] = {}
        for where, rec in incoming:
            if rec.key in seen:
                raise RecordError(f"{where}: duplicate record {_describe(rec)}, also {seen[rec.key]}")
            seen[rec.key] = where
    for where, rec in incoming:
        if source is not None and rec.source != source:
            hint = ("published results come in with `abc leaderboard import-reported CSV`" if rec.source == "reported"
                    else f"this store takes {source} records here")
            raise RecordError(f"{where}: a {rec.source} record {_describe(rec)}; only {source} records are added "
                              f"here ({hint}), so measured and reported rows stay apart")
    store = resolved(store)  # one store, one lock, whichever symlink named it
    check_writable(store)  # a read-only store or an odd path: refused before the lock or a folder is made
    store.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{store}.lock", "a"):  # a lock file that cannot be made fails now (FileLock would wait forever)
        pass
    with FileLock(f"{store}.lock"):
        return _add_locked(store, incoming, replace=replace)


def _add_locked(store: Path, incoming: list[tuple[str, RunRecord]], *, replace: bool) -> int:
    existing = _read(store) if store.exists() else []
    at = {rec.key: lineno for lineno, rec in existing}
    records = [rec for _, rec in existing]
    index = {rec.key: i for i, rec in enumerate(records)}
    for where, rec in incoming:
        if rec.key in at and not replace:
            raise RecordError(f"{where}: duplicate record {_describe(rec)}, already in {store}:{at[rec.key]}; "
                              "it was added before (pass --replace to overwrite)")
        if rec.key in index:
            records[index[rec.key]] = rec
        else:
            index[rec.key] = len(records)
            records.append(rec)
    write_records(store, records)
    return len(incoming)
