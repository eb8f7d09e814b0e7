#!/usr/bin/env bash
# Builds strata (release preset) and runs the whole test suite with CTest: unit, oracle and CLI
# tests, plus each fuzz target for STRATA_FUZZ_SECONDS (default 60). Then builds the asan preset
# (AddressSanitizer + UBSan) and runs the same tests under the sanitizers, where any report fails
# its test (the npm client tests and the fuzz targets are release-only). CTest's summary of the
# sanitizer run is the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release -DSTRATA_FUZZ_SECONDS="${STRATA_FUZZ_SECONDS:-60}" >/dev/null
cmake --build --preset release
ctest --preset release
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan
