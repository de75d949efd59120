"""Package data: the paper's reported leaderboard rows (``reported.jsonl``)."""
