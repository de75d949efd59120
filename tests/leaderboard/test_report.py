"""Rendered boards: markdown/HTML tables (bold best, escaping), CSV summary and PNG figures."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
import pytest

from agentbench_crbc import hookimpl
from agentbench_crbc.host import Host, get_host, get_plugin_manager, reset_host
from agentbench_crbc.leaderboard.aggregate import build_boards
from agentbench_crbc.leaderboard.report import BASELINE_LABELS, board_html, board_markdown, method_label, render
from agentbench_crbc.leaderboard.reported import read_reported_csv

from .helpers import PAPER_CSV, rec, two_method_run


class _Labelled:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add_batched("my_method", lambda batch: batch.step_reward, label="MyMethod")
        register.add_batched("plain_method", lambda batch: batch.step_reward)


class _BadLabel:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add_batched("bad", lambda batch: batch.step_reward, label=" ")


def test_method_labels_come_from_the_registration() -> None:
    host = get_host()
    assert all(m.label for m in host.credit)
    assert [method_label(n) for n in ("progpo", "pcgpo", "gated_bepo", "gigpo")] == ["ProGPO", "PCGPO", "Gated-BEPO",
                                                                                    "GiGPO"]
    assert not set(BASELINE_LABELS) & set(host.credit.names())  # the baselines are no credit method of ours
    assert method_label("react") == "ReAct" and method_label("unknown-key") == "unknown-key"
    pm = get_plugin_manager()
    pm.register(_Labelled(), name="labelled")
    pm.register(_BadLabel(), name="bad-label")
    reset_host(Host(pm))
    try:  # a new method brings its label: no table to edit
        assert method_label("my_method") == "MyMethod" and method_label("plain_method") == "plain_method"
        (broken,) = get_host().broken
        assert broken.entry_point == "bad-label" and "label of credit method 'bad' must be a non-empty" in broken.error
    finally:
        reset_host(host)


EVIL = '<script>alert("x")</script>|<img src=x onerror=alert(1)>'
PNG = b"\x89PNG\r\n\x1a\n"


def test_markdown_methods_as_rows_subtasks_as_columns_best_in_bold() -> None:
    (board,) = build_boards(two_method_run(), reps=500)
    md = board_markdown(board).splitlines()
    assert md[0] == "| Method | Model | Type | Updates | pick | clean | All | IQM success % [95% CI] |"
    crbc, grpo = md[2], md[3]
    assert crbc.startswith("| CRBC | tiny-qwen2 | rl | 10 | **60.0 ± 10.0 (n=3)** | **90.0 ± 10.0 (n=3)** | "
                           "**82.5 ± 9.0 (n=3)** | 75.0 [")
    assert grpo.startswith("| GRPO | tiny-qwen2 | rl | 10 | 20.0 ± 0.0 (n=3) | 40.0 ± 0.0 (n=3) | 35.0 ± 0.0 (n=3) "
                           "| 30.0 [30.0, 30.0] |")


def test_webshop_board_shows_score_and_success() -> None:
    (board,) = build_boards(read_reported_csv(PAPER_CSV), env="webshop", model_scale="1.5B")
    md = board_markdown(board)
    assert md.splitlines()[0] == "| Method | Model | Type | Updates | Score | Success % |"
    assert "| CRBC† | Qwen2.5-1.5B-Instruct | rl | 150 | **90.1 ± 1.2 (n=3)** | **81.5 ± 0.7 (n=3)** |" in md
    assert "| GRPO† | Qwen2.5-1.5B-Instruct | rl | 150 | 83.3 ± 3.5 (n=3) | 71.1 ± 0.8 (n=3) |" in md
    assert "| ReAct† | Qwen2.5-1.5B-Instruct | prompting | 0 | 40.1 | 11.3 |" in md  # no std reported


def test_malicious_method_name_is_escaped() -> None:
    recs = [rec(method=EVIL, model="m<b>", success=0.9), rec(method="crbc", success=0.1)]
    (board,) = build_boards(recs)
    page = board_html(board)
    assert "<script>" not in page and "<img" not in page and "<b>" not in page.replace("<td><b>", "")
    assert html.escape(EVIL) in page
    md = board_markdown(board)
    assert "<script>" not in md and "<img" not in md
    assert "&lt;script&gt;" in md and "\\|" in md  # the pipe cannot open a new column
    row = next(line for line in md.splitlines() if "script" in line)
    assert row.count(" | ") == md.splitlines()[0].count(" | ")


@pytest.mark.slow  # draws 8 figures: about 5 s on a loaded 2-core machine
def test_render_writes_boards_figures_and_csv(tmp_path: Path) -> None:
    recs = read_reported_csv(PAPER_CSV, date="2026-11-29") + two_method_run()
    paths = render(recs, tmp_path, command="abc leaderboard render --out X", reps=500)
    names = sorted(str(p.relative_to(tmp_path)) for p in paths)
    assert "board.md" in names and "board.html" in names and "board.csv" in names
    assert "figures/alfworld_1.5B_bars.png" in names and "figures/sokoban_3B_bars.png" in names
    assert "figures/alfworld_tiny-1M_curves.png" in names  # measured records with update numbers
    assert not any("1.5B_curves" in n for n in names)  # reported rows carry no curve
    for n in names:
        if n.endswith(".png"):
            assert (tmp_path / n).read_bytes()[:8] == PNG
    md = (tmp_path / "board.md").read_text()
    assert "Made by `abc leaderboard render --out X`." in md
    assert "† Reported, not measured by this package: Ren et al., Cross-Rollout Bellman Closure" in md
    assert md.index("## ALFWorld · tiny-1M") < md.index("## ALFWorld · 1.5B") < md.index("## WebShop · 1.5B")
    assert "![ALFWorld · 1.5B · reported](figures/alfworld_1.5B_bars.png)" in md
    page = (tmp_path / "board.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and '<img src="figures/alfworld_1.5B_bars.png"' in page
    frame = pd.read_csv(tmp_path / "board.csv")
    crbc = frame[(frame.env == "alfworld") & (frame.method == "crbc") & (frame.model_scale == "7B")
                 & (frame.subtask == "all")]
    assert crbc["mean"].tolist() == [pytest.approx(0.9688)] and crbc["source"].tolist() == ["reported"]


def test_figures_are_reproducible(tmp_path: Path) -> None:
    recs = two_method_run()
    render(recs, tmp_path / "a", reps=200)
    render(recs, tmp_path / "b", reps=200)
    for name in ("board.md", "board.html", "figures/alfworld_tiny-1M_bars.png",
                 "figures/alfworld_tiny-1M_curves.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_curves_figure_colours_are_distinct_and_the_legend_is_beside_the_axes(tmp_path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    import numpy as np

    from agentbench_crbc.leaderboard import report
    from agentbench_crbc.leaderboard.aggregate import Curve

    captured = {}
    real_save = report._save

    def keep(fig, out):  # the figure as saved, for its artists
        captured["fig"] = fig
        real_save(fig, out)

    curves = [Curve(method=f"m{i}", model="tiny-qwen2", updates=np.arange(5), mean=np.linspace(0, 1, 5) * i / 12,
                    std=np.full(5, 0.01), n=np.full(5, 3)) for i in range(12)]
    monkeypatch.setattr(report, "_save", keep)
    assert report.curves_figure(curves, "twelve methods", tmp_path / "curves.png").exists()
    (ax,) = captured["fig"].axes
    colours = [tuple(line.get_color()) for line in ax.get_lines()]
    assert len(colours) == 12 and len(set(colours)) == 12  # the default 10-colour cycle would repeat two
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(captured["fig"]).get_renderer()
    legend, axes = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert legend.x0 >= axes.x1  # the legend sits right of the plot area, covering no data
