// The page at / in a real browser (Debian's chromium, headless, driven by puppeteer-core): a
// key-protected server asks for its key; a chat streams the trained model's answer; scripted
// answers check that reasoning is folded, markdown is rendered and model output cannot inject
// HTML, that tool calls are shown as calls and that Stop ends a generation; the Status view
// agrees with /metrics; screenshots of each view (desktop and phone) are saved.
// The server runs with the NVML stand-in (its state file NVML_STATE) and --max-gpu-temp 90.
//   node web_page_e2e.mjs NODE_PREFIX CHROMIUM BASE_URL API_KEY SCREENSHOT_DIR NVML_STATE
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { check, runChecks } from './e2e_checks.mjs';

const [prefix, chromium, baseUrl, apiKey, shots, nvmlState] = process.argv.slice(2);
const require = createRequire(prefix + '/');
const puppeteer = require('puppeteer-core');
mkdirSync(shots, { recursive: true });
const origin = baseUrl.replace(/\/v1$/, '');

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  // CI runs as root, where chromium refuses its sandbox; no GPU on these machines.
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
await page.setViewport({ width: 1100, height: 800 });

async function metrics() {
  const res = await fetch(origin + '/metrics', { headers: { Authorization: 'Bearer ' + apiKey } });
  assert.equal(res.status, 200);
  const values = {};
  for (const line of (await res.text()).split('\n')) {
    const m = /^(strata_[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m && !(m[1] in values)) values[m[1]] = Number(m[3]);  // a labelled gauge: its first
  }
  return values;
}

// DevTools' network throttling: bytes per second the page receives (-1: no limit). A slow link
// makes the page see an answer arrive over time whatever this machine's speed.
let cdp = null;
async function linkSpeed(bytesPerSecond) {
  if (!cdp) {
    cdp = await page.createCDPSession();
    await cdp.send('Network.enable');
  }
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false, latency: 0, downloadThroughput: bytesPerSecond, uploadThroughput: -1 });
}

// Sends a message through the page and waits for its answer to finish; returns what the page
// shows of it and how many times its text changed while it streamed.
async function chat(text) {
  const before = await page.$$eval('.msg.assistant', (a) => a.length);
  await page.evaluate(() => {
    window.__textUpdates = 0;
    window.__observer?.disconnect();
    window.__observer = new MutationObserver(() => { window.__textUpdates++; });
    window.__observer.observe(document.getElementById('messages'),
                              { childList: true, subtree: true, characterData: true });
  });
  await page.type('#prompt', text);
  await page.keyboard.press('Enter');
  await page.waitForFunction(
      (n) => document.querySelectorAll('.msg.assistant').length > n &&
             document.querySelectorAll('.msg.assistant')[n].dataset.finished !== undefined,
      { timeout: 60000 }, before);
  return page.evaluate((n) => {
    const box = document.querySelectorAll('.msg.assistant')[n];
    return { finished: box.dataset.finished, text: box.querySelector('.text').innerText,
             html: box.querySelector('.text').innerHTML, meta: box.querySelector('.meta').textContent,
             updates: window.__textUpdates };
  }, before);
}

check('a key-protected server asks for its key, refuses a wrong one, takes the right one', async () => {
  await page.goto(origin + '/', { waitUntil: 'networkidle0' });
  await page.waitForSelector('#key-prompt:not([hidden])', { timeout: 10000 });
  await page.type('#key-input', 'wrong-key');
  await page.click('#key-form button[type=submit]');
  await page.waitForFunction(() => document.getElementById('key-error').textContent.includes('refused'),
                             { timeout: 10000 });
  await page.$eval('#key-input', (i) => { i.value = ''; });
  await page.type('#key-input', apiKey);
  await page.click('#key-form button[type=submit]');
  await page.waitForFunction(() => document.getElementById('model-name').textContent.includes('context'),
                             { timeout: 10000 });
  assert.equal(await page.$eval('#view-chat', (v) => v.hidden), false);
  // The sampling settings start at the model's defaults (/props).
  const props = await (await fetch(origin + '/props', { headers: { Authorization: 'Bearer ' + apiKey } })).json();
  const shown = await page.$eval('#set-repetition_penalty', (i) => i.value);
  assert.equal(shown, String(Number(props.default_generation_settings.repetition_penalty.toPrecision(6))));
  assert.ok(shown.length <= 6, `${shown}: the float's noise is shown`);
});
check('a chat streams the model\'s answer', async () => {
  await linkSpeed(20000);  // its ~50 chunks over about a second
  const a = await chat('Write a function that does this: Return the sum of a list of numbers.');
  await linkSpeed(-1);
  assert.equal(a.finished, 'stop', JSON.stringify(a));
  assert.match(a.text, /def /);
  assert.ok(a.updates > 3, `the answer arrived in ${a.updates} updates, not streamed`);
  assert.match(a.meta, /generated/);
  assert.match(await page.$eval('#speed', (s) => s.textContent), /tok\/s/);
  await page.screenshot({ path: shots + '/chat.png' });
});
check('reasoning is folded, markdown rendered, and model output cannot inject HTML', async () => {
  const a = await chat('Show me some markup.');
  const folded = await page.$$eval('.msg.assistant details.reasoning',
                                   (d) => d.map((x) => ({ open: x.open, hidden: x.hidden, text: x.textContent })));
  const last = folded[folded.length - 1];
  assert.equal(last.hidden, false);
  assert.equal(last.open, false, 'reasoning starts folded');
  assert.match(last.text, /The user wants markup/);
  assert.match(a.html, /<strong>bold<\/strong>/);
  assert.match(a.html, /<code>code<\/code>/);
  assert.match(a.html, /<pre><code[^>]*>print\(1\)/);
  assert.match(a.text, /<img src=x onerror/, 'the tag is shown as text');
  assert.equal(await page.$$eval('#messages img', (i) => i.length), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
});
check('tool calls the model makes are shown as calls', async () => {
  await page.click('#settings summary');
  await page.type('#tools', JSON.stringify([{ type: 'function', function: {
    name: 'read_file', description: 'Read a file',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } }]));
  const a = await chat('Read a.py');
  assert.equal(a.finished, 'tool_calls', JSON.stringify(a));
  const calls = await page.$$eval('.msg.assistant:last-child .tool-call',
                                  (c) => c.map((x) => x.textContent));
  assert.equal(calls.length, 1);
  assert.match(calls[0], /call read_file/);
  assert.match(calls[0], /"path": ?"a.py"/);
  await page.$eval('#tools', (t) => { t.value = 'not json'; });
  await page.type('#prompt', 'x');
  await page.keyboard.press('Enter');
  assert.match(await page.$eval('#tools-error', (e) => e.textContent), /not JSON/);
  await page.$eval('#tools', (t) => { t.value = ''; });
  await page.$eval('#prompt', (t) => { t.value = ''; });
});
check('Stop ends a generation and frees its slot', async () => {
  await linkSpeed(4000);  // the answer keeps arriving for a minute: Stop always comes first
  await page.type('#prompt', 'Count for a long time.');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => {
    const a = document.querySelectorAll('.msg.assistant');
    return a[a.length - 1].querySelector('.text').textContent.length > 0;
  }, { timeout: 30000 });
  await page.click('#stop');
  await page.waitForFunction(() => {
    const a = document.querySelectorAll('.msg.assistant');
    return a[a.length - 1].dataset.finished === 'stopped';
  }, { timeout: 10000 });
  await linkSpeed(-1);
  const text = await page.$$eval('.msg.assistant .text', (t) => t[t.length - 1].textContent);
  assert.ok(!text.includes('line 300'), 'the whole answer arrived before Stop');
  for (let i = 0; i < 50 && (await metrics()).strata_slots_busy !== 0; ++i)
    await new Promise((r) => setTimeout(r, 100));
  assert.equal((await metrics()).strata_slots_busy, 0);
});
check('the Status view shows the model\'s layers, experts and requests, as /metrics counts them', async () => {
  await page.click('#tab-status');
  const m = await metrics();
  // The page polls every second; wait for a sample taken after /metrics was read.
  const after = Date.now();
  await page.waitForFunction((t) => Number(document.getElementById('view-status').dataset.updated) > t,
                             { timeout: 10000 }, after);
  const shown = await page.$$eval('#st-totals td[data-metric]',
                                  (c) => c.map((x) => [x.dataset.metric, Number(x.dataset.value)]));
  assert.ok(shown.length >= 5);
  for (const [name, value] of shown) assert.equal(value, m[name], name);
  const speed = Number(await page.$eval('#st-speed', (s) => s.dataset.value));
  assert.ok(Math.abs(speed - m.strata_generated_tokens_per_second) < 1e-3 * speed + 1e-6,
            `${speed} vs ${m.strata_generated_tokens_per_second}`);
  const status = await (await fetch(origin + '/status', { headers: { Authorization: 'Bearer ' + apiKey } })).json();
  assert.equal(await page.$$eval('.layer[data-layer]', (l) => l.length), status.model.n_layer);
  const experts = await page.$$eval('.layer[data-layer="0"] .experts > div',
                                    (d) => d.map((x) => [x.dataset.device, Number(x.dataset.count)]));
  assert.deepEqual(experts, [['CPU', status.model.n_expert]]);
  assert.ok(status.experts.tokens > 0, 'expert selections are counted while serving');
  assert.equal(await page.$eval('#heat', (c) => [c.width, c.height].join('x')),
               `${status.model.n_expert}x${status.model.n_layer}`);
  const requests = await page.$$eval('#st-requests tr', (r) => r.map((x) => x.textContent));
  assert.ok(requests.filter((r) => r.includes('POST /v1/chat/completions')).length >= 4, requests.join('\n'));
  await page.screenshot({ path: shots + '/status.png', fullPage: true });
});
check('the machine\'s temperatures are shown, and a hot GPU holds new requests', async () => {
  const m = await metrics();
  const gpu = await page.$eval('#st-machine td[data-metric="strata_gpu_temperature_celsius"]',
                               (c) => [c.textContent, Number(c.dataset.value)]);
  assert.equal(gpu[1], m.strata_gpu_temperature_celsius);
  assert.match(gpu[0], /55 °C/);
  assert.match(await page.$eval('#st-limits', (l) => l.textContent), /above GPU 90 °C/);
  assert.equal(await page.$eval('#hold-banner', (b) => b.hidden), true);
  writeFileSync(nvmlState, 'temperature=95\n');
  await page.waitForFunction(() => !document.getElementById('hold-banner').hidden, { timeout: 10000 });
  assert.match(await page.$eval('#hold-banner', (b) => b.textContent), /--max-gpu-temp 90/);
  await page.screenshot({ path: shots + '/status-held.png' });
  writeFileSync(nvmlState, 'temperature=55\n');
  await page.waitForFunction(() => document.getElementById('hold-banner').hidden, { timeout: 10000 });
});
check('the Plan view shows the planner\'s report and its curve for the served model', async () => {
  await page.click('#tab-plan');
  await page.waitForFunction(() => document.getElementById('plan-text').textContent.length > 0 ||
                                   document.getElementById('plan-state').textContent.startsWith('no plan'),
                             { timeout: 120000 });
  assert.equal(await page.$eval('#plan-state', (s) => s.textContent), '');
  const text = await page.$eval('#plan-text', (t) => t.textContent);
  assert.match(text, /Predicted/);
  assert.match(text, /Context vs speed/);
  await page.waitForFunction(() => document.getElementById('plan-curve').complete, { timeout: 10000 });
  assert.ok(await page.$eval('#plan-curve', (i) => i.naturalWidth) > 0, 'the curve did not render');
  await page.screenshot({ path: shots + '/plan.png', fullPage: true });
});
check('every view fits a phone-sized screen', async () => {
  await page.setViewport({ width: 390, height: 844 });
  for (const view of ['status', 'plan', 'chat']) {
    await page.click('#tab-' + view);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `${view}: ${width} px wide on a 390 px screen`);
    await page.screenshot({ path: `${shots}/phone-${view}.png`, fullPage: view !== 'chat' });
  }
});
check('no script errors on the page', async () => {
  assert.deepEqual(pageErrors, []);
});
check('the browser closes', async () => {
await browser.close();
});
await runChecks();
