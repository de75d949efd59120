"""Action projection: model text -> one admissible action, or an invalid flag (never raises, linear time)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...family import MAX_ACTION_CHARS

__all__ = ["INVALID_ACTION", "MAX_ACTION_CHARS", "ParsedAction", "is_template", "parse_action"]

#: What an invalid step sends to the environment (which answers it as an unknown command) and records as its action.
INVALID_ACTION = "<invalid>"

_OPEN, _CLOSE = "<action>", "</action>"


@dataclass(frozen=True, slots=True)
class ParsedAction:
    """The outcome of parsing one response.

    :param action: the action to execute (an admissible command, normalised) or :data:`INVALID_ACTION`.
    :param valid: whether the response parsed to an admissible action.
    :param reason: ``""`` when valid, else why not (``no_tag``, ``unclosed``, ``nested``, ``multiple``, ``empty``,
        ``too_long``, ``non_ascii``, ``not_admissible``, ``error``).
    :param raw: the text between the tags (at most :data:`MAX_ACTION_CHARS` characters kept).
    """

    action: str
    valid: bool
    reason: str = ""
    raw: str = ""


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def is_template(command: str, free_arguments: Sequence[str]) -> bool:
    """Whether ``command`` is ``name[PLACEHOLDER]`` for one of ``free_arguments`` (``search[<query>]``)."""
    lb = command.find("[")
    return lb > 0 and command.endswith("]") and command[lb + 1:-1].strip() in free_arguments


def _match(body: str, admissible: Sequence[str], free_arguments: Sequence[str]) -> str | None:
    """The admissible command ``body`` names (case and whitespace insensitive); a template (``search[<query>]``,
    :func:`is_template` with the family's ``free_arguments``) admits any non-empty argument."""
    key = _norm(body)
    for cmd in admissible:
        if _norm(cmd) == key:
            return cmd
    for cmd in admissible:
        lb = cmd.find("[")
        if is_template(cmd, free_arguments):
            prefix = cmd[: lb + 1].lower()
            if key.startswith(prefix) and key.endswith("]") and key[len(prefix):-1].strip():
                return body.strip()[: len(prefix)].lower() + body.strip()[len(prefix):]
    return None


def parse_action(text: object, admissible: Sequence[str] | None = None, *, max_chars: int = MAX_ACTION_CHARS,
                 free_arguments: Sequence[str] = ()) -> ParsedAction:
    """Extract the one ``<action>...</action>`` of ``text`` and check it against ``admissible``.

    Rules (verl-agent's projection, made stricter): exactly one opening and one closing tag, in that order, no tag
    nested inside; a non-empty printable-ASCII body of at most ``max_chars`` characters; when ``admissible`` is given,
    the body must name one of its commands (case and whitespace insensitive; a template entry such as WebShop's
    ``search[...]``, whose placeholder is one of ``free_arguments``, admits any argument). Reasoning in
    ``<think>...</think>`` before the action is allowed and ignored. Anything else gives
    ``ParsedAction(INVALID_ACTION, False, reason)``. Runs in time linear in ``len(text)``; never raises.

    :param text: the decoded response (non-strings are invalid).
    :param admissible: the env's admissible commands, or ``None`` to accept any well-formed action.
    :param free_arguments: the family's :attr:`~agentbench_crbc.family.PromptStyle.free_arguments`.
    """
    try:
        if not isinstance(text, str):
            return ParsedAction(INVALID_ACTION, False, "error")
        first = text.find(_OPEN)
        if first < 0:
            return ParsedAction(INVALID_ACTION, False, "no_tag")
        start = first + len(_OPEN)
        end = text.find(_CLOSE, start)
        if end < 0:
            return ParsedAction(INVALID_ACTION, False, "unclosed")
        body = text[start:end]
        if _OPEN in body:
            return ParsedAction(INVALID_ACTION, False, "nested", body[:max_chars])
        rest = end + len(_CLOSE)
        if text.find(_OPEN, rest) >= 0 or text.find(_CLOSE, rest) >= 0 or text.find(_CLOSE, 0, first) >= 0:
            return ParsedAction(INVALID_ACTION, False, "multiple", body[:max_chars])
        if len(body) > max_chars:
            return ParsedAction(INVALID_ACTION, False, "too_long", body[:max_chars])
        body = body.strip()
        if not body:
            return ParsedAction(INVALID_ACTION, False, "empty")
        if not body.isascii() or not body.isprintable():
            return ParsedAction(INVALID_ACTION, False, "non_ascii", body)
        if admissible is None:
            return ParsedAction(" ".join(body.split()), True, "", body)
        cmd = _match(body, admissible, free_arguments)
        if cmd is None:
            return ParsedAction(INVALID_ACTION, False, "not_admissible", body)
        return ParsedAction(cmd, True, "", body)
    except Exception:  # pragma: no cover - defensive: a parser bug must not stop a rollout
        return ParsedAction(INVALID_ACTION, False, "error")
