#!/usr/bin/env bash
# Builds strata (release preset) and runs the whole test suite with CTest: unit, oracle and CLI
# tests, plus each fuzz target for STRATA_FUZZ_SECONDS (default 60). CTest's summary is the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release -DSTRATA_FUZZ_SECONDS="${STRATA_FUZZ_SECONDS:-60}" >/dev/null
cmake --build --preset release
ctest --preset release
