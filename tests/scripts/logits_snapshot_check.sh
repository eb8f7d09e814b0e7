#!/usr/bin/env bash
# scripts/logits-snapshot.sh on the CPU: a run per oracle model, and two snapshots of the same
# binary are the same bytes (what makes a before/after comparison of a refactor meaningful);
# a missing binary is a clear error.
#   logits_snapshot_check.sh SNAPSHOT_SH STRATA WORK_DIR
set -euo pipefail
script=$1 strata=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "logits_snapshot_check: $*" >&2; exit 1; }
export STRATA_SNAPSHOT_GPU=0
"$script" "$work/a" "$strata" > "$work/a.out"
"$script" "$work/b" "$strata" > "$work/b.out"
runs=$(ls "$work/a"/*.orcl | wc -l)
[ "$runs" -ge 30 ] || fail "expected a run per oracle model, found $runs"
grep -q "^$runs runs written" "$work/a.out" || fail "no summary line: $(cat "$work/a.out")"
for f in "$work/a"/*.orcl; do
  cmp -s "$f" "$work/b/${f##*/}" || fail "${f##*/} differs between two runs of one binary"
done
if "$script" "$work/c" "$work/no-such-strata" 2> "$work/c.err"; then fail "ran without a binary"; fi
grep -q "no strata binary" "$work/c.err" || fail "unclear error: $(cat "$work/c.err")"
echo "logits snapshot: $runs runs, two snapshots identical"
