#!/usr/bin/env bash
# Not in CI: do three more coding agents work against `strata serve` with their default settings?
# Installs opencode, the Continue CLI and the Kilo Code CLI (an opencode derivative) from npm
# into a temporary prefix (~720 MB); for each, starts a
# `strata serve` on 127.0.0.1, points the agent at it (only an OpenAI-compatible provider with the
# server's base URL is configured), runs one non-interactive turn and prints a table: client,
# exit code, whether the turn completed (exit 0, every request answered 200, an answer printed).
#   scripts/agents-check.sh STRATA MODEL.gguf
#   scripts/agents-check.sh STRATA MAKE_SYNTHETIC_MODEL VOCAB_GGUF
# The second form serves the small random-weight test model (tests/server/serve_helpers.sh) with
# scripted answers (STRATA_TEST_SCRIPTED_OUTPUT, test only), as its own words are noise.
# Logs stay in the temporary directory it prints; the npm prefix is removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/server/serve_helpers.sh
source "$here/../tests/server/serve_helpers.sh"
[[ $# -eq 2 || $# -eq 3 ]] || { sed -n 2,11p "$0" >&2; exit 2; }
strata=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-agents-check.XXXXXX")
answer=""
if [[ $# -eq 3 ]]; then
  model=$(e2e_model "$2" "$3" "$work")
  answer=AGENTS-CHECK-SCRIPTED-ANSWER
  # Every request answers this text (opencode also asks for a session title first). Exported
  # for the servers only: the agents run with a clean environment.
  printf '["%s","%s","%s","%s"]\n' $answer $answer $answer $answer > "$work/script.json"
  export STRATA_TEST_SCRIPTED_OUTPUT=$work/script.json
else
  model=$2
fi
echo "work directory: $work"

npm_prefix=$work/npm
start=$SECONDS
# (Kilo 7.8.1's installer asks for musl builds the registry does not have; 7.7.7 installs.)
npm install --prefix "$npm_prefix" --no-audit --no-fund --silent opencode-ai@1.18.33 \
  @continuedev/cli@1.5.47 @kilocode/cli@7.7.7
echo "npm install: $((SECONDS - start)) s, $(du -sh "$npm_prefix" | cut -f1)"

# run_agent NAME COMMAND...: one turn of an agent in a fresh home and project directory, with no
# variable of this shell's environment but PATH (no user config, keys or XDG paths leak in).
run_agent() {
  local name=$1 log=$work/serve-$1.log status=0 answered=no completed=no
  shift
  mkdir -p "$work/$name-home" "$work/$name-project"
  serve_start "$log" "$strata" -m "$model" --ctx 32768 --parallel 1 --alias strata-model
  (cd "$work/$name-project" && env -i PATH="$PATH" HOME="$work/$name-home" TERM=dumb \
    timeout 300 "$@" "$(agent_config "$name")") > "$work/$name.out" 2> "$work/$name.err" < /dev/null ||
    status=$?
  serve_stop "$log" > /dev/null
  # The scripted answer, or with a real model any output at all.
  if [[ -n $answer ]]; then grep -q "$answer" "$work/$name.out" && answered=yes
  else [[ -s $work/$name.out ]] && answered=yes
  fi
  if [[ $status -eq 0 && $answered == yes ]] && grep -q 'POST /v1/chat/completions 200 ' "$log" &&
      ! grep -Eq 'Z [A-Z]+ [^ ]+ [45][0-9][0-9] ' "$log"; then
    completed=yes
  fi
  rows+=("$(printf '%-12s %-10s %s' "$name" "$status" "$completed")")
}
rows=()

# The settings each agent needs to reach the server, as its last argument.
agent_config() {
  case $1 in
    opencode | kilo)  # a provider of the AI SDK's openai-compatible kind, as the default model
      cat <<EOF
{"provider": {"strata": {"npm": "@ai-sdk/openai-compatible", "name": "strata",
  "options": {"baseURL": "$serve_url", "apiKey": "none"},
  "models": {"strata-model": {"name": "strata-model"}}}},
 "model": "strata/strata-model"}
EOF
      ;;
    continue)  # a config file with one model of provider openai at apiBase
      cat > "$work/continue-config.yaml" <<EOF
name: strata
version: 0.0.1
schema: v1
models:
  - name: strata
    provider: openai
    model: strata-model
    apiBase: $serve_url
    apiKey: none
    roles: [chat, edit, apply]
EOF
      echo "$work/continue-config.yaml"
      ;;
  esac
}

prompt="Say hello in one short sentence."
bin=$npm_prefix/node_modules/.bin
# opencode reads its whole config from OPENCODE_CONFIG_CONTENT: wrap it so it arrives there.
run_agent opencode sh -c 'OPENCODE_CONFIG_CONTENT=$2 exec "$0" run "$1"' "$bin/opencode" "$prompt"
run_agent continue sh -c 'exec "$0" -p "$1" --config "$2"' "$bin/cn" "$prompt"
run_agent kilo sh -c 'KILO_CONFIG_CONTENT=$2 exec "$0" run "$1"' "$bin/kilo" "$prompt"
rm -rf "$npm_prefix"

printf '%-12s %-10s %s\n' client exit_code turn_completed
printf '%s\n' "${rows[@]}"
