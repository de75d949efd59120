"""Prompt building: per-env templates (the paper's, as user-overridable text files) or a compact tiny-model prompt,
rendered with the tokenizer's chat template into prompt token ids (plus images for vision-language models)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...family import ADMISSIBLE_ACTIONS, PromptStyle, find_family
from ...io import read_text

__all__ = ["GENERIC", "IMAGE_MARKER", "Prompt", "PromptBuilder", "load_template", "observation_text",
           "task_description"]

#: Where a vision template puts the image; becomes ``<|vision_start|><|image_pad|>...<|vision_end|>``.
IMAGE_MARKER = "<image>"
#: The family name of ids no registered family declares (their prompts use ``generic*.txt`` of this package).
GENERIC = "generic"
_SENTINEL = "\x00CONTENT\x00"


def load_template(family: str, name: str, template_dir: str | Path | None = None) -> str:
    """Template text ``{name}.txt`` (``{family}{_vision|}{_first|}``): from ``template_dir``, else
    ``$ABC_PROMPT_DIR``, else the family's :attr:`~agentbench_crbc.family.EnvFamily.prompts` package (unknown
    families and families without templates: this package's ``prompts/generic*.txt``). Placeholders
    (``str.format``, :data:`~agentbench_crbc.family.ALLOWED_PLACEHOLDERS`): ``task_description``,
    ``step_count``, ``history_length``, ``action_history``, ``current_step``, ``current_observation``,
    ``admissible_actions``; literal braces are doubled. :data:`IMAGE_MARKER` marks where the image goes in vision
    templates."""
    fname = f"{name}.txt"
    for folder in (template_dir, os.environ.get("ABC_PROMPT_DIR")):
        if folder and (Path(folder) / fname).is_file():
            return read_text(Path(folder) / fname, error=ConfigError, where=f"prompt template {Path(folder) / fname}")
    found = find_family(family) if family != GENERIC else None
    spec = found.family if found is not None else None
    if spec is not None and spec.prompts:
        # a prompts package that does not import is one line (PluginError), not a missing template
        resource = spec.prompt_folder().joinpath(fname)
    else:  # no family, or one without templates
        generic = GENERIC + fname[len(family):] if fname.startswith(family) else fname
        resource = resources.files(__package__).joinpath("prompts", generic)
    if resource.is_file():
        return read_text(resource, error=ConfigError, where=f"prompt template {resource}")
    raise ConfigError(f"no prompt template {fname!r}; put one in --template-dir or $ABC_PROMPT_DIR")


def observation_text(obs: Any, info: Mapping[str, Any]) -> str:
    """The text of an observation: the string itself, or for image observations ``info['text']`` when present."""
    if isinstance(obs, str):
        return obs
    for key in ("text", "text_obs", "observation_text"):
        if isinstance(info.get(key), str):
            return str(info[key])
    return ""


def task_description(obs_text: str, info: Mapping[str, Any], pattern: str = "") -> str:
    """The task of an episode: ``info['task']``/``['instruction']``/``['goal']`` when a string, else the first
    group of ``pattern`` (the family's :attr:`~agentbench_crbc.family.PromptStyle.task_pattern`) in the first
    observation; ``""`` when neither gives one."""
    for key in ("task", "instruction", "goal"):
        if isinstance(info.get(key), str) and info[key]:
            return str(info[key])
    m = re.search(pattern, obs_text[:4000]) if pattern else None
    return m.group(1).strip() if m else ""


#: :attr:`PromptStyle.admissible` -> how the list of admissible actions is written into a paper template.
_ADMISSIBLE: dict[str, Callable[[Sequence[str]], str]] = {
    "quoted-lines": lambda adm: "\n ".join(f"'{a}'" for a in adm),
    "quoted-comma": lambda adm: ",\n".join(f"'{a}'" for a in adm),
    "double-quoted": lambda adm: ", ".join(f'"{a}"' for a in adm),
}


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered prompt: token ids for the engine, images (RGB arrays) in order, and its text for logs."""

    ids: tuple[int, ...]
    images: tuple[Any, ...] = ()
    text: str = field(default="", repr=False)


class PromptBuilder:
    """Turns (observation, info, history) into a :class:`Prompt` for one env family.

    ``template="paper"`` renders the GiGPO/verl-agent prompts (reasoning in ``<think>``, action in ``<action>``,
    the last ``history`` observation-action records, admissible actions, the text grid or, with an
    ``image_processor``, the RGB image) through the tokenizer's chat template. ``template="compact"`` is a fixed
    short prompt for tiny models: the chat-wrapped observation only (Sokoban: one token per grid cell, no
    instructions); it is built from cached token ids, so it is fast and deterministic. A path to a folder uses its
    ``{family}.txt``/``{family}_first.txt`` files instead of the packaged ones.

    :param tokenizer: a Hugging Face tokenizer with a chat template.
    :param env: env id or registered family name; the family's templates and
        :class:`~agentbench_crbc.family.PromptStyle` are used (ids no family declares get a generic style).
    :param image_processor: a Qwen2-VL image processor; when given, image observations go in as images.
    :param max_prompt_tokens: longer prompts lose old history first, then the middle of the text.
    :param system: an optional system message.
    """

    def __init__(self, tokenizer: Any, env: str, *, template: str = "paper", history: int = 2,
                 image_processor: Any = None, max_prompt_tokens: int | None = None,
                 system: str | None = None) -> None:
        self.tokenizer = tokenizer
        found = find_family(env)
        self.family = found.family.name if found is not None else GENERIC
        self.style: PromptStyle = found.family.prompt_style if found is not None else PromptStyle()
        self.template = template
        self.history = history
        self.image_processor = image_processor
        self.max_prompt_tokens = max_prompt_tokens
        self.system = system
        self._texts: dict[str, str] = {}
        self._char_ids: dict[str, tuple[int, ...]] = {}
        self._wrap: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        if template not in ("paper", "compact") and not Path(template).is_dir():
            raise ConfigError(f"template {template!r}: use 'paper', 'compact' or a folder of .txt templates")

    # -- public ---------------------------------------------------------------------------------------------
    def build(self, obs: Any, info: Mapping[str, Any], history: Sequence[tuple[str, str]] = (), step: int = 0,
              task: str = "") -> Prompt:
        """Render one prompt.

        :param obs: the current observation (text, or an RGB array for pixel envs).
        :param info: the env's info of this observation (``admissible_actions`` is listed when present).
        :param history: all previous ``(observation_text, action)`` records of the episode, oldest first.
        :param step: how many steps the episode has taken.
        :param task: the task description (see :func:`task_description`).
        """
        if self.template == "compact":
            return self._compact(obs, info)
        image = obs if isinstance(obs, np.ndarray) and obs.ndim == 3 else None
        vision = image is not None and self.image_processor is not None
        name = f"{self.family}{'_vision' if vision else ''}{'' if step and self.history else '_first'}"
        keep = min(self.history, len(history))
        while True:
            content = self._render(name, obs, info, history[len(history) - keep:] if keep else (), step, task,
                                   vision)
            prompt = self._chat(content, image if vision else None)
            if self.max_prompt_tokens is None or len(prompt.ids) <= self.max_prompt_tokens or keep == 0:
                break
            keep -= 1
        if self.max_prompt_tokens is not None and len(prompt.ids) > self.max_prompt_tokens and not prompt.images:
            n = self.max_prompt_tokens
            prompt = Prompt(prompt.ids[: n // 2] + prompt.ids[len(prompt.ids) - (n - n // 2):], (), prompt.text)
        return prompt

    # -- paper templates ------------------------------------------------------------------------------------
    def _template(self, name: str) -> str:
        if name not in self._texts:
            folder = self.template if self.template not in ("paper", "compact") else None
            self._texts[name] = load_template(self.family, name, folder)
        return self._texts[name]

    def _render(self, name: str, obs: Any, info: Mapping[str, Any], history: Sequence[tuple[str, str]],
                step: int, task: str, vision: bool) -> str:
        adm = self.style.visible(info.get(ADMISSIBLE_ACTIONS))
        adm_text = _ADMISSIBLE[self.style.admissible](adm or list(self.style.default_actions))
        first = step - len(history) + 1
        records = "".join(f"\n[Observation {first + j}: '{o}', Action {first + j}: '{a}']"
                          for j, (o, a) in enumerate(history))
        fields = {
            "task_description": task,
            "step_count": step,
            "history_length": len(history),
            "action_history": records,
            "current_step": step + 1,
            "current_observation": IMAGE_MARKER if vision else observation_text(obs, info),
            ADMISSIBLE_ACTIONS: adm_text,
        }
        try:
            return self._template(name).format_map(fields)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:  # {task_description.nope}
            raise ConfigError(f"prompt template {name}.txt: {type(exc).__name__}: {exc}; placeholders are "
                              f"{', '.join(sorted(fields))} and literal braces must be doubled") from None

    def _chat(self, content: str, image: Any) -> Prompt:
        tok = self.tokenizer
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.system}] if self.system else []
        if image is None:
            messages.append({"role": "user", "content": content})
        else:
            before, _, after = content.partition(IMAGE_MARKER)
            parts = [{"type": "text", "text": before}, {"type": "image"}, {"type": "text", "text": after}]
            messages.append({"role": "user", "content": [p for p in parts if p.get("text", True)]})
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = list(tok(text, add_special_tokens=False)["input_ids"])
        if image is None:
            return Prompt(tuple(ids), (), text)
        pad = tok.convert_tokens_to_ids("<|image_pad|>")
        grid = self.image_processor(images=[image], return_tensors="np")["image_grid_thw"]
        merge = int(getattr(self.image_processor, "merge_size", 2))
        n = int(np.prod(grid[0])) // (merge * merge)
        out: list[int] = []
        for i in ids:
            out.extend([pad] * n if i == pad else [i])
        return Prompt(tuple(out), (image,), text)

    # -- compact --------------------------------------------------------------------------------------------
    def _ids_of(self, s: str) -> tuple[int, ...]:
        got = self._char_ids.get(s)
        if got is None:
            got = tuple(self.tokenizer(s, add_special_tokens=False)["input_ids"])
            if len(s) <= 16 or len(self._char_ids) < 64:
                self._char_ids[s] = got
        return got

    def _compact(self, obs: Any, info: Mapping[str, Any]) -> Prompt:
        if self._wrap is None:
            msgs = [{"role": "user", "content": _SENTINEL}]
            text = self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            pre, _, post = text.partition(_SENTINEL)
            self._wrap = (self._ids_of(pre), self._ids_of(post))
        pre_ids, post_ids = self._wrap
        text = observation_text(obs, info)
        body: list[int] = []
        if self.style.compact == "cells":
            for ch in text.strip("\n"):
                body.extend(self._ids_of(ch))
        else:
            adm = self.style.visible(info.get(ADMISSIBLE_ACTIONS))
            body.extend(self._ids_of(text.strip() + ("\n" + "\n".join(adm) if adm else "")))
        if self.max_prompt_tokens is not None:
            room = max(self.max_prompt_tokens - len(pre_ids) - len(post_ids), 0)
            body = body[len(body) - room:] if room else []
        return Prompt(pre_ids + tuple(body) + post_ids, (), "")
