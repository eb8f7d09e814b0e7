#!/usr/bin/env bash
# The web page at / in headless Chromium (web_page_e2e.mjs): `strata serve` runs the trained
# model with an API key; its first chat is the model's own answer, the next three are scripted
# (STRATA_TEST_SCRIPTED_OUTPUT: reasoning and markup with an HTML tag in it, a tool call, a long
# answer to stop); GPU telemetry from the NVML stand-in (FAKE_NVML), with --max-gpu-temp 90.
# Screenshots go to WORK_DIR/screenshots.
#   run_web_page_e2e.sh STRATA MODEL NODE_PREFIX CHROMIUM FAKE_NVML WORK_DIR
set -euo pipefail
strata=$1 model=$2 prefix=$3 chromium=$4 fake_nvml=$5 work=$6
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/server/serve_helpers.sh
source "$here/serve_helpers.sh"
mkdir -p "$work"
log=$work/serve-web-page.log
script=$work/web-page-script.json
python3 - "$script" <<'PY'
import json, sys
markup = ("<think>\nThe user wants markup.\n</think>\n\nHere is **bold** and `code` "
          "<img src=x onerror=\"window.__pwned=1\">\n\n```python\nprint(1)\n```")
call = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
long = "".join("line %d\n" % i for i in range(1, 301))
json.dump([None, markup, call, long], open(sys.argv[1], "w"))
PY
nvml_state=$work/fake-nvml-state
echo "temperature=55" > "$nvml_state"
# The Plan view measures the machine once: into a cache of the test's own.
rm -rf "$work/cache"
STRATA_TEST_CACHE=$work/cache STRATA_CALIBRATION_LOAD_CHECK=off \
  STRATA_TEST_SCRIPTED_OUTPUT=$script STRATA_NVML_LIBRARY=$fake_nvml FAKE_NVML_STATE=$nvml_state \
  serve_start "$log" "$strata" -m "$model" --ctx 2048 -t 2 --api-key web-key --max-gpu-temp 90
status=0
node "$here/web_page_e2e.mjs" "$prefix" "$chromium" "$serve_url" web-key "$work/screenshots" \
  "$nvml_state" || status=$?
serve_stop "$log"
[[ $status -eq 0 ]] || { cat "$log"; exit "$status"; }
echo "screenshots: $work/screenshots"
