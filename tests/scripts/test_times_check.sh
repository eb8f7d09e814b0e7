#!/usr/bin/env bash
# scripts/test-times.py on a small CTest JUnit report: slowest first with shares, parameterized
# names shortened, failures and skips counted, --top, --summary, and a clear error for a file
# that is not a report.
#   test_times_check.sh TEST_TIMES_PY WORK_DIR
set -euo pipefail
script=$1 work=$2
mkdir -p "$work"
report=$work/report.xml
cat > "$report" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="4" failures="1" disabled="0" skipped="1" hostname="" time="9" timestamp="2026-12-04T22:26:59">
  <testcase name="Fast.One" classname="Fast.One" time="1.0" status="run"/>
  <testcase name="Slow/Param.Case/tiny_Q8_0  # GetParam() = tiny-Q8_0.orcl" classname="x" time="6.0" status="run"/>
  <testcase name="Broken.Two" classname="Broken.Two" time="3.0" status="fail"><failure message="boom"/></testcase>
  <testcase name="Skipped.Three" classname="Skipped.Three" time="0" status="notrun"><skipped/></testcase>
</testsuite>
XML
fail() { echo "test_times_check: $*" >&2; exit 1; }

out=$(python3 "$script" --label "a run" "$report")
echo "$out"
grep -q '^## a run: 4 tests, 10.0 s of test time, 9 s wall (CTest)$' <<< "$out" || fail "header"
# Rows: rank, seconds, share, running share, status, name; slowest first.
rows=$(grep -E '^ +[0-9]+ ' <<< "$out")
[[ $(sed -n 1p <<< "$rows" | awk '{print $2, $3, $4, $5, $6}') == "6.00 60.0% 60.0% passed Slow/Param.Case/tiny_Q8_0" ]] ||
  fail "first row: $(sed -n 1p <<< "$rows")"
[[ $(sed -n 2p <<< "$rows" | awk '{print $2, $4, $5, $6}') == "3.00 90.0% FAILED Broken.Two" ]] ||
  fail "second row: $(sed -n 2p <<< "$rows")"
[[ $(wc -l <<< "$rows") -eq 4 ]] || fail "every test is listed"
grep -q '^slowest 4: 10.0 s = 100.0% of the test time$' <<< "$out" || fail "slowest share"

[[ $(python3 "$script" --top 1 "$report" | grep -cE '^ +[0-9]+ ') -eq 1 ]] || fail "--top 1"
[[ $(python3 "$script" --summary "$report" "$report") == "tests: 4 passed, 2 failed, 2 skipped" ]] ||
  fail "summary: $(python3 "$script" --summary "$report" "$report")"

echo "not xml" > "$work/bad.xml"
if err=$(python3 "$script" "$work/bad.xml" 2>&1); then fail "accepted a file that is not a report"; fi
grep -q "cannot read the JUnit report" <<< "$err" || fail "error message: $err"
echo "test_times_check: ok"
