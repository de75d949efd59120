"""Env hosting: the local worker pool, the remote and Ray pools, the env server, its wire format and clients."""

__all__: list[str] = []
