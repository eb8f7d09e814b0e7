// Running the Qwen Code CLI (npm `@qwen-code/qwen-code`, the `qwen` command) in one-shot mode
// against `strata serve`, as the client end-to-end scripts do.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// A home of its own under `dir`: no user settings, sessions or memories are read or left behind.
export function qwenHome(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, '.qwen'), { recursive: true });
  fs.writeFileSync(path.join(dir, '.qwen', 'settings.json'), JSON.stringify({
    general: { enableAutoUpdate: false },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
  }));
  return dir;
}

// Runs `qwen ARGS` in `cwd` with the OpenAI provider at baseURL. --yolo: one-shot mode has
// nobody to approve tool calls. Returns spawnSync's result and `detail` (status and output, for
// failure messages).
export function runQwen({ prefix, args, cwd, home, baseURL, apiKey, model, env = {}, timeout }) {
  const run = spawnSync(path.join(path.resolve(prefix), 'node_modules', '.bin', 'qwen'),
    ['--auth-type', 'openai', '--yolo', ...args], {
      cwd,
      encoding: 'utf8',
      timeout,
      killSignal: 'SIGKILL',
      env: {
        PATH: process.env.PATH, HOME: home, TMPDIR: process.env.TMPDIR ?? '/tmp',
        OPENAI_API_KEY: apiKey, OPENAI_BASE_URL: baseURL, OPENAI_MODEL: model,
        QWEN_CODE_SUPPRESS_YOLO_WARNING: '1', QWEN_TELEMETRY_ENABLED: 'false', ...env,
      },
    });
  run.detail = `status ${run.status} signal ${run.signal}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;
  return run;
}
