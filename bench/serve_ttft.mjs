// Time to first token of an agent's next turn through `strata serve` (issue 36 item 4). An agent
// resends the whole conversation every turn: the earlier turns (PROMPT - NEW tokens) are in the
// server's prefix cache from the previous request, and the new request adds NEW tokens (a tool's
// output, the user's reply). Three streamed /completions requests, temperature 0:
//   cold    the whole prompt with nothing cached (its own first line);
//   prime   the earlier turns alone, as the previous request left them;
//   next    the earlier turns plus NEW tokens: the prefix comes from the cache.
// Prints a Markdown table: prompt and cached tokens (the server's usage), time to first token,
// and decode speed after it.
//   node bench/serve_ttft.mjs BASE_URL [PROMPT_TOKENS] [NEW_TOKENS] [MAX_TOKENS]
// (defaults 16384, 1024, 32). The model needs a vocabulary (make-synthetic-model --vocab-from)
// and the server a context of PROMPT_TOKENS + MAX_TOKENS (--ctx).
const [baseURL, promptText, newText, maxText] = process.argv.slice(2);
if (!baseURL) {
  console.error('usage: node bench/serve_ttft.mjs BASE_URL [PROMPT_TOKENS] [NEW_TOKENS] [MAX_TOKENS]');
  process.exit(2);
}
const promptTokens = Number(promptText ?? 16384);
const newTokens = Number(newText ?? 1024);
const maxTokens = Number(maxText ?? 32);
if (!(newTokens > 0 && promptTokens > newTokens && maxTokens > 0)) {
  console.error('need PROMPT_TOKENS > NEW_TOKENS > 0 and MAX_TOKENS > 0');
  process.exit(2);
}
const headers = { 'Content-Type': 'application/json' };
if (process.env.STRATA_API_KEY) headers.Authorization = `Bearer ${process.env.STRATA_API_KEY}`;

// Code-like lines, each different, so no two requests share text by accident.
const line = (i) => `    total_${i} = accumulate(values[${i}], ${(i * 7919) % 1000}, scale=${i % 13})\n`;
const lines = (from, count) => Array.from({ length: count }, (_, k) => line(from + k)).join('');

// One streamed completion: seconds to the first token, then the rest, and the server's usage.
async function complete(prompt, maxTokens) {
  const body = {
    prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
    stream_options: { include_usage: true },
  };
  const start = performance.now();
  const res = await fetch(`${baseURL}/completions`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let first = 0;
  let usage = null;
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buffered += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffered.indexOf('\n')) >= 0) {
      const text = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (!text.startsWith('data: ') || text === 'data: [DONE]') continue;
      const chunk = JSON.parse(text.slice(6));
      if (!first && chunk.choices?.length) first = performance.now();
      if (chunk.usage) usage = chunk.usage;
    }
  }
  const done = performance.now();
  if (!usage) throw new Error('the stream ended without usage');
  return {
    ttft: (first - start) / 1000,
    rest: (done - first) / 1000,
    prompt: usage.prompt_tokens,
    cached: usage.prompt_tokens_details?.cached_tokens ?? 0,
    generated: usage.completion_tokens,
  };
}

// Lines per token of this tokenizer, from a sample.
const sample = await complete(lines(100000, 64), 1);
const perLine = sample.prompt / 64;
const newLines = Math.max(1, Math.round(newTokens / perLine));
const earlierLines = Math.max(1, Math.round(promptTokens / perLine) - newLines);

const earlier = `# session B\n${lines(100000, earlierLines)}`;
const rows = [
  ['cold', await complete(`# session A\n${lines(100000, earlierLines + newLines)}`, maxTokens)],
  ['prime', await complete(earlier, 1)],
  ['next', await complete(earlier + lines(100000 + earlierLines, newLines), maxTokens)],
];
console.log('| request | prompt tokens | cached | time to first token (s) | decode after it (tok/s) |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, r] of rows) {
  const decode = r.generated > 1 && r.rest > 0 ? ((r.generated - 1) / r.rest).toFixed(2) : '-';
  console.log(`| ${name} | ${r.prompt} | ${r.cached} | ${r.ttft.toFixed(2)} | ${decode} |`);
}
const cold = rows[0][1], next = rows[2][1];
console.log(`\nnext turn: ${(cold.ttft / next.ttft).toFixed(1)}x faster to the first token than cold ` +
  `(${next.cached} of ${next.prompt} prompt tokens cached)`);
