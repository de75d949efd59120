"""Rendered boards: markdown and HTML tables (best in bold, text escaped), a CSV summary, PNG figures.

pandas writes the CSV summary and matplotlib draws the figures (both maintained and already in the
``leaderboard`` extra); tables are formatted here because each cell mixes mean, std, n and bold.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..io import atomic_open, atomic_write_text
from ..textsafe import csv_safe, md_code, md_text
from .aggregate import Board, Cell, Curve, Entry, build_boards, learning_curves
from .records import RunRecord

__all__ = [
    "BASELINE_LABELS",
    "bars_figure",
    "board_heading",
    "board_html",
    "board_markdown",
    "board_title",
    "csv_safe",
    "curves_figure",
    "env_label",
    "method_label",
    "render",
    "summary_csv",
    "summary_frame",
]

#: Display names of the reported baselines that are no credit method of this package (the paper's API models,
#: prompting agents and PPO); a credit method's label is registered with it (``register.add(..., label=)``).
BASELINE_LABELS = {
    "gpt-4o": "GPT-4o", "gemini-2.5-pro": "Gemini-2.5-Pro", "prompt": "Prompting", "react": "ReAct",
    "reflexion": "Reflexion", "ppo": "PPO",
}
REPORTED_MARK = "†"


def env_label(name: str) -> str:
    """The display name of an environment: its family's :attr:`~agentbench_crbc.family.EnvFamily.label`, else
    the name itself."""
    from ..host import get_host

    host = get_host()
    return host.family(name).label if name in host.families else name


def method_label(key: str) -> str:
    """The display name of a board's method key: the registered credit method's ``label``, else the baseline's
    (:data:`BASELINE_LABELS`), else the key itself."""
    from ..host import get_host

    host = get_host()
    return host.credit_method(key).label if key in host.credit else BASELINE_LABELS.get(key, key)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def _num(x: float, metric: str, like: float | None = None) -> str:
    """Success in percent with one decimal; a score with one decimal from 10 up, else two (std follows its mean)."""
    if metric == "success":
        return f"{100.0 * x:.1f}"
    return f"{x:.1f}" if abs(x if like is None else like) >= 10 else f"{x:.2f}"


def _cell_text(cell: Cell | None, metric: str) -> str:
    if cell is None:
        return "–"
    text = _num(cell.mean, metric)
    if cell.std is not None:
        text += f" ± {_num(cell.std, metric, like=cell.mean)}"
    if cell.n is not None:
        text += f" (n={cell.n})"
    return text


def _columns(board: Board) -> list[tuple[str, str, str]]:
    """(metric, subtask, header) per value column."""
    cols = []
    for sub in board.subtasks:
        name = "All" if sub == "all" else sub
        if board.has_score:
            only = board.subtasks == ("all",)
            cols.append(("score", sub, "Score" if only else f"{name} score"))
            cols.append(("success", sub, "Success %" if only else f"{name} success %"))
        else:
            cols.append(("success", sub, name))
    return cols


def _is_best(board: Board, e: Entry, metric: str, sub: str) -> bool:
    cell = getattr(e, metric).get(sub)
    best = board.best(metric, sub)
    return cell is not None and best is not None and _num(cell.mean, metric) == _num(best, metric)


#: The interval column's name: the package's own text, shown as written (record text in headers is escaped).
_IQM_HEADER = "IQM success % [95% CI]"


def _rows(board: Board) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Header and body cells (text, bold) shared by the markdown and HTML renderers."""
    cols = _columns(board)
    with_iqm = any(e.iqm is not None for e in board.entries)
    header = ["Method", "Model", "Type", "Updates", *(c[2] for c in cols)]
    if with_iqm:
        header.append(_IQM_HEADER)
    body = []
    for e in board.entries:
        label = method_label(e.method) + (REPORTED_MARK if e.source == "reported" else "")
        row = [(label, False), (e.model, False), (e.kind, False), (str(e.update), False)]
        for metric, sub, _ in cols:
            row.append((_cell_text(getattr(e, metric).get(sub), metric), _is_best(board, e, metric, sub)))
        if with_iqm:
            if e.iqm is None or e.ci is None:
                row.append(("–", False))
            else:
                row.append((f"{100 * e.iqm:.1f} [{100 * e.ci[0]:.1f}, {100 * e.ci[1]:.1f}]", False))
        body.append(row)
    return header, body


def board_title(board: Board) -> str:
    """A board's heading: environment, scale and what measured it (:attr:`Board.section`), as plain text."""
    return f"{env_label(board.env)} · {board.model_scale} · {board.section}"


def _md_escape(text: str) -> str:
    return md_text(text)


def board_heading(board: Board) -> str:
    """The Markdown heading of one board (env label and model scale escaped: record text never renders live)."""
    return f"## {md_text(board_title(board))}"


def board_markdown(board: Board) -> str:
    """One board as a GitHub markdown table (every text inert, :func:`~agentbench_crbc.textsafe.md_text`; best of
    each column in bold)."""
    header, body = _rows(board)
    lines = ["| " + " | ".join(h if h == _IQM_HEADER else _md_escape(h) for h in header) + " |",
             "|" + "|".join(["---"] * 4 + ["---:"] * (len(header) - 4)) + "|"]
    for row in body:  # the four text columns come from records; the numbers are the package's own formatting
        cells = [(_md_escape(t) if i < 4 else t, bold) for i, (t, bold) in enumerate(row)]
        lines.append("| " + " | ".join(f"**{x}**" if bold else x for x, bold in cells) + " |")
    return "\n".join(lines) + "\n"


def board_html(board: Board) -> str:
    """One board as an HTML table; every text is escaped with :func:`html.escape`."""
    header, body = _rows(board)
    out = [f"<table>\n<caption>{html.escape(board_title(board))}</caption>",
           "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead>", "<tbody>"]
    for row in body:
        cells = "".join(f"<td><b>{html.escape(t)}</b></td>" if bold else f"<td>{html.escape(t)}</td>"
                        for t, bold in row)
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody>\n</table>")
    return "\n".join(out) + "\n"


def summary_frame(boards: Sequence[Board]) -> Any:
    """A tidy ``pandas.DataFrame``: one row per (board, entry, metric, subtask) with mean, std, n, IQM and CI."""
    import pandas as pd

    rows = []
    for b in boards:
        for e in b.entries:
            for metric in ("success", "score"):
                for sub, cell in getattr(e, metric).items():
                    rows.append({"env": b.env, "model_scale": b.model_scale, "method": e.method, "model": e.model,
                                 "source": e.source, "kind": e.kind, "update": e.update, "metric": metric,
                                 "subtask": sub, "mean": cell.mean, "std": cell.std, "n": cell.n,
                                 "iqm": e.iqm if metric == "success" else None,
                                 "ci_low": e.ci[0] if e.ci and metric == "success" else None,
                                 "ci_high": e.ci[1] if e.ci and metric == "success" else None,
                                 "citation": e.citation})
    return pd.DataFrame(rows, columns=["env", "model_scale", "method", "model", "source", "kind", "update",
                                       "metric", "subtask", "mean", "std", "n", "iqm", "ci_low", "ci_high",
                                       "citation"])


def summary_csv(boards: Sequence[Board]) -> str:
    """:func:`summary_frame` as CSV text, string cells escaped with :func:`csv_safe`."""
    from pandas.api.types import is_numeric_dtype

    frame = summary_frame(boards)
    for col in frame.columns:
        if not is_numeric_dtype(frame[col]):
            frame[col] = frame[col].map(csv_safe)
    return str(frame.to_csv(index=False))


def _save(fig: Any, path: Path) -> None:
    with atomic_open(path, "wb") as fh:  # no Software/date metadata: the same data give the same bytes
        fig.savefig(fh, format="png", dpi=110, metadata={"Software": None})


def _palette(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def bars_figure(board: Board, path: str | Path) -> Path:
    """Grouped bars of success % per subtask (one bar per entry, std as error bars; hatched = reported)."""
    from matplotlib.figure import Figure

    subs = list(board.subtasks)
    entries = [e for e in board.entries if e.success]
    width = 0.84 / max(len(entries), 1)
    fig = Figure(figsize=(min(11.0, 3.0 + 1.2 * len(subs)), 4.2))
    ax = fig.add_subplot()
    x = np.arange(len(subs))
    colors = _palette(len(entries))
    for i, e in enumerate(entries):
        means = [100 * e.success[s].mean if s in e.success else np.nan for s in subs]
        has_std = any(s in e.success and e.success[s].std is not None for s in subs)
        errs = [100 * (e.success[s].std or 0.0) if s in e.success else 0.0 for s in subs] if has_std else None
        ax.bar(x + (i - (len(entries) - 1) / 2) * width, means, width, yerr=errs, capsize=1.5,
               error_kw={"elinewidth": 0.8}, color=colors[i],
               label=method_label(e.method) + (REPORTED_MARK if e.source == "reported" else ""),
               hatch="//" if e.source == "reported" else None, edgecolor="white", linewidth=0.3)
    ax.set_xticks(x, ["All" if s == "all" else s for s in subs])
    ax.set_ylabel("success %")
    ax.set_ylim(0, 105)
    ax.set_title(f"{board_title(board)}: success per subtask ({REPORTED_MARK} reported, hatched)")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    out = Path(path)
    _save(fig, out)
    return out


def curves_figure(curves: Sequence[Curve], title: str, path: str | Path) -> Path:
    """Learning curves: mean success % on ``all`` against update, ±std band over seeds."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.4, 4.0))
    ax = fig.add_subplot()
    colors = _palette(len(curves))  # one colour per curve (tab20 past ten), never the 10-colour cycle repeating
    for i, c in enumerate(curves):
        label = f"{method_label(c.method)} ({c.model}, n={int(c.n.min())}-{int(c.n.max())})" \
            if c.n.min() != c.n.max() else f"{method_label(c.method)} ({c.model}, n={int(c.n[0])})"
        line = ax.plot(c.updates, 100 * c.mean, marker="o", markersize=3, label=label, color=colors[i],
                       linestyle=("-", "--", ":")[i // 20 % 3])[0]
        ax.fill_between(c.updates, 100 * (c.mean - c.std), 100 * (c.mean + c.std), alpha=0.2,
                        color=line.get_color(), linewidth=0)
    ax.set_xlabel("update")
    ax.set_ylabel("success % (all subtasks)")
    ax.set_title(title)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the data, not on it
    fig.tight_layout()
    out = Path(path)
    _save(fig, out)
    return out


def _board_slug(b: Board) -> str:
    """A board's file-name stem: env and scale, and for measured boards the budget and revision they record (and a
    short digest of the machine, when recorded: two machines' boards are two files)."""
    import hashlib

    stem = f"{_slug(b.env)}_{_slug(b.model_scale)}"
    budget = f"_{b.budget}u" if b.measured and b.budget is not None else ""
    machine = f"_m{hashlib.sha256(b.machine.encode()).hexdigest()[:6]}" if b.measured and b.machine else ""
    return (stem + budget + ("_cut" if b.cut else "") + (f"_{_slug(b.revision)}" if b.measured and b.revision else "")
            + machine)


def _figures(records: Sequence[RunRecord], boards: Sequence[Board], out: Path,
             select: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per board (by its file stem), its figures: success per subtask; for measured boards, its runs' curves."""
    figs: dict[str, list[str]] = {}
    for b in boards:
        rel = f"figures/{_board_slug(b)}_bars.png"
        bars_figure(b, out / rel)
        figs[_board_slug(b)] = [rel]
        if not b.measured:
            continue  # learning curves come from measured records only
        mine = [r for r in records if r.source == "measured" and r.env == b.env and r.model_scale == b.model_scale
                and r.budget == b.budget and r.revision == b.revision and r.cut == b.cut and r.machine == b.machine]
        for curves in learning_curves(mine, env=b.env, methods=select.get("methods")).values():
            rel = f"figures/{_board_slug(b)}_curves.png"
            curves_figure(curves, f"{board_title(b)}: learning curves", out / rel)
            figs[_board_slug(b)].append(rel)
    return figs


def _citations(boards: Sequence[Board]) -> list[str]:
    return sorted({e.citation for b in boards for e in b.entries if e.source == "reported" and e.citation})


_NOTES = ("Cells: mean ± std over seeds, with n = seeds; success in percent. Measured rows: sample std (ddof=1) "
          "over this package's runs; reported rows: the paper's mean and std as printed. "
          "Bold: the best mean of the column within the table. "
          "IQM: interquartile mean of success over (seed, subtask) pairs with a 95% stratified percentile "
          "bootstrap interval (rliable's method; measured rows only). "
          "Updates: the policy update the evaluation followed (reported RL rows: the paper's 150).")


def _render_md(boards: Sequence[Board], figs: Mapping[str, list[str]], command: str) -> str:
    out = ["# Leaderboard", "", f"Made by {md_code(command)}.", "", _NOTES, ""]
    for cite in _citations(boards):
        out.append(f"{REPORTED_MARK} Reported, not measured by this package: {_md_escape(cite)}.")
    out.append("")
    for b in boards:
        out += [board_heading(b), "", board_markdown(b)]
        for rel in figs.get(_board_slug(b), []):
            out += [f"![{_md_escape(board_title(b))}]({rel})", ""]
    return "\n".join(out).rstrip() + "\n"


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;"
        "margin:1em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}"
        "td:nth-child(-n+4),th:nth-child(-n+4){text-align:left}caption{font-weight:bold;text-align:left}"
        "img{max-width:100%}")


def _render_html(boards: Sequence[Board], figs: Mapping[str, list[str]], command: str) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en">', '<head><meta charset="utf-8"><title>agentbench-crbc leaderboard'
           f"</title><style>{_CSS}</style></head>", "<body>", "<h1>Leaderboard</h1>",
           f"<p>Made by <code>{html.escape(command)}</code>.</p>", f"<p>{html.escape(_NOTES)}</p>"]
    for cite in _citations(boards):
        out.append(f"<p>{REPORTED_MARK} Reported, not measured by this package: {html.escape(cite)}.</p>")
    for b in boards:
        out += [f"<h2>{html.escape(board_title(b))}</h2>", board_html(b)]
        for rel in figs.get(_board_slug(b), []):
            out.append(f'<p><img src="{html.escape(rel)}" alt="{html.escape(board_title(b))}"></p>')
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def render(records: Sequence[RunRecord], out_dir: str | Path, *, command: str = "abc leaderboard render",
           figures: bool = True, reps: int = 10_000, seed: int = 0, **select: Any) -> list[Path]:
    """Write ``board.md``, ``board.html``, ``board.csv`` and ``figures/*.png`` under ``out_dir`` (atomically).

    :param command: the command line recorded in the boards.
    :param select: ``env``, ``model_scale``, ``methods``, ``source`` filters for :func:`build_boards`.
    :returns: the written paths.
    """
    out = Path(out_dir)
    boards = build_boards(records, reps=reps, seed=seed, **select)
    figs = _figures(records, boards, out, select) if figures else {}
    atomic_write_text(out / "board.md", _render_md(boards, figs, command))
    atomic_write_text(out / "board.html", _render_html(boards, figs, command))
    atomic_write_text(out / "board.csv", summary_csv(boards))
    return [out / "board.md", out / "board.html", out / "board.csv", *(out / r for v in figs.values() for r in v)]
