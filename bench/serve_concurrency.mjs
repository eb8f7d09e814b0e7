// Aggregate generation speed of `strata serve` with 1, 2, 4, 8... concurrent streaming clients.
//   node bench/serve_concurrency.mjs BASE_URL [MAX_TOKENS] [STREAMS...]
// Each client streams one chat completion of MAX_TOKENS tokens (ignore_eos); per level it prints
// the aggregate tokens/s (all tokens / wall time from first request to last [DONE]) and the ratio
// to one stream, as a Markdown table.
const [baseURL, maxTokensText, ...levelsText] = process.argv.slice(2);
if (!baseURL) {
  console.error('usage: node bench/serve_concurrency.mjs BASE_URL [MAX_TOKENS] [STREAMS...]');
  process.exit(2);
}
const maxTokens = Number(maxTokensText ?? 64);
const levels = levelsText.length ? levelsText.map(Number) : [1, 2, 4, 8];
const headers = { 'Content-Type': 'application/json' };
if (process.env.STRATA_API_KEY) headers.Authorization = `Bearer ${process.env.STRATA_API_KEY}`;

async function stream(i) {
  const body = {
    messages: [{ role: 'user', content: `Client ${i}: write a long story about memory bandwidth.` }],
    max_tokens: maxTokens, ignore_eos: true, stream: true, temperature: 0.7, seed: i,
    stream_options: { include_usage: true },
  };
  const res = await fetch(`${baseURL}/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const text = await res.text();
  let tokens = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const chunk = JSON.parse(line.slice(6));
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
  }
  return tokens;
}

await stream(-1);  // warm-up: weights paged in, caches filled
const rows = [];
let single = 0;
for (const n of levels) {
  const start = performance.now();
  const counts = await Promise.all(Array.from({ length: n }, (_, i) => stream(i)));
  const seconds = (performance.now() - start) / 1000;
  const total = counts.reduce((a, b) => a + b, 0);
  const rate = total / seconds;
  if (n === 1) single = rate;
  rows.push(`| ${n} | ${total} | ${seconds.toFixed(2)} | ${rate.toFixed(2)} | ${single ? (rate / single).toFixed(2) + 'x' : '-'} |`);
}
console.log('| streams | tokens | seconds | aggregate tok/s | vs 1 stream |');
console.log('|---:|---:|---:|---:|---:|');
for (const r of rows) console.log(r);
