"""Play Sokoban on an `abc serve` server with OpenEnv's own client, from a plain script.

    abc serve --env sokoban --port 8000 &
    python examples/openenv_client.py ws://127.0.0.1:8000

The policy here is a stand-in (the first admissible action, or the server's expert when asked for); put a model
in `choose`. `reset(seed=s)` gives the same level as `gymnasium.make("abc/SokobanText-v0").reset(seed=s)`.
"""

from __future__ import annotations

import sys

from agentbench_crbc.rollout.hosting.openenv_client import AbcEnvClient


def choose(observation) -> str:
    return observation.expert_action or observation.admissible_actions[0]


def main(url: str, seed: int = 0) -> float:
    with AbcEnvClient(url).sync() as env:
        result = env.reset(seed=seed, expert=True)  # expert=True: the server adds its expert's action
        print(result.observation.text)
        ret = 0.0
        while not result.done:
            action = choose(result.observation)
            result = env.step(action)
            ret += result.reward or 0.0
            print(f"{action:>6} -> reward {result.reward:+.2f}  anchor {result.observation.anchor}")
        print(f"success={result.observation.success} return={ret:.2f}")
        return ret


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ws://127.0.0.1:8000")
