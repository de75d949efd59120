"""response_logprobs equals token_logprobs at response positions (values, entropy, gradients) with less memory."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer  # noqa: E402
from agentbench_crbc.trainer.loss import (  # noqa: E402
    response_logprobs,
    token_logprobs,
)


def _batch(vocab: int, seed: int = 0):
    """Right-padded rows of different prompt and response lengths, as the trainer packs them."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(9, 4), (3, 7), (14, 1), (5, 5)]
    width = max(p + r for p, r in shapes) + 2
    ids = torch.zeros((len(shapes), width), dtype=torch.long)
    att = torch.zeros_like(ids)
    resp = torch.zeros_like(ids, dtype=torch.bool)
    for i, (p, r) in enumerate(shapes):
        ids[i, :p + r] = torch.randint(0, vocab, (p + r,), generator=g)
        att[i, :p + r] = 1
        resp[i, p:p + r] = True
    return ids, att, resp


@pytest.fixture(scope="module")
def model():
    tok = tiny_tokenizer()
    return tiny_qwen2(tok).float()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk", [1, 5, 1024])
def test_values_and_entropy_equal_the_full_vocabulary_pass(model, temperature, chunk):
    ids, att, resp = _batch(model.config.vocab_size)
    with torch.no_grad():
        full, full_ent = token_logprobs(model, ids, att, temperature=temperature, entropy=True)
        lp, ent = response_logprobs(model, ids, att, resp, temperature=temperature, entropy=True, chunk_tokens=chunk)
    m = resp.float()
    assert torch.allclose(lp, full * m, atol=1e-5, rtol=0)
    assert torch.allclose(ent, full_ent * m, atol=1e-5, rtol=0)
    assert (lp[~resp] == 0).all() and (lp[resp] < 0).all()


def test_gradients_equal_the_full_vocabulary_pass(model):
    ids, att, resp = _batch(model.config.vocab_size, seed=1)
    adv = torch.tensor([1.0, -0.5, 2.0, 0.3])[:, None]

    def grads(fn):
        model.zero_grad(set_to_none=True)
        lp, ent = fn()
        ((lp * adv * resp).sum() + 0.1 * (ent * resp).sum()).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    a = grads(lambda: token_logprobs(model, ids, att, entropy=True))
    b = grads(lambda: response_logprobs(model, ids, att, resp, entropy=True, chunk_tokens=7))
    for n in a:
        assert torch.allclose(a[n], b[n], atol=1e-5, rtol=1e-4), n


def test_through_peft_and_with_an_empty_response(model):
    from peft import LoraConfig, get_peft_model

    ids, att, resp = _batch(model.config.vocab_size, seed=2)
    with warnings.catch_warnings():  # peft 0.21 on transformers 5.24 warns about a renamed attribute
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        lora = get_peft_model(tiny_qwen2(tiny_tokenizer()).float(), LoraConfig(r=2, target_modules=["q_proj"]))
    with torch.no_grad():
        full, _ = token_logprobs(lora, ids, att)
        lp, ent = response_logprobs(lora, ids, att, resp)
        assert ent is None and torch.allclose(lp, full * resp, atol=1e-5, rtol=0)
        empty, _ = response_logprobs(lora, ids, att, torch.zeros_like(resp))
    assert (empty == 0).all()
    with pytest.raises(ValueError, match="chunk_tokens"):
        response_logprobs(lora, ids, att, resp, chunk_tokens=0)
