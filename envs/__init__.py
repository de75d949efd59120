"""Gymnasium environments of agentbench-crbc; importing this package registers the ``abc/*`` ids.

Each subpackage exposes ``register_envs()``, which registers string entry points only, so that importing this
package never imports an optional engine (alfworld, flask, selenium).
"""

from __future__ import annotations

from . import alfworld, sokoban, webshop

__all__ = ["ENV_FAMILIES", "register_all"]

ENV_FAMILIES = ("sokoban", "alfworld", "webshop")


def register_all() -> None:
    """Register every ``abc/*`` id that is not registered yet (idempotent)."""
    for family in (sokoban, alfworld, webshop):
        family.register_envs()


register_all()
