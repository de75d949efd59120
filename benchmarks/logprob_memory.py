"""Peak memory of the training log-prob pass: full-vocabulary ``token_logprobs`` vs ``response_logprobs``.

The paper's shapes (a micro-batch of prompt 5,120 + response 512 tokens) with Qwen2.5's real vocabulary (151,936) on
a narrow Qwen2 (hidden 64, one layer), so the LM head and the softmax dominate as they do in the real model. Each
variant runs forward + backward in its own process; the peak is the process's peak resident memory (CPU) or
``torch.cuda.max_memory_allocated`` (CUDA), minus what was in use before the pass.

    python benchmarks/logprob_memory.py                 # batch 1 (the full pass needs ~10 GB per sequence)
    python benchmarks/logprob_memory.py --batch 8 --device cuda
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

QWEN_VOCAB = 151_936


def _peak_bytes(device: str) -> int:
    import torch

    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated())
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def run_one(args: argparse.Namespace) -> dict[str, float]:
    """One variant, forward + backward, in this process."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agentbench_crbc.trainer.loss import response_logprobs, token_logprobs

    torch.manual_seed(0)
    dev = torch.device(args.device)
    cfg = Qwen2Config(vocab_size=args.vocab, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=128, max_position_embeddings=8192,
                      tie_word_embeddings=True)
    model = Qwen2ForCausalLM(cfg).to(dev, torch.bfloat16)
    length = args.prompt + args.response
    ids = torch.randint(0, args.vocab, (args.batch, length), device=dev)
    att = torch.ones_like(ids)
    resp = torch.zeros_like(ids, dtype=torch.bool)
    resp[:, args.prompt:] = True
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base = _peak_bytes(args.device) if dev.type == "cuda" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    if args.variant == "full":
        lp, _ = token_logprobs(model, ids, att)
    else:
        lp, _ = response_logprobs(model, ids, att, resp, chunk_tokens=args.chunk)
    (lp * resp).sum().backward()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = _peak_bytes(args.device)
    sample = lp[resp].detach().float()[:64].tolist()
    return {"peak_gb": (peak - base) / 1e9, "seconds": seconds, "sample": sample}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=5120)
    ap.add_argument("--response", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=QWEN_VOCAB)
    ap.add_argument("--chunk", type=int, default=1024, help="response_logprobs' chunk_tokens")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--variant", choices=["full", "response"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.variant:
        print(json.dumps(run_one(args)))
        return 0
    common = ["--batch", str(args.batch), "--prompt", str(args.prompt), "--response", str(args.response),
              "--vocab", str(args.vocab), "--chunk", str(args.chunk), "--device", args.device]
    res = {}
    for variant in ("full", "response"):
        out = subprocess.run([sys.executable, __file__, *common, "--variant", variant], capture_output=True,
                             text=True, check=True)
        res[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    diff = max(abs(a - b) for a, b in zip(res["full"]["sample"], res["response"]["sample"], strict=True))
    print(f"micro-batch {args.batch} x ({args.prompt} prompt + {args.response} response) tokens, vocab {args.vocab}, "
          f"bf16 narrow Qwen2, forward + backward on {args.device}")
    for variant, name in (("full", "token_logprobs (full vocabulary, every position)"),
                          ("response", f"response_logprobs (response rows, chunks of {args.chunk})")):
        print(f"  {name:55s} peak {res[variant]['peak_gb']:6.2f} GB  {res[variant]['seconds']:6.2f} s")
    print(f"  peak ratio {res['full']['peak_gb'] / max(res['response']['peak_gb'], 1e-9):.1f}x; "
          f"max |log-prob difference| over 64 response tokens {diff:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
