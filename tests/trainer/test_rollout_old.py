"""``optim.rollout_old_logprobs``: the rollout engine's log-probs stand in for the old policy's no-grad pass, checked
against the first training pass."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError  # noqa: E402
from agentbench_crbc.rollout.engines.hf import HFEngine  # noqa: E402
from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer  # noqa: E402
from agentbench_crbc.rollout.episodes.base import SamplingParams  # noqa: E402
from agentbench_crbc.trainer.config import OptimConfig  # noqa: E402
from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update  # noqa: E402

torch.set_num_threads(1)
TOK = tiny_tokenizer()


def _model():
    return tiny_qwen2(TOK, hidden_size=32, num_layers=1, seed=3).eval()


def _rollout(model, temperature: float) -> list[StepSample]:
    end = TOK.convert_tokens_to_ids("<|im_end|>")
    choices = tuple((*TOK(f"<action>{a}</action>", add_special_tokens=False)["input_ids"], end)
                    for a in ("up", "down", "left", "right"))
    prompts = [tuple(TOK(f"<|im_start|>user\n#_P{i}\n<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
                     ["input_ids"]) for i in range(6)]
    outs = HFEngine(model, TOK).generate(prompts, SamplingParams(temperature=temperature, max_tokens=8, seed=0),
                                         choices=[choices] * 6)
    return [StepSample(p, o.token_ids, float(i % 3) - 1.0, i % 2, i, choices=choices, logprobs=o.logprobs)
            for i, (p, o) in enumerate(zip(prompts, outs, strict=True))]


def _update(samples, reuse: bool):
    model = _model()
    cfg = OptimConfig(lr=0.5, kl_coef=0.0, grad_clip=0.0, ppo_epochs=2, mini_batch_size=3, micro_batch=64,
                      rollout_old_logprobs=reuse)
    logs = ppo_update(model.train(), torch.optim.SGD(model.parameters(), lr=0.5), samples, cfg,
                      UpdateContext(pad_id=TOK.pad_token_id), rng=np.random.default_rng(0))
    return logs, [p.detach() for p in model.parameters()]


def test_the_rollouts_log_probs_give_the_old_passes_update():
    samples = _rollout(_model(), 1.0)
    (plain, w_plain), (reuse, w_reuse) = _update(samples, False), _update(samples, True)
    assert 0.0 <= reuse["old_logprob_gap"] < 1e-5 and "old_logprob_gap" not in plain  # float rounding only
    for a, b in zip(w_plain, w_reuse, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert reuse["loss"] == pytest.approx(plain["loss"], rel=1e-4, abs=1e-6)


def test_rollouts_at_another_temperature_are_refused():
    # log_softmax(logits / 0.3) is not the policy the loss trains: the first pass sees the gap and stops the run
    with pytest.raises(ConfigError, match=r"rollout_old_logprobs.*temperature=1"):
        _update(_rollout(_model(), 0.3), True)



def test_an_engine_without_log_probs_takes_the_no_grad_pass():
    # steps without the engine's log-probs (vLLM stand-ins, a peft model's engine): the plain update, bit for bit
    bare = [StepSample(s.prompt_ids, s.response_ids, 1.0, choices=s.choices) for s in _rollout(_model(), 1.0)]
    (plain, w_plain), (reuse, w_reuse) = _update(bare, False), _update(bare, True)
    assert "old_logprob_gap" not in reuse and reuse["loss"] == plain["loss"]
    for a, b in zip(w_plain, w_reuse, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("key, value", [("rollout.temperature", "0.7"), ("rollout.top_p", "0.9")])
def test_the_config_refuses_reuse_at_another_temperature_or_top_p_before_anything_runs(key, value, tmp_path):
    from agentbench_crbc.trainer.config import load_config

    assert load_config().optim.rollout_old_logprobs  # the cpu-demo default reuses them
    with pytest.raises(ConfigError, match=rf"'optim.rollout_old_logprobs'.*{key} = {value}.*"
                                          r"set optim.rollout_old_logprobs=false"):
        load_config(overrides=(f"{key}={value}", f"out_dir={tmp_path / 'run'}"))
    assert not (tmp_path / "run").exists()
    cfg = load_config(overrides=(f"{key}={value}", "optim.rollout_old_logprobs=false"))
    assert not cfg.optim.rollout_old_logprobs and cfg.optim.dedup_prompts
