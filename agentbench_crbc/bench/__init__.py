"""The benchmark drivers of ``abc bench``: credit fidelity against exact advantages, tabular learning."""
