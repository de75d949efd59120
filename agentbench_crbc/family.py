"""Environment families as plugins: the frozen :class:`EnvFamily` spec and the one resolver from a name or id.

A family is everything the rest of the package needs to know about one kind of environment (its Gymnasium ids,
step limits, anchors, expert, held-out task key, prompts, extra, imitation data, tabular twin, play UI, training
defaults). It is registered through ``abc_register_env_families`` in the ``agentbench_crbc`` entry-point group,
exactly like a credit method; the built-in families register the same way a third party does. Callables that pull
in heavy modules are given as ``"module:attr"`` strings and imported on first use (:func:`load_ref`).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from .errors import PluginError, UnknownNameError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "ADMISSIBLE_ACTIONS",
    "ALLOWED_PLACEHOLDERS",
    "EnvFamily",
    "EnvId",
    "PromptStyle",
    "Resolved",
    "action_problem",
    "ensure_gym_ids",
    "families",
    "find_family",
    "is_heldout",
    "load_ref",
    "register_gym_ids",
    "resolve_env",
    "style_of",
]

#: The key of an env's ``info`` that lists the actions it admits now (a list of strings; every family's envs use
#: it, the core reads it by this name only), and the template placeholder that shows them.
ADMISSIBLE_ACTIONS = "admissible_actions"

#: The placeholders a prompt template may use (``str.format`` fields; literal braces are doubled).
ALLOWED_PLACEHOLDERS = ("task_description", "step_count", "history_length", "action_history", "current_step",
                        "current_observation", ADMISSIBLE_ACTIONS)

#: The longest action the action parser accepts (a command is a few words; a search query a sentence); exported
#: as ``rollout.episodes.parse.MAX_ACTION_CHARS``.
MAX_ACTION_CHARS = 512


def action_problem(action: object) -> str | None:
    """Why the action parser (:func:`~agentbench_crbc.rollout.episodes.parse.parse_action`) can never accept
    ``action`` as an answer, or ``None`` when it can.
    Part of the family contract: an admissible or default action must be answerable
    (printable ASCII, not blank, at most :data:`MAX_ACTION_CHARS` characters, no ``<action>`` tag inside), or every
    step that takes it, constrained decoding's included, would be penalised as invalid."""
    if not isinstance(action, str):
        return f"is a {type(action).__name__}, not a string"
    if "<action>" in action or "</action>" in action:
        return "holds an <action> tag"
    if len(action) > MAX_ACTION_CHARS:
        return f"is longer than {MAX_ACTION_CHARS} characters"
    body = action.strip()
    if not body:
        return "is blank"
    if not body.isascii() or not body.isprintable():
        return "is not printable ASCII"
    return None


#: A callable given directly or as ``"package.module:attr"`` (imported on first use).
Ref = str | Callable[..., Any] | None


def load_ref(ref: Ref, *, what: str = "reference") -> Any:
    """The object a ``"module:attr"`` string names (callables and ``None`` pass through).

    :raises PluginError: the string is not ``module:attr`` or the attribute is missing.
    """
    if ref is None or not isinstance(ref, str):
        return ref
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise PluginError(f"{what} {ref!r} must be 'package.module:attr'")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"{what} {ref!r}: module {module!r} has no attribute {attr!r}") from None
    return obj


@dataclass(frozen=True)
class EnvId:
    """One Gymnasium id of a family, with its entry point, episode step limit and constructor defaults.

    ``max_episode_steps`` is the one place the step limit is written: Gymnasium's ``TimeLimit``, the trainer's
    ``env.max_steps`` default and ``abc rollout`` all read it from here.
    """

    id: str
    entry_point: str
    max_episode_steps: int
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: ``text`` (string observations) or ``rgb`` (image observations, for vision-language models)
    observation: str = "text"


@dataclass(frozen=True)
class PromptStyle:
    """How prompts of a family are rendered around its templates.

    :param admissible: how the paper templates list admissible actions: ``"quoted-lines"`` (``'a'`` one per line),
        ``"quoted-comma"`` (``'a',`` one per line), ``"double-quoted"`` (``"a", "b"`` on one line).
    :param default_actions: listed when an observation carries no admissible actions; also the answer set of
        constrained decoding and of the ``random`` engine there.
    :param compact: the compact tiny-model prompt: ``"cells"`` (one token per grid character) or ``"text"``.
    :param task_pattern: a regular expression whose first group is the task in the first observation, for envs
        whose info carries no ``task``/``instruction``/``goal`` (ALFWorld's ``Your task is to: (...)``); empty:
        the info's only.
    :param hidden_actions: admissible actions never shown in a prompt (ALFWorld's ``help``).
    :param free_arguments: the placeholders that make an admissible action a template taking any argument:
        ``search[<query>]`` admits ``search[red shoes]`` (WebShop's ``...``, ``<query>``, ``<your query>``).
    """

    admissible: str = "quoted-lines"
    default_actions: tuple[str, ...] = ()
    compact: str = "text"
    task_pattern: str = ""
    hidden_actions: tuple[str, ...] = ()
    free_arguments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.admissible not in ("quoted-lines", "quoted-comma", "double-quoted"):
            raise PluginError(f"prompt style admissible={self.admissible!r}: use 'quoted-lines', 'quoted-comma' or "
                              "'double-quoted'")
        for action in self.default_actions:
            if (problem := action_problem(action)) is not None:
                raise PluginError(f"prompt style default action {str(action)[:60]!r} {problem}; the action parser "
                                  f"accepts printable ASCII of 1-{MAX_ACTION_CHARS} characters without tags only")
        if self.compact not in ("cells", "text"):
            raise PluginError(f"prompt style compact={self.compact!r}: use 'cells' or 'text'")
        if self.task_pattern:
            import re

            try:
                groups = re.compile(self.task_pattern).groups
            except re.error as exc:
                raise PluginError(f"prompt style task_pattern={self.task_pattern!r} is no regular expression "
                                  f"({exc}); give one whose first group is the task") from None
            if groups < 1:
                raise PluginError(f"prompt style task_pattern={self.task_pattern!r} has no group; put the task "
                                  "in parentheses, e.g. 'Your task is to:\\s*([^\\n]*)'")
        for name in ("default_actions", "hidden_actions", "free_arguments"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise PluginError(f"prompt style {name}={value!r} must be a tuple of non-empty strings")

    def visible(self, actions: Sequence[str] | None) -> list[str]:
        """``actions`` without :attr:`hidden_actions`."""
        return [a for a in (actions or ()) if a not in self.hidden_actions]


@dataclass(frozen=True)
class EnvFamily:
    """Everything the package knows about one environment family; registered with ``register.add(FAMILY)``.

    Fields given as ``"module:attr"`` are imported on first use, so registering a family imports nothing heavy.

    :param name: short lowercase name (``sokoban``): ``--env NAME``, leaderboard rows, prompt file names.
    :param label: the display name on boards (``Sokoban``).
    :param ids: the family's Gymnasium ids.
    :param default_id: the id used when only the family is named.
    :param anchors: the anchor extractors' names; the first is the default.
    :param expert: ``expert_policy(env) -> (obs, info) -> action``; ``None`` when the family has none.
    :param optimal_actions: ``optimal_actions(env) -> frozenset[str] | None``: the actions that begin an optimal
        plan from the env's current state (``None``: not known there); labels moves for ``abc bench credit``.
    :param task_key: ``task_key(env) -> str | None``: equal for equivalent tasks, hashed into held-out splits.
    :param subtasks: the subtask names ``info['subtask']`` takes, in display order.
    :param prompts: the package holding ``{name}.txt``/``{name}_first.txt`` (and ``_vision``) templates.
    :param prompt_style: see :class:`PromptStyle`.
    :param extra: the pip extra the family needs (``None``: the core install is enough).
    :param requires: the top-level modules that extra brings, checked before an env is built.
    :param extra_modules: further modules the extra brings for optional parts (a play window), named in hints only.
    :param imitation: ``imitation_data(env_id, env_kwargs, build_prompt, *, seeds, pool, augment, all_optimal)``
        returning ``(sample, n_states)``, ``sample(rng) -> (prompt_ids, action_text)``; ``build_prompt(obs, info)``
        renders one observation into prompt ids. ``None``: replay :attr:`expert` episodes through the prompts.
    :param tabular: the family's tabular twin for ``abc bench fidelity`` (``"module:attr"``), or ``None``.
    :param play: ``play(args) -> int`` for ``abc play NAME`` (``args.seed``, ``args.ui``, ``args.set``), or ``None``.
    :param play_modes: the ``--ui`` values ``play`` accepts (the first is the default).
    :param training: config overrides (a nested TOML-like table) that ``abc train --env NAME`` applies.
    :param score: what the leaderboard's ``score`` column holds for this family (``None``: no score).
    :param tokenizer_words: words a tiny from-scratch tokenizer should keep whole (commands, symbols), in order.
    :param tokenizer_symbols: grid symbols a tiny tokenizer should keep one token each (trained as rows of each).
    :param commands: ``register(subparsers)`` adding a family-provided ``abc`` subcommand (``abc alfworld
        generate``), or ``None``.
    :param board_order: where the family's boards come on the leaderboard (lower first; ties by name).
    :param task_word: what one task is called in messages (``level``, ``game``...; the plural adds ``s``).
    :param presets: named ``abc train --preset`` starting points this family contributes: each a nested table with
        ``"base"`` (a trainer base: ``"paper"``, the CRBC paper's settings, or ``"cpu-demo"``) and the keys that
        differ from it (``model.name``, ``rollout.groups``...); ``env.name`` is this family unless the table says.
    :param client_reset_options: the ``reset(options=...)`` keys a remote client of ``abc serve`` may send (default
        none: clients choose the task by seed only). Declare only keys that pick among the env's own tasks (a task
        index the env range-checks), never a path, a size or anything the env reads from disk by name; the server
        accepts their values only as integers or short strings and refuses every other key.
    :param heldout_kwargs: ``gymnasium.make`` keyword arguments laid over ``env.kwargs`` for validation (``abc train``
        and ``abc eval``): a task pool disjoint from the training pool by construction (ALFWorld's ``valid_unseen``
        rooms, WebShop's test goals); a ``None`` value drops that key (a training-only task list). Empty: validation
        plays the training envs' seeds from ``env.val_seed_offset`` on (held out by :attr:`task_key` where given).
    """

    name: str
    label: str
    ids: tuple[EnvId, ...]
    default_id: str
    anchors: tuple[str, ...] = ()
    expert: Ref = None
    optimal_actions: Ref = None
    task_key: Ref = None
    subtasks: tuple[str, ...] = ()
    prompts: str | None = None
    prompt_style: PromptStyle = field(default_factory=PromptStyle)
    extra: str | None = None
    requires: tuple[str, ...] = ()
    extra_modules: tuple[str, ...] = ()
    imitation: Ref = None
    tabular: Ref = None
    play: Ref = None
    play_modes: tuple[str, ...] = ("terminal",)
    training: Mapping[str, Any] = field(default_factory=dict)
    score: str | None = None
    tokenizer_words: tuple[str, ...] = ()
    tokenizer_symbols: str = ""
    commands: Ref = None
    board_order: int = 100
    task_word: str = "task"
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    client_reset_options: tuple[str, ...] = ()
    heldout_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.lower() or not self.name.replace("_", "").isalnum():
            raise PluginError(f"env family name {self.name!r} must be lowercase letters, digits or '_'")
        if not self.ids:
            raise PluginError(f"env family {self.name!r} declares no Gymnasium ids")
        if self.default_id not in {i.id for i in self.ids}:
            raise PluginError(f"env family {self.name!r}: default_id {self.default_id!r} is not one of its ids "
                              f"({', '.join(i.id for i in self.ids)})")
        if len({i.id for i in self.ids}) != len(self.ids):
            raise PluginError(f"env family {self.name!r} declares a Gymnasium id twice; list each once")
        if isinstance(self.client_reset_options, str) or not all(
                isinstance(k, str) and k for k in self.client_reset_options):
            raise PluginError(f"env family {self.name!r}: client_reset_options must be a tuple of option names, got "
                              f"{self.client_reset_options!r}")
        if not isinstance(self.heldout_kwargs, Mapping) or not all(isinstance(k, str) and k
                                                                    for k in self.heldout_kwargs):
            raise PluginError(f"env family {self.name!r}: heldout_kwargs must map keyword names to values, got "
                              f"{self.heldout_kwargs!r}")

    def env_id(self, env_id: str) -> EnvId:
        """The :class:`EnvId` of one of this family's ids."""
        for spec in self.ids:
            if spec.id == env_id:
                return spec
        raise UnknownNameError(f"{env_id!r} is not an id of env family {self.name!r}; its ids: "
                               f"{', '.join(i.id for i in self.ids)}")

    def max_steps(self, env_id: str | None = None) -> int:
        """The episode step limit of ``env_id`` (default: :attr:`default_id`)."""
        return self.env_id(env_id or self.default_id).max_episode_steps

    def load(self, attr: str) -> Any:
        """Field ``attr`` with a ``"module:attr"`` string imported."""
        return load_ref(getattr(self, attr), what=f"env family {self.name!r} {attr}")

    def prompt_folder(self) -> Traversable:
        """The folder of the :attr:`prompts` package (``importlib.resources.files``).

        :raises PluginError: no ``prompts`` set, or a package that does not import (one line naming the fix).
        """
        if not self.prompts:
            raise PluginError(f"env family {self.name!r} sets no prompts package")
        try:
            return resources.files(self.prompts)
        except ModuleNotFoundError as exc:
            raise PluginError(f"env family {self.name!r}: prompts package {self.prompts!r} does not import (no "
                              f"module named {exc.name!r}); set EnvFamily.prompts to the dotted name of an "
                              f"importable package (a folder with an __init__.py) holding {self.name}.txt and "
                              f"{self.name}_first.txt") from None


@dataclass(frozen=True)
class Resolved:
    """The answer of :func:`resolve_env`: the family and the concrete id."""

    family: EnvFamily
    env_id: str


def families() -> list[EnvFamily]:
    """Every registered family, sorted by name (from the process-wide plugin host)."""
    from .host import get_host

    return list(get_host().families)


def resolve_env(name_or_id: str) -> Resolved:
    """The one mapping from what a user types to a family and a Gymnasium id.

    A family name gives that family's :attr:`EnvFamily.default_id`; an id gives the family that declares it.

    :raises UnknownNameError: neither a registered family nor one of their ids (the message lists both).
    """
    from .host import get_host

    host = get_host()
    if name_or_id in host.families:
        fam = host.family(name_or_id)
        return Resolved(fam, fam.default_id)
    for fam in host.families:
        if any(spec.id == name_or_id for spec in fam.ids):
            return Resolved(fam, name_or_id)
    names = ", ".join(host.families.names()) or "none"
    raise UnknownNameError(f"unknown environment {name_or_id!r}; families: {names} (or one of their ids, "
                           f"see `abc envs`)")


def find_family(name_or_id: str) -> Resolved | None:
    """:func:`resolve_env`, or ``None`` for a name or id no registered family declares."""
    try:
        return resolve_env(name_or_id)
    except UnknownNameError:
        return None


def style_of(name_or_id: str) -> PromptStyle:
    """The :class:`PromptStyle` of the family :func:`resolve_env` finds for ``name_or_id``; the generic default
    style for an id no registered family declares."""
    found = find_family(name_or_id)
    return found.family.prompt_style if found is not None else PromptStyle()


def ensure_gym_ids() -> None:
    """Register the Gymnasium ids of every registered family (idempotent; call before ``gymnasium.make``)."""
    from .host import get_host

    get_host().register_gym_ids()


def is_heldout(key: str | None, *, share: int = 8) -> bool:
    """Whether a task key falls in the held-out part (1 in ``share`` of all keys, by hash); None keys never do."""
    if key is None:
        return False
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % share == 0


def register_gym_ids(family: EnvFamily) -> None:
    """Register the family's ids with Gymnasium unless registered already (string entry points: imports nothing)."""
    import gymnasium

    for spec in family.ids:
        if spec.id not in gymnasium.registry:
            gymnasium.register(id=spec.id, entry_point=spec.entry_point,
                               max_episode_steps=spec.max_episode_steps, kwargs=dict(spec.kwargs))
