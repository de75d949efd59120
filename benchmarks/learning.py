"""The CPU learning benchmark, `abc bench` (the code: agentbench_crbc/bench/learning.py; docs/benchmarks.md)."""

from agentbench_crbc.bench.learning import main

if __name__ == "__main__":
    raise SystemExit(main())
