#!/usr/bin/env bash
# The GPU suite under compute-sanitizer: memcheck (--leak-check full), racecheck, initcheck,
# synccheck, one test file per run (each fits a 10-minute call), logs in $OUT_DIR and a
# count of errors per tool at the end.
#
#   benchmarks/sanitize.sh [tool ...] [-- test files ...]
#   TOOLS: memcheck racecheck initcheck synccheck (default: all); files default: tests/test_*.py
# CuPy's pool is off (CUPYPREP_TEST_NO_POOL=1, honoured by tests/conftest.py) so the leak
# check sees every block; torch's caching allocator is off too (PYTORCH_NO_CUDA_MEMORY_CACHING).
set -u
OUT_DIR=${OUT_DIR:-sanitizer-logs}
SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$SAN" ] && [ -x "$c" ] && SAN=$c
done
if [ -z "$SAN" ]; then
  echo "compute-sanitizer not found (PATH, /usr/local/cuda/bin); set COMPUTE_SANITIZER" >&2
  exit 2
fi
tools=(); files=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; files=("$@"); break; fi
  tools+=("$1"); shift
done
[ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck initcheck synccheck)
[ ${#files[@]} -eq 0 ] && files=(tests/test_*.py)
mkdir -p "$OUT_DIR"
export CUPYPREP_TEST_NO_POOL=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH=${PYTHONPATH:-.}
for tool in "${tools[@]}"; do
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  for f in "${files[@]}"; do
    log="$OUT_DIR/$tool-$(basename "$f" .py).log"
    "$SAN" --tool "$tool" "${extra[@]}" --error-exitcode 0 --print-limit 200 \
      python -m pytest -q -p no:xdist -m gpu "$f" >"$log" 2>&1
    echo "$tool $f: $(grep -c '^========= ' "$log") sanitizer lines; $(tail -1 "$log")"
  done
done
echo "--- errors per tool (the ERROR SUMMARY lines, summed)"
for tool in "${tools[@]}"; do
  n=$(cat "$OUT_DIR/$tool"-*.log 2>/dev/null | sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' |
      awk '{s+=$1} END {print s+0}')
  echo "$tool: $n"
done
