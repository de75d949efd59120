"""Constrained decoding (``rollout.constrain``): answers restricted to the admissible ones, their log-probs those of
the restricted distribution, and the trainer's recomputed log-probs equal to the engine's."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError  # noqa: E402
from agentbench_crbc.rollout import RolloutRunner, RunnerConfig  # noqa: E402
from agentbench_crbc.rollout.engines.baselines import RandomPolicy  # noqa: E402
from agentbench_crbc.rollout.engines.hf import HFEngine  # noqa: E402
from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer  # noqa: E402
from agentbench_crbc.rollout.episodes.base import EngineCapabilities, SamplingParams  # noqa: E402
from agentbench_crbc.rollout.episodes.prompts import PromptBuilder  # noqa: E402
from agentbench_crbc.trainer.update import StepSample, allowed_tokens, step_logprobs  # noqa: E402

MOVES = ("up", "down", "left", "right")


@pytest.fixture(scope="module")
def tiny():
    tok = tiny_tokenizer()
    return tiny_qwen2(tok, hidden_size=32, num_layers=1, seed=3).eval(), tok


def _choices(tok):
    end = tok.convert_tokens_to_ids("<|im_end|>")
    return tuple((*tok(f"<action>{a}</action>", add_special_tokens=False)["input_ids"], end) for a in MOVES)


def test_allowed_tokens_worked_example():
    # choices (7, 1, 9), (7, 2, 9): position 0 is forced (7), position 1 branches (1 or 2), position 2 forced (9)
    s = StepSample((5, 5), (7, 2, 9), 0.0, choices=((7, 1, 9), (7, 2, 9)))
    a = allowed_tokens([s, StepSample((5,), (3,), 0.0)], 5)
    assert a.shape == (2, 5, 2)
    assert a[0, 2].tolist() == [7, -1] and a[0, 3].tolist() == [1, 2] and a[0, 4].tolist() == [9, -1]
    assert (a[0, :2] == -1).all() and (a[1] == -1).all()  # prompts and free-text steps are unrestricted


def test_every_answer_is_a_choice_and_the_choices_form_a_distribution(tiny):
    model, tok = tiny
    choices = _choices(tok)
    prompt = tuple(tok("<|im_start|>user\n#_P\n<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
                   ["input_ids"])
    eng = HFEngine(model, tok)
    outs = eng.generate([prompt] * 32, SamplingParams(temperature=1.0, max_tokens=2, seed=0),
                        choices=[choices] * 32)
    assert all(o.token_ids in choices and o.finish_reason == "stop" for o in outs)  # even past max_tokens=2
    assert len({o.token_ids for o in outs}) > 1  # it samples, not always the same answer
    for o in outs:  # the tags and the end token are forced: log-prob 0
        assert [lp for lp, t in zip(o.logprobs, o.token_ids, strict=True) if t not in {c[1] for c in choices}] == \
            pytest.approx([0.0, 0.0, 0.0], abs=1e-6)
    # the trainer's log-probs of each choice under the same restriction: they sum to one, and equal the engine's
    lps = step_logprobs(model, [StepSample(prompt, c, 0.0, choices=choices) for c in choices], pad_id=tok.pad_token_id)
    assert sum(math.exp(float(lp.sum())) for lp in lps) == pytest.approx(1.0, abs=1e-5)
    for o in outs[:4]:
        mine = lps[choices.index(o.token_ids)]
        assert np.allclose(mine, o.logprobs, atol=1e-5)
    greedy = eng.generate([prompt], SamplingParams(temperature=0.0, max_tokens=8), choices=[choices])[0]
    assert greedy.token_ids == choices[int(np.argmax([float(lp.sum()) for lp in lps]))]


def test_the_runner_restricts_every_step_and_records_the_choices(tiny):
    model, tok = tiny
    builder = PromptBuilder(tok, "abc/SokobanText-v0", template="compact", max_prompt_tokens=128)
    with RolloutRunner("abc/SokobanText-v0", HFEngine(model, tok), builder,
        RunnerConfig(group_size=4, num_workers=0, max_steps=5, constrain=True,
                     sampling=SamplingParams(max_tokens=8, seed=1))) as r:
        groups = r.collect([1, 2])
    steps = [s for g in groups for t in g.trajectories for s in t.steps]
    assert steps and all(s.valid and s.action in MOVES for s in steps)
    assert all(s.choices == _choices(tok) and s.response_ids in s.choices for s in steps)
    assert r.stats.invalid_actions == 0


def test_an_engine_that_cannot_constrain_is_refused(tiny):
    _, tok = tiny
    builder = PromptBuilder(tok, "abc/SokobanText-v0", template="compact")

    class Free:
        capabilities = EngineCapabilities()  # constrains=False
        constrains = True  # an attribute is no declaration: the record is what is read

        def generate(self, prompt_ids, sampling, images=None):  # no `choices`
            raise AssertionError("never called")

    with pytest.raises(ConfigError, match=r"^rollout\.constrain: the Free engine cannot restrict decoding to the "
                                          r"admissible answers \(its capabilities say constrains=False\)"):
        RolloutRunner("abc/SokobanText-v0", Free(), builder, RunnerConfig(constrain=True))
    assert not RolloutRunner("abc/SokobanText-v0", Free(), builder, RunnerConfig(constrain=False)).constrain
    # text policies (random, expert) answer with text: constrain does not apply to them
    assert not RolloutRunner("abc/SokobanText-v0", RandomPolicy(), builder, RunnerConfig(constrain=True)).constrain


def test_constrained_decoding_offers_only_answers_the_parser_accepts(tiny):
    # #40 item 13: a non-ASCII, over-long or blank admissible action is never offered (its answer is always invalid)
    _, tok = tiny
    builder = PromptBuilder(tok, "abc/SokobanText-v0", template="compact")

    class Constrains:
        capabilities = EngineCapabilities(constrains=True)

        def generate(self, prompt_ids, sampling, images=None, choices=None):
            raise AssertionError("never called")

    r = RolloutRunner("abc/SokobanText-v0", Constrains(), builder, RunnerConfig(constrain=True))
    good = r.answer_choices({"admissible_actions": ["up", "down"]})
    assert r.answer_choices({"admissible_actions": ["up", "caf\u00e9", "x" * 600, "  ", "down"]}) == good
    with pytest.raises(ConfigError, match=r"none of the admissible actions .* can be answered \('caf\u00e9' is not "
                                          r"printable ASCII\)"):
        r.answer_choices({"admissible_actions": ["caf\u00e9", " "]})


class _Counting:
    """The model with a count of its forwards (the engine's prefill and decode steps)."""

    def __init__(self, model):
        self.model, self.calls = model, 0
        self.config, self.forward = model.config, model.forward

    def parameters(self):
        return self.model.parameters()

    def __call__(self, **kw):
        self.calls += 1
        return self.model(**kw)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_forced_tokens_run_no_forward_and_change_no_output(tiny, monkeypatch, temperature, top_p):
    # #50 item 2: once one allowed answer continues every row left, its remaining tokens are forced: no forward
    # runs for them, and the answers, their log-probs and the random numbers drawn are the same bit for bit
    from agentbench_crbc.rollout.engines import hf

    model, tok = tiny
    moves = _choices(tok)  # <action> (forced), the move (a choice), </action> and <|im_end|> (forced)
    late = ((7, 1, 9, 4), (7, 2, 9, 4), (7, 2, 8, 4))  # branches at positions 1 and 2
    prompts = [tuple(tok(f"<|im_start|>user\n#_P{i}\n<|im_end|>\n<|im_start|>assistant\n",
                         add_special_tokens=False)["input_ids"]) for i in range(6)]
    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=6, seed=5)

    def run(skip: bool, choices):
        if not skip:
            monkeypatch.setattr(hf, "_forced_to_end", lambda *a: False)
        counting = _Counting(model)
        eng = HFEngine(model, tok)
        eng.model = counting
        outs = eng.generate(prompts, sampling, choices=choices)
        monkeypatch.undo()
        # the generator's state after the call: later draws (the next call's) see the same stream
        return [(o.token_ids, o.logprobs, o.finish_reason) for o in outs], counting.calls

    for choices, saved in (([moves] * 6, 2), ([moves, late] * 3, 1), ([moves, None] * 3, 0)):
        (plain, n_plain), (fast, n_fast) = run(False, choices), run(True, choices)
        assert fast == plain  # tokens, log-probs (floats compared exactly) and finish reasons
        assert n_plain - n_fast == saved
