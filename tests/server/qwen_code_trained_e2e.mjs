// Qwen Code (npm `@qwen-code/qwen-code`, the `qwen` CLI) in one-shot mode against `strata serve`
// running the trained model (tools/train/strata-coder-tiny.gguf), nothing scripted: asked what a
// file does, the model itself calls Qwen Code's read_file tool with an absolute path, Qwen Code
// runs the call and sends the result back, and the model answers in the form it learned
// ("`FILE` defines `NAME` (function), ...") and ends its turn.
// What is not held: that the path is the file's. The model copies from its context now (the
// project root Qwen Code reports, the file named in the question), but not reliably: of five
// project folders tried, two gave the exact path, three a near miss (`/tmp/shop` became
// `/tmp/shapes.py`), and the prompt holds the date, so what greedy decoding writes changes from
// day to day. The path and the answer are printed (tools/train/README.md, "What it cannot do").
// Qwen Code runs bare (no memory, skills or sub-agents) with only read_file and a one-line system
// prompt: its full prompt is ~17k tokens, past what a 4-layer model trained on 1.5k-token rows
// can attend over. tools/train/qwen_code_request.json is this request as the model learned it.
//   node qwen_code_trained_e2e.mjs NODE_PREFIX BASE_URL MODEL WORK_DIR
// Prints `ok   name` or `FAIL name: ...`; exits non-zero on a failure.
import assert from 'node:assert/strict';
import { check, runChecks } from './e2e_checks.mjs';
import { qwenHome, runQwen } from './qwen_code_cli.mjs';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [prefix, baseURL, model, workText] = process.argv.slice(2);
const work = path.resolve(workText);
// Outside the build tree: inside a git checkout Qwen Code adds a git status snapshot (~1.5k
// tokens) to the system prompt, which the model never saw. A fixed path, so that the prompt
// (and what greedy decoding makes of it) does not change from run to run (the date in it does).
const project = path.join(os.tmpdir(), 'strata-trained-model-shop');
fs.rmSync(project, { recursive: true, force: true });
fs.mkdirSync(project, { recursive: true });
process.on('exit', () => fs.rmSync(project, { recursive: true, force: true }));
const home = qwenHome(path.join(work, 'qwen-trained-home'));
const systemFile = path.join(work, 'qwen-trained-system.md');
fs.writeFileSync(systemFile, 'You are a coding assistant.\n');
const source = `def area(width, height):
    """Return the area of a rectangle."""
    return width * height


def perimeter(width, height):
    """Return the perimeter of a rectangle."""
    return 2 * (width + height)
`;
const file = path.join(project, 'shapes.py');
fs.writeFileSync(file, source);

check('qwen -p with the trained model: it calls read_file by itself, then answers', async () => {
  const run = runQwen({
    prefix,
    // An array flag takes every word after it until the next flag: -o json ends the list.
    args: ['--bare', '--exclude-tools', 'edit,notebook_edit,run_shell_command,get_goal,update_goal',
      '-o', 'json', 'What does shapes.py do?'],
    cwd: project, home, baseURL, apiKey: 'unused', model, timeout: 240_000,
    env: { QWEN_SYSTEM_MD: systemFile },
  });
  const detail = run.detail;
  assert.equal(run.status, 0, detail);
  const events = JSON.parse(run.stdout);
  const parts = events.flatMap((e) => (Array.isArray(e.message?.content) ? e.message.content : []));
  const use = parts.find((p) => p.type === 'tool_use');
  assert.equal(use?.name, 'read_file', detail);
  assert.match(use.input.file_path ?? '', /^\/.*\.py$/, detail);
  console.log(`     the model asked for ${use.input.file_path} (the file is ${file})`);
  const toolResult = parts.find((p) => p.type === 'tool_result' && p.tool_use_id === use.id);
  assert.ok(toolResult, `Qwen Code did not run the call\n${detail}`);
  if (use.input.file_path === file) assert.equal(toolResult.content, source);
  const result = events.find((e) => e.type === 'result');
  assert.equal(result?.is_error, false, detail);
  assert.equal(result.num_turns, 2, detail);
  console.log(`     the model answered: ${result.result}`);
  assert.match(result.result, /^`[^`]+\.py` defines `[^`]+` \((function|class)\)/, detail);
});
await runChecks();
