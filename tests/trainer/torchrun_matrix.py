"""Many ``abc train`` runs in one torchrun launch (the test of ``test_torchrun_matrix.py`` starts it): each run is
the CLI's own ``main(["train", ...])``, one after another in the same process group, so the launch's start-up cost
(torch and transformers imported by every rank) is paid once, not once per run.

    torchrun --standalone --nproc_per_node 2 tests/trainer/torchrun_matrix.py SPEC.json

``SPEC.json``: ``{"runs": [{"name", "argv", "out_dir", "resume": bool}, ...], "results": PATH}``. A run with
``resume`` continues the one run folder under its ``out_dir`` (``argv`` follows ``--resume FOLDER``). The vLLM
stand-in (``tests/standins``) is importable as ``vllm``; each run's stand-in log goes to ``OUT_DIR/vllm-log``.
Rank 0 writes ``{name: exit code}`` to ``results``. The first failed run ends the launch (the other rank may be
waiting in a collective); the end is ``destroy_process_group``, a flush and ``os._exit`` (gloo can abort at
interpreter exit otherwise).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "standins"))


class _Finished(BaseException):
    """``abc train``'s end under torchrun (its ``shutdown``), carrying the exit code, so the next run can start."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _shutdown(dist, code: int = 0, *, barrier: bool = True) -> None:
    import torch

    if barrier and torch.distributed.is_initialized():
        torch.distributed.barrier()
    raise _Finished(code)


def main(spec_path: str) -> None:
    import torch

    from agentbench_crbc.cli import main as abc
    from agentbench_crbc.trainer import loop

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    loop.shutdown = _shutdown  # one run's end is not the process's
    rank = int(os.environ.get("RANK", "0"))
    results: dict[str, int] = {}
    for run in spec["runs"]:
        out = Path(run["out_dir"])
        os.environ["ABC_VLLM_STANDIN_LOG"] = str(out / "vllm-log")
        argv = list(run["argv"])
        if run.get("resume"):
            (folder,) = [p for p in out.iterdir() if p.is_dir() and p.name != "vllm-log"]
            argv = ["train", "--resume", str(folder), *argv]
        print(f"== {run['name']}: abc {' '.join(argv)}", flush=True)
        try:
            code = abc(argv)
        except _Finished as done:
            code = done.code
        results[run["name"]] = int(code)
        if rank == 0:
            Path(spec["results"]).write_text(json.dumps(results, indent=1), encoding="utf-8")
        if code:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
