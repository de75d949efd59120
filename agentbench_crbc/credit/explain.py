"""Per-group diagnostics of a credit method (``abc credit METHOD FILE --explain``), reached through the plugin host.

A method offers them by registering an explainer beside itself,
``register.add_batched("crbc", crbc, explain=explain)``, where ``explain(batch, **options)`` returns one
:class:`GroupExplanation` per group. The credit layer never imports a method's module: it asks the host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import OptionError
from ..host import Host, get_host
from ..io import json_text
from .assign import without_env_failures
from .batch import StepBatch
from .types import Group

__all__ = ["GroupExplanation", "explain", "explain_text", "explainable"]


@dataclass(frozen=True)
class GroupExplanation:
    """Diagnostics of one group: values per anchor, credit per (anchor, action), and evidence coverage by depth.

    ``states``: dicts with ``anchor``, ``visits``, ``V``, ``sigma``, ``gate``; ``pairs``: dicts with ``anchor``,
    ``action``, ``count``, ``mu``, ``Q``, ``A`` (Q - V) and ``A_step`` (the step credit). ``coverage[K]`` is the
    mean, over eligible visits (visits of gated-on anchors), of how many of the group's rollouts the visit's Q can
    draw on after K backups (``"inf"``: the full closure), as the CRBC paper's Figure 5.
    """

    group: str
    n_rollouts: int
    states: tuple[dict[str, Any], ...]
    pairs: tuple[dict[str, Any], ...]
    coverage: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "n_rollouts": self.n_rollouts, "states": list(self.states),
                "pairs": list(self.pairs), "coverage": self.coverage}


def explainable(host: Host | None = None) -> list[str]:
    """The installed credit methods that registered an explainer, sorted."""
    return [m.name for m in (host or get_host()).credit if m.explain is not None]


def explain(records: Iterable[Mapping[str, Any]] | Sequence[Group], *, method: str = "crbc",
            host: Host | None = None, **options: Any) -> list[Any]:
    """The explainer of ``method`` (default CRBC: V, Q, sigma, gate, evidence coverage by depth) on ``records``.

    Trajectories an env failure ended are left out, as in :func:`~agentbench_crbc.credit.assign`; ``options`` are
    checked against the method's own before the explainer sees them.
    """
    m = (host or get_host()).credit_method(method)
    if m.explain is None:
        have = ", ".join(explainable(host)) or "none installed"
        raise OptionError(f"credit method {method!r} has no --explain report; methods with one: {have}")
    m.check_options(options)
    healthy = without_env_failures(list(records))[0]  # type: ignore[arg-type]
    return m.explain(StepBatch.from_records(healthy), **options)  # type: ignore[no-any-return]


def _short(x: Any, n: int = 40) -> str:
    s = x if isinstance(x, str) else json_text(x)
    return s if len(s) <= n else s[: n - 3] + "..."


def explain_text(g: GroupExplanation) -> str:
    """One group's report as the text table ``abc credit --explain`` prints."""
    out = [f"group {g.group}: {g.n_rollouts} rollouts, {len(g.states)} anchors, {len(g.pairs)} (anchor, action) pairs"]
    out.append("  anchor                                    visits        V    sigma  gate")
    for s in g.states:
        out.append(f"  {_short(s['anchor']):<40} {s['visits']:>7} {s['V']:>8.4f} {s['sigma']:>8.4f}  "
                   f"{'on' if s['gate'] else 'off'}")
    out.append("  anchor                                    action                 n      mu        Q    Q-V   credit")
    for p in g.pairs:
        out.append(f"  {_short(p['anchor']):<40} {_short(p['action'], 20):<20} {p['count']:>3} {p['mu']:>7.3f} "
                   f"{p['Q']:>8.4f} {p['A']:>6.3f} {p['A_step']:>8.4f}")
    cov = "  ".join(f"K={k}: {v:.2f}" for k, v in g.coverage.items())
    out.append(f"  evidence coverage (mean rollouts per eligible visit): {cov}")
    if g.states and not any(s["gate"] for s in g.states):
        out.append("  no step credit in this group: every anchor's gate is off (sigma < sigma_min: the actions taken "
                   "from each anchor lead to equal values, e.g. every rollout succeeded alike); only the "
                   "trajectory-level term can give credit, and it is 0 when the outcomes do not vary either")
    return "\n".join(out)
