#!/usr/bin/env bash
# The one command for the lent GPU machine (run from the repository root, with .whl/ carried):
#
#     OUT=/path/to/empty/folder bash benchmarks/gpu_smoke.sh
#
# 1. installs the carried wheels (.whl/: the project and what the GPU image lacks) into a fresh folder with
#    `pip install --no-index --no-deps --target`, nothing else installed, no network;
# 2. runs benchmarks/gpu_smoke.py's eight stages (<= 480 s of limits, each killed at its limit) with PYTHONPATH on that folder and
#    PYTHONSAFEPATH=1, from a work folder outside the tree, so every import is the installed package's, never the
#    source tree's (whose agentbench_crbc lacks the envs/ and plugins/ the wheel maps in);
# 3. leaves exactly two files in $OUT: summary.json and gpu-smoke-logs.tar.gz (every stage's log and result);
# 4. exits non-zero when the install or any stage failed.
#
# `python benchmarks/gpu_smoke.py --rehearse` runs this same script on a CPU (a clean copy of the tracked files,
# nothing of the project installed but the wheels, CUDA stages replaced by CPU stand-ins).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${ABC_SMOKE_PYTHON:-python3}"
WHEELS="${ABC_SMOKE_WHEELS:-$ROOT/.whl}"
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/abc-gpu-smoke.XXXXXX")"
mkdir -p "$WORK/logs"
fail() {  # one line, a summary saying why, the logs so far
  echo "gpu smoke: $1" >&2
  printf '{"ok": false, "error": %s, "stages": []}\n' "$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1")" \
    > "$OUT/summary.json"
  tar -czf "$OUT/gpu-smoke-logs.tar.gz" -C "$WORK" logs
  exit 1
}
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
[ ${#wheels[@]} -gt 0 ] || fail "no wheels in $WHEELS: build them with python benchmarks/gpu_wheels.py and carry .whl"
"$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --target "$WORK/site" \
  "${wheels[@]}" > "$WORK/logs/install.log" 2>&1 || fail "pip install of $WHEELS failed (logs/install.log)"
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export TOKENIZERS_PARALLELISM=false SDL_VIDEODRIVER=dummy
cd "$WORK" || fail "cannot enter $WORK"
"$PY" "$ROOT/benchmarks/gpu_smoke.py" --out "$WORK/logs" --work "$WORK" --summary "$OUT/summary.json" \
  --source "$ROOT" 2>&1 | tee "$WORK/logs/smoke.log"
rc=${PIPESTATUS[0]}
tar -czf "$OUT/gpu-smoke-logs.tar.gz" -C "$WORK" logs || rc=1
[ -f "$OUT/summary.json" ] || { echo "gpu smoke: no summary.json written" >&2; rc=1; }
rm -rf "$WORK"
exit "$rc"
