"""Leaderboard: records, aggregation (mean +- std, IQM, bootstrap CI) and rendered boards."""
