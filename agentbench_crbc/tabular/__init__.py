"""Finite MDPs with exact behaviour-policy values: the ground truth that credit methods are measured against."""

from __future__ import annotations

from .dp import ExactValues, exact_gradient, exact_json, exact_values, occupancy, success_probability
from .mdp import MdpError, TabularMDP, load_mdp, mdp_from_dict
from .sample import Episodes, sample_episodes, to_records

__all__ = [
    "Episodes",
    "ExactValues",
    "MdpError",
    "TabularMDP",
    "exact_gradient",
    "exact_json",
    "exact_values",
    "load_mdp",
    "mdp_from_dict",
    "occupancy",
    "sample_episodes",
    "success_probability",
    "to_records",
]
