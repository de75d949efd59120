"""Gymnasium environments of agentbench-crbc; importing this package registers the ``abc/*`` ids."""
