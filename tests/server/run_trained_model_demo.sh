#!/usr/bin/env bash
# README's main job, checked: `strata serve` runs the trained model
# (tools/train/strata-coder-tiny.gguf) with its recommended sampling (greedy with a light
# repetition penalty, from the file's general.sampling.* keys) and answers the request its banner
# suggests, pasted as a newcomer would, with Python code, and ends its turn. Then speculative
# decoding on a rename (an edit: code copied from the prompt): the answer with "spec": "auto" is
# the one with "spec": "off", and some drafted tokens were kept. The server is then stopped with
# SIGTERM (must exit 0). Lone generations on the CPU joined this machine's run records (a fresh
# cache here), and `strata plan` learns from them (issue 40).
#   run_trained_model_demo.sh STRATA MODEL WORK_DIR
set -euo pipefail
strata=$1 model=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/server/serve_helpers.sh
source "$here/serve_helpers.sh"
mkdir -p "$work"
log=$work/serve-trained-model.log
cache=$work/cache
rm -rf "$cache"
# The load check is off: ctest runs other tests on the same cores.
STRATA_TEST_CACHE=$cache STRATA_CALIBRATION_LOAD_CHECK=off serve_start "$log" "$strata" -m "$model" \
  --ctx 2048 -t 2
example=$(grep -o "curl .*" "$log" | head -1)
answer=$(eval "$example -s")
python3 - "$answer" <<'PY' || { cat "$log"; exit 1; }
import json, sys
choice = json.loads(sys.argv[1])["choices"][0]
content = choice["message"]["content"]
assert content.startswith("```python\n") and "def " in content, "no Python code: %r" % content
assert content.rstrip().endswith("```"), "the code block is not closed: %r" % content
assert choice["finish_reason"] == "stop", "the answer did not end its turn: %r" % choice
print("ok   the banner's example request: a Python function, turn ended")
PY
python3 - "${serve_url}" <<'PY' || { cat "$log"; exit 1; }
import json, sys, urllib.request
code = 'def area(width, height):\n    """Return the area of a rectangle."""\n' \
       '    total = width * height\n    return total\n'
def ask(spec):
    body = {"spec": spec, "max_tokens": 200, "messages": [
        {"role": "user", "content": "Rename `total` to `result` in shapes.py:\n```python\n" + code + "```"}]}
    req = urllib.request.Request(sys.argv[1] + "/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))
off, auto = ask("off"), ask("auto")
assert off["choices"][0]["message"] == auto["choices"][0]["message"], (off, auto)
assert "completion_tokens_details" not in off["usage"], off["usage"]
kept = auto["usage"]["completion_tokens_details"]["accepted_prediction_tokens"]
assert kept > 0, auto["usage"]
print("ok   a rename with speculation: the same answer, %d drafted tokens kept" % kept)
PY
serve_stop "$log"
python3 - "$cache/strata/hardware.json" <<'PY' || { cat "$log"; exit 1; }
import json, sys
records = [r for r in json.load(open(sys.argv[1]))["run_records"] if r["source"] == "serve"]
decode = [r for r in records if r["tg_tok_s"] > 0]
assert decode, records
assert all(r["n_gen"] >= 32 and r["threads"] == 2 for r in decode), decode
print("ok   served requests recorded for the planner: %d, decode %.1f tok/s"
      % (len(records), decode[0]["tg_tok_s"]))
PY
plan=$(XDG_CACHE_HOME=$cache STRATA_CALIBRATION_LOAD_CHECK=off "$strata" plan -m "$model" \
  --device none -t 2 --ctx 2048 2>&1) || { echo "$plan"; exit 1; }
grep -q "recorded run(s) on this machine (strata serve x" <<< "$plan" ||
  { echo "$plan"; echo "strata plan did not learn from the served requests" >&2; exit 1; }
echo "ok   strata plan learned from them: $(grep -o 'learned from .*' <<< "$plan")"
