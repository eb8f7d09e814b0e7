// Qwen Code (npm `@qwen-code/qwen-code`, the `qwen` CLI) in one-shot mode against a running
// `strata serve` started with STRATA_TEST_SCRIPTED_OUTPUT=the file `--script` prints: the model
// "calls" Qwen Code's read_file tool on a file of a fresh project directory, Qwen Code runs it
// and sends the result back, and the scripted final answer must be what `qwen` prints.
//   node qwen_code_e2e.mjs --script WORK_DIR > FILE    (creates WORK_DIR/qwen-project)
//   node qwen_code_e2e.mjs NODE_PREFIX BASE_URL API_KEY MODEL WORK_DIR
// Prints `ok   name` or `FAIL name: ...`; exits non-zero on a failure.
import assert from 'node:assert/strict';
import { check, runChecks } from './e2e_checks.mjs';
import { qwenHome, runQwen } from './qwen_code_cli.mjs';
import fs from 'node:fs';
import path from 'node:path';

const finalAnswer = 'QWEN-CODE-FINAL-ANSWER-42';
const noteText = 'hello from the strata e2e fixture\n';
// Qwen Code's requests in arrival order: its turn (the tool call), the turn with the tool's
// result (the answer). After a turn it may run a background "managed memory" agent (seen after
// one-request turns): it gets a short answer rather than up to 32000 sampled tokens.
const script = (notePath) => [
  `<tool_call>\n${JSON.stringify({ name: 'read_file', arguments: { file_path: notePath } })}\n</tool_call>`,
  finalAnswer,
  'Nothing durable to save.',
];

const mode = process.argv[2];
if (mode === '--script') {
  const project = path.join(path.resolve(process.argv[3]), 'qwen-project');
  fs.rmSync(project, { recursive: true, force: true });
  fs.mkdirSync(project, { recursive: true });
  fs.writeFileSync(path.join(project, 'notes.txt'), noteText);
  console.log(JSON.stringify(script(path.join(project, 'notes.txt'))));
  process.exit(0);
}

const [prefix, baseURL, apiKey, model, workText] = process.argv.slice(2);
const work = path.resolve(workText);
const project = path.join(work, 'qwen-project');
const home = qwenHome(path.join(work, 'qwen-home'));

check('qwen -p: read_file tool round trip, then the scripted answer', async () => {
  // -o json: the whole transcript, so the tool's result can be checked too.
  const run = runQwen({
    prefix, args: ['-o', 'json', 'Read notes.txt and tell me what it says.'], cwd: project, home,
    baseURL, apiKey, model, timeout: 120_000,
  });
  const detail = run.detail;
  assert.equal(run.status, 0, detail);
  assert.ok(run.stdout.includes(finalAnswer), detail);
  const events = JSON.parse(run.stdout);
  const result = events.find((e) => e.type === 'result');
  assert.equal(result?.is_error, false, detail);
  assert.equal(result.result, finalAnswer);
  const parts = events.flatMap((e) => (Array.isArray(e.message?.content) ? e.message.content : []));
  const use = parts.find((p) => p.type === 'tool_use');
  assert.equal(use?.name, 'read_file', detail);
  assert.equal(use.input.file_path, path.join(project, 'notes.txt'));
  const toolResult = parts.find((p) => p.type === 'tool_result' && p.tool_use_id === use.id);
  assert.equal(toolResult?.is_error, false, detail);
  assert.equal(toolResult.content, noteText);
});
await runChecks();
