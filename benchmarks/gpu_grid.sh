#!/usr/bin/env bash
# A slice of the benchmark grid on the lent GPU machine (one GPU, 16 cores): methods x seeds of the default tier
# (tiny-1M, the CPU demo's config) as parallel cells of benchmarks/update_ablation.py, inside 8 minutes.
#
#     OUT=/path/to/empty/folder bash benchmarks/gpu_grid.sh            # there (carry .whl/ when the image lacks
#                                                                      # packages: benchmarks/gpu_wheels.py builds it)
#     bash benchmarks/gpu_grid.sh --rehearse                           # here: the same on this CPU, tiny budget
#
# Cells: GRID_METHODS (default grpo,gigpo,crbc) x GRID_SEEDS (default 0,1,2), GRID_WORKERS at once (default 9 there,
# 2 here), each `abc train --credit M` with GRID_UPDATES updates (default 20 there, 1 here) and a cap of
# GRID_MINUTES on its RL stage (default 5; the final validation still runs); the cells are killed at GRID_LIMIT s
# (default 470 there, 1800 in a rehearsal on a shared CPU).
# Writes $OUT/grid/results.jsonl (one result line per cell: update_ablation's, with the run's kernels and wall
# time) and $OUT/grid/logs/; prints per cell its wall time and, with --rehearse, an estimate of a full cell's time
# on this machine (setup and validation scaled to the full episodes, plus the measured update time x updates).
# --rehearse copies the tracked files to a temporary folder and runs from there (nothing of the checkout is used
# but the installed package), so it passes from a clean copy or not at all.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${GRID_PYTHON:-python3}"
REHEARSE=0
[ "${1:-}" = "--rehearse" ] && REHEARSE=1
if [ "$REHEARSE" = 1 ]; then
  PY="${GRID_PYTHON:-$(command -v python)}"
  : "${OUT:=$(mktemp -d "${TMPDIR:-/tmp}/abc-grid-rehearse.XXXXXX")}"
  CLEAN="$(mktemp -d "${TMPDIR:-/tmp}/abc-grid-clean.XXXXXX")"
  (cd "$ROOT" && git ls-files -z | xargs -0 cp --parents -t "$CLEAN") || { echo "gpu grid: copy failed" >&2; exit 1; }
  export GRID_UPDATES="${GRID_UPDATES:-1}" GRID_WORKERS="${GRID_WORKERS:-2}" GRID_SEEDS="${GRID_SEEDS:-0}"
  export GRID_EPISODES="${GRID_EPISODES:-4}" GRID_DEVICE=cpu GRID_LIMIT="${GRID_LIMIT:-1800}"
  OUT="$OUT" GRID_PYTHON="$PY" GRID_CLEAN=1 bash "$CLEAN/benchmarks/gpu_grid.sh"
  rc=$?
  rm -rf "$CLEAN"
  echo "gpu grid rehearsal: $([ $rc = 0 ] && echo ok || echo FAILED) (results in $OUT/grid)"
  exit $rc
fi
: "${OUT:?set OUT to the folder the results go to}"
METHODS="${GRID_METHODS:-grpo,gigpo,crbc}"
SEEDS="${GRID_SEEDS:-0,1,2}"
WORKERS="${GRID_WORKERS:-9}"
UPDATES="${GRID_UPDATES:-20}"
MINUTES="${GRID_MINUTES:-5}"
EPISODES="${GRID_EPISODES:-128}"
DEVICE="${GRID_DEVICE:-auto}"
LIMIT="${GRID_LIMIT:-470}"
mkdir -p "$OUT/grid"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/abc-grid.XXXXXX")"
shopt -s nullglob
wheels=("$ROOT"/.whl/*.whl)
if [ ${#wheels[@]} -gt 0 ]; then  # the GPU image: the project and what it lacks come as wheels, no network
  "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --target "$WORK/site" \
    "${wheels[@]}" > "$OUT/grid/install.log" 2>&1 || { echo "gpu grid: pip install of .whl/ failed" >&2; exit 1; }
  export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false SDL_VIDEODRIVER=dummy
# `abc` for update_ablation: this Python on the installed package, never the source tree's (no plugins/ in it)
printf '#!/bin/sh\nexec "%s" -m agentbench_crbc "$@"\n' "$PY" > "$WORK/abc" && chmod +x "$WORK/abc"
cells=(); for m in ${METHODS//,/ }; do cells+=(--cell "$m"); done
seeds=(); for s in ${SEEDS//,/ }; do seeds+=(--seed "$s"); done
cd "$WORK" || exit 1
t0=$(date +%s)
timeout --kill-after=10 "$LIMIT" "$PY" "$ROOT/benchmarks/update_ablation.py" run "${cells[@]}" "${seeds[@]}" \
  --workers "$WORKERS" --abc "$WORK/abc" --out "$OUT/grid" --set "updates=$UPDATES" --set "max_minutes=$MINUTES" \
  --set "eval.episodes=$EPISODES" --set "device=$DEVICE" --set "threads=1"
rc=$?
[ $rc = 124 ] && echo "gpu grid: the $LIMIT s limit fired; the cells that finished are in $OUT/grid/results.jsonl" >&2
"$PY" - "$OUT/grid/results.jsonl" "$UPDATES" "$EPISODES" "${GRID_CLEAN:-0}" "$(( $(date +%s) - t0 ))" <<'EOF'
import json, sys
from pathlib import Path
path, updates, episodes, rehearse, total = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
for r in rows:
    line = f"{r['cell']} seed {r['seed']}: rc {r['rc']}, {r['wall_s']} s wall"
    if rehearse and "after" in r:  # setup + validations scale with the episodes, the rest with the updates
        upd = (r.get("time_ppo", 0.0) + r.get("time_rollout", 0.0)) / max(updates, 1)
        fixed = max(r["wall_s"] - upd * updates, 0.0)
        line += (f"; one update {upd:.0f} s, setup and validation {fixed:.0f} s -> a full cell (60 updates, 128 "
                 f"levels) at most about {fixed * 128 / episodes + 60 * upd:.0f} s on this CPU, one thread, load "
                 f"{__import__('os').getloadavg()[0]:.1f}")
    print("gpu grid:", line)
path.write_text("".join(json.dumps(r) + "\n" for r in rows)) if rows else None
print(f"gpu grid: {sum(r.get('rc') == 0 and 'after' in r for r in rows)} of {len(rows)} cells have results, {total} s")
sys.exit(0 if rows and all(r.get("rc") == 0 and "after" in r for r in rows) else 1)
EOF
prc=$?
rm -rf "$WORK"
[ $rc = 0 ] && exit $prc || exit $rc
