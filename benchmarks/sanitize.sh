#!/usr/bin/env bash
# The GPU suite under compute-sanitizer: memcheck (--leak-check full), racecheck, initcheck,
# synccheck, one test file per run (each fits a 10-minute call), logs in $OUT_DIR and a
# count of errors per tool at the end.
#
#   benchmarks/sanitize.sh [tool ...] [-- test files ...]
#   TOOLS: memcheck racecheck initcheck synccheck (default: all); files default: the test files
#   with GPU tests, most tests first (the long runs start first); SHARD=k/n: the k-th (1..n)
#   of n parts of the files, every n-th from the k-th (the whole suite split across n device
#   calls, each tool on every file of its part); CHUNK=n: files of more than n tests run in
#   parts of n tests (logs <tool>-<file>-partK.log), so no one file sets the length of the whole
#   JOBS=16: runs at once (tool x file pairs; the GPU is shared); BUDGET_S=300: each run stops
#   after the test running when that many seconds are spent (benchmarks/_pytest_budget.py), so
#   the tool still prints its summary; K="gpu": the pytest -m expression; BACKTRACE=device:
#   the tools' --show-backtrace (see below); PRINT_LIMIT=200: the errors (each leak is one)
#   each run prints in full.
# CuPy's pool is off (CUPYPREP_TEST_NO_POOL=1, honoured by tests/conftest.py) so the leak
# check sees every block; torch's caching allocator is off too (PYTORCH_NO_CUDA_MEMORY_CACHING);
# POOLS=on keeps both on (not with memcheck); POOLS=async has both allocate with
# cudaMallocAsync, and memcheck track stream-ordered races; HW_DECODE=off has nvImageCodec decode
# without the JPEG hardware engine, whose writes are no kernel stores (tests/alive.py);
# $OUT_DIR/alive gets each run's report of the device arrays alive at its end. The tests see
# CUPYPREP_TEST_SANITIZER=<tool> (tests/conftest.py skips those that time the GPU against the
# host, and those that need the pools).
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
if [ ${#tools[@]} -eq 0 ]; then  # (POOLS=on: the three that need no leak check)
  tools=(memcheck racecheck initcheck synccheck)
  [ "${POOLS:-off}" = on ] && tools=(racecheck initcheck synccheck)
fi
# each setting sets or clears every variable the tests read, so none is inherited
unset CUPYPREP_TEST_NO_POOL PYTORCH_NO_CUDA_MEMORY_CACHING CUPYPREP_TEST_ASYNC_POOL
case "${POOLS:-off}" in
  off) export CUPYPREP_TEST_NO_POOL=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 ;;
  on)  # CuPy's pools and torch's caching allocator as users have them (initcheck, racecheck,
       # synccheck: whether a report depends on every allocation being a cudaMalloc of its own)
    for t in "${tools[@]}"; do
      if [ "$t" = memcheck ]; then echo "POOLS=on: memcheck's leak check needs the pools off" >&2; exit 2; fi
    done ;;
  async)  # every allocation a cudaMallocAsync on its stream, freed with cudaFreeAsync:
          # memcheck (--track-stream-ordered-races all) reports a block used on a stream
          # not ordered after its allocation, or after its free (torch's other allocator
          # settings in PYTORCH_CUDA_ALLOC_CONF give way to its backend)
    export CUPYPREP_TEST_ASYNC_POOL=1 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ;;
  *) echo "POOLS: expected on, off or async, got '$POOLS'" >&2; exit 2 ;;
esac
case "${HW_DECODE:-on}" in
  on) unset CUPYPREP_TEST_NO_HW_DECODE ;;
  off) export CUPYPREP_TEST_NO_HW_DECODE=1 ;;  # nvImageCodec without the JPEG hardware engine
  *) echo "HW_DECODE: expected on or off, got '$HW_DECODE'" >&2; exit 2 ;;
esac
collect() {  # the test ids pytest collects with -m "$K" from its arguments (the lines before
  # the first empty one: a warnings summary after it may name test ids again)
  python -m pytest --collect-only -q -p no:cacheprovider -m "${K:-gpu}" "$@" 2>/dev/null |
    awk 'NF == 0 {exit} /::/'
}
ids=()
if [ ${#files[@]} -eq 0 ]; then  # the files pytest collects tests of -m "$K" from, most tests first
  mapfile -t ids < <(collect tests)
  mapfile -t files < <(printf '%s\n' "${ids[@]}" | sed -n 's/::.*//p' | sort | uniq -c | sort -k1,1nr -k2 |
                       awk '{print $2}')
fi
if [ -n "${SHARD:-}" ]; then
  k=${SHARD%/*}; n=${SHARD#*/}
  if ! [[ "$k" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ ]] || [ "$k" -lt 1 ] || [ "$k" -gt "$n" ]; then
    echo "SHARD: expected k/n with 1 <= k <= n, got '$SHARD'" >&2
    exit 2
  fi
  part=()
  for i in "${!files[@]}"; do [ $((i % n)) -eq $((k - 1)) ] && part+=("${files[$i]}"); done
  files=("${part[@]}")
fi
mkdir -p "$OUT_DIR"
started="$OUT_DIR/.started"  # what this run wrote is newer
touch "$started"
# the runs: a file each, or with CHUNK=n a file of more than n tests in parts of n tests (its
# test ids in $OUT_DIR/.ids-<name>), so the long files no longer set the length of the whole
units=()
if [ "${CHUNK:-0}" -gt 0 ]; then
  [ ${#ids[@]} -eq 0 ] && mapfile -t ids < <(collect "${files[@]}")
  for f in "${files[@]}"; do
    mapfile -t mine < <(printf '%s\n' "${ids[@]}" | grep -F "$f::")
    if [ ${#mine[@]} -le "$CHUNK" ]; then units+=("$(basename "$f" .py)|$f"); continue; fi
    for ((i = 0; i < ${#mine[@]}; i += CHUNK)); do
      name="$(basename "$f" .py)-part$((i / CHUNK + 1))"
      printf '%s\n' "${mine[@]:i:CHUNK}" > "$OUT_DIR/.ids-$name"
      units+=("$name|@$OUT_DIR/.ids-$name")
    done
  done
else
  for f in "${files[@]}"; do units+=("$(basename "$f" .py)|$f"); done
fi
export PYTHONPATH=${PYTHONPATH:-.}
export PYTEST_BUDGET_S=${BUDGET_S:-0}
# each run also writes, at its end, the device arrays still alive and what holds them
# (tests/alive.py): what a leak report at exit points to
export CUPYPREP_TEST_ALIVE_DIR=${CUPYPREP_TEST_ALIVE_DIR:-$OUT_DIR/alive}
one() {  # tool unit ("name|file" or "name|@file of test ids")
  local tool=$1 name=${2%%|*} what=${2#*|} extra=() args=()
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  [ "$tool" = memcheck ] && [ "${POOLS:-off}" = async ] && extra+=(--track-stream-ordered-races all)
  if [ "${what:0:1}" = "@" ]; then mapfile -t args < "${what:1}"; else args=("$what"); fi
  local log="$OUT_DIR/$tool-$name.log"
  # host backtraces off (BACKTRACE=device), for every tool: the tools record each CUDA
  # call's host backtrace, Python frames included, and keep those frames, so every array a
  # frame held at an allocation or launch stays alive to the end (memcheck reports it as
  # leaked; tests of what a plan or cache keeps alive fail). BACKTRACE=yes shows them (where
  # a reported access came from)
  CUPYPREP_TEST_SANITIZER=$tool "$SAN" --tool "$tool" "${extra[@]}" --show-backtrace "${BACKTRACE:-device}" \
    --error-exitcode 0 --print-limit "${PRINT_LIMIT:-200}" \
    python -m pytest -q -p no:xdist -p no:cacheprovider -p benchmarks._pytest_budget -m "${K:-gpu}" "${args[@]}" >"$log" 2>&1
  echo "$tool $name: $(grep -c '^========= ' "$log") sanitizer lines; $(grep -E ' passed| failed| skipped' "$log" | tail -1)"
}
descendants() {  # pid: every process below it, the deepest first
  local c
  for c in $(ps -eo pid=,ppid= | awk -v p="$1" '$2 == p {print $1}'); do
    descendants "$c"
    echo "$c"
  done
}
# stopped (a timeout's TERM, Ctrl-C): no new runs; the tools and their tests are stopped and
# waited for, so nothing of this script runs on after it returns (a benchmark next would
# share the machine with it)
stopped=0
stop() {
  stopped=1
  trap '' TERM INT
  kill -TERM $(descendants $$) 2>/dev/null
}
trap stop TERM INT
running=0
for tool in "${tools[@]}"; do
  for u in "${units[@]}"; do
    [ "$stopped" = 1 ] && break 2
    one "$tool" "$u" &
    running=$((running + 1))
    if [ "$running" -ge "${JOBS:-1}" ]; then wait -n; running=$((running - 1)); fi
  done
done
while [ -n "$(jobs -pr)" ]; do wait; done
[ "$stopped" = 1 ] && echo "--- stopped: the runs not listed above did not end"
echo "--- errors per tool (the ERROR SUMMARY lines, summed), and the tests each tool ran"
ours=()  # this run's logs, every tool's
for tool in "${tools[@]}"; do
  logs=()  # this run's logs of the tool (not those an earlier run left in $OUT_DIR)
  for u in "${units[@]}"; do
    log="$OUT_DIR/$tool-${u%%|*}.log"
    [ -f "$log" ] && [ "$log" -nt "$started" ] && logs+=("$log")
  done
  ours+=("${logs[@]}")
  # (racecheck ends with "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)")
  n=$(cat "${logs[@]}" /dev/null |
      sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p; s/.*RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' |
      awk '{s+=$1} END {print s+0}')
  t=$(cat "${logs[@]}" /dev/null | sed -n 's/^\([0-9]*\) passed.*/\1/p; s/.* \([0-9]*\) passed.*/\1/p' |
      awk '{s+=$1} END {print s+0}')
  runs=$(grep -l "ERROR SUMMARY\|RACECHECK SUMMARY" "${logs[@]}" /dev/null | wc -l)
  echo "$tool: $n errors; $t tests passed in $runs of ${#logs[@]} runs that ended with a summary"
done
# where the printed reports point: the kernel of each of memcheck's and initcheck's access
# reports ("at <kernel>"; racecheck words its hazards otherwise) and the logs it is in, so
# reports in other libraries' kernels (nvJPEG, cuDNN, CUB, CuPy's) stand apart from ours
at=$(for log in "${ours[@]}"; do
       sed -n "s/^=========     at \([^(<+]*\).*/\1/p" "$log" | sort -u | sed "s|\$|	$(basename "$log" .log)|"
     done | sort | awk -F'\t' '{n[$1]++; if (n[$1] <= 3) w[$1] = w[$1] " " $2} END {for (k in n) print k ":" w[k] (n[k] > 3 ? " and " n[k] - 3 " more" : "")}' | sort)
if [ -n "$at" ]; then
  echo "--- the kernels the printed reports name (the first three logs of each)"
  echo "$at"
fi
