"""Gymnasium environments of agentbench-crbc; importing this package registers every family's ids.

Each family is one subpackage with a ``family.py`` spec registered through the ``agentbench_crbc`` entry-point
group (as a third-party family is); the ids are registered with string entry points only, so importing this
package never imports an optional engine (alfworld, flask, selenium). The families, built-in or not, are
``agentbench_crbc.family.families()``.
"""

from __future__ import annotations

from agentbench_crbc import host

__all__ = ["register_all"]


def register_all() -> None:
    """Register the Gymnasium ids of every registered family that are not registered yet (idempotent)."""
    if host.host_building():  # imported as the parent of a family module: the host registers the ids once built
        return
    host.get_host().register_gym_ids()


register_all()
