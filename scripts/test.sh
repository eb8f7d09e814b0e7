#!/usr/bin/env bash
# Builds strata (release preset) and runs the whole test suite with CTest: unit, oracle and CLI
# tests, plus each fuzz target for STRATA_FUZZ_SECONDS (default 60). Then builds the asan preset
# (AddressSanitizer + UBSan) and runs its tests under the sanitizers, where any report fails its
# test (CMakePresets.json says which tests are release-only, and why).
#
# Prints the wall time of each phase and the slowest tests of each run (all of them:
# scripts/test-times.py build/<preset>/test-times.xml), and fails when the whole run takes longer
# than STRATA_TEST_BUDGET_SECONDS (default 2700 = 45 minutes on the 2-core CI machine; 0: no
# limit), so the change that makes CI slow is seen the day it lands. Compiles through ccache when
# it is installed (scripts/setup.sh installs it; the cache is ccache's own, outside the clone).
# The last line counts the tests of both runs: 'tests: N passed, N failed'.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${STRATA_TEST_BUDGET_SECONDS:-2700}
start=$SECONDS
phases=()
reports=()
running=""

# phase NAME COMMAND...: runs COMMAND and records its wall time.
phase() {
  local name=$1 began=$SECONDS
  shift
  echo "== $name"
  running=$name
  "$@"
  running=""
  phases+=("$(printf '%-16s %5d s' "$name" $((SECONDS - began)))")
}

# Each run's JUnit report, for the timing tables (CTest writes it also when tests fail).
tests() {
  local preset=$1
  reports+=("build/$preset/test-times.xml")
  ctest --preset "$preset" --output-junit test-times.xml
}

report() {
  local status=$? elapsed=$((SECONDS - start))
  echo
  echo "== wall time of each phase"
  printf '%s\n' "${phases[@]}"
  printf '%-16s %5d s (budget %d s)\n' "total" "$elapsed" "$budget"
  local existing=()
  for r in "${reports[@]}"; do [[ -f $r ]] && existing+=("$r"); done
  if ((${#existing[@]})); then
    echo
    python3 scripts/test-times.py --top 20 "${existing[@]}"
    python3 scripts/test-times.py --summary "${existing[@]}"
  fi
  if ((status != 0)); then
    echo "test.sh: ${running:-a step} failed (exit $status)" >&2
  elif ((budget > 0 && elapsed > budget)); then
    echo "test.sh: the run took $elapsed s, over the budget of $budget s; the slowest" \
      "tests are listed above (all of them: scripts/test-times.py ${existing[*]})" >&2
    status=1
  fi
  exit "$status"
}
trap report EXIT

phase "release build" sh -c "cmake --preset release -DSTRATA_FUZZ_SECONDS='${STRATA_FUZZ_SECONDS:-60}' >/dev/null && cmake --build --preset release"
phase "release tests" tests release
phase "asan build" sh -c "cmake --preset asan >/dev/null && cmake --build --preset asan"
phase "asan tests" tests asan
