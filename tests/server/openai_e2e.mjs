// The official OpenAI client library (npm `openai`) against a running `strata serve`.
//   node openai_e2e.mjs NODE_PREFIX BASE_URL API_KEY N_CTX DEFAULT_MAX_TOKENS [DEVICE]
// DEVICE (the server runs on a GPU; in CI that is lavapipe, 10-20 tokens a second): the output-format
// checks shrink to one short enforced call, which shows that the grammar masks the GPU's logits;
// the long sampled ones (device-independent: the mask is applied to the logits row whatever
// computed it) run in the CPU variant.
// Exits non-zero with a message on the first failed check.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import { check, runChecks } from './e2e_checks.mjs';

const [prefix, baseURL, apiKey, nCtxText, defaultMaxText, device] = process.argv.slice(2);
const require = createRequire(prefix + '/');
const OpenAI = require('openai');
const Ajv = require('ajv');  // an independent JSON-schema validator for the constrained outputs
const nCtx = Number(nCtxText);
const defaultMaxTokens = Number(defaultMaxText);  // strata serve --max-tokens
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const messages = [{ role: 'user', content: 'Say hello.' }];

check('models list the ids and the context size', async () => {
  const list = await client.models.list();
  // --alias strata-test --alias strata-coder, then the file name (always accepted).
  assert.deepEqual(list.data.map((m) => m.id), ['strata-test', 'strata-coder', 'e2e-chat-model']);
  const m = list.data[0];
  assert.equal(m.object, 'model');
  assert.equal(m.context_length, nCtx);
  assert.equal(m.max_model_len, nCtx);
  const one = await client.models.retrieve(m.id).catch((e) => e);
  // Retrieving one model is optional in the API; a 404 error object is acceptable, a crash is not.
  assert.ok(one.id === m.id || one.status === 404, String(one));
});

check('chat completion', async () => {
  const r = await client.chat.completions.create({ model: 'strata-test', messages, max_tokens: 6, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens <= 6);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

check('streamed chat completion with usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'strata-test', messages, max_tokens: 6, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      text += c.delta.reasoning_content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 2);
  assert.ok(['stop', 'length'].includes(finish));
  assert.ok(usage && usage.completion_tokens <= 6);
  // The helper that accumulates a stream accepts it too.
  const runner = client.chat.completions.stream({ model: 'strata-test', messages, max_tokens: 4, temperature: 0 });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.role, 'assistant');
});

check('legacy completions with text and token prompts', async () => {
  const r = await client.completions.create({ model: 'strata-test', prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  const t = await client.completions.create({ model: 'strata-test', prompt: [9707, 11, 1879], max_tokens: 3 });
  assert.equal(t.usage.prompt_tokens, 3);
});

check('tools round trip: tools offered, a tool result sent back', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const first = await client.chat.completions.create({ model: 'strata-test', messages, tools, max_tokens: 8, temperature: 0 });
  assert.ok(['stop', 'length', 'tool_calls'].includes(first.choices[0].finish_reason));
  const followUp = [
    ...messages,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 21}' },
  ];
  const second = await client.chat.completions.create({ model: 'strata-test', messages: followUp, tools, max_tokens: 4, tool_choice: 'auto' });
  assert.equal(second.choices[0].message.role, 'assistant');
});

check('max_tokens beyond the context is lowered to fit and ends with length', async () => {
  const prompt = Array(nCtx - 4).fill(9707);
  const r = await client.completions.create({ model: 'strata-test', prompt, max_tokens: 32000, ignore_eos: true });
  assert.equal(r.usage.prompt_tokens, nCtx - 4);
  assert.equal(r.usage.completion_tokens, 4);
  assert.equal(r.choices[0].finish_reason, 'length');
});

check('a request without max_tokens gets the server default', async () => {
  const r = await client.completions.create({ model: 'strata-test', prompt: [9707, 11, 1879], ignore_eos: true });
  assert.equal(r.usage.completion_tokens, defaultMaxTokens);
  assert.equal(r.choices[0].finish_reason, 'length');
});

check('a prompt that does not fit by itself is a 400 that names both numbers', async () => {
  const prompt = Array(nCtx + 3).fill(9707);
  const e = await client.completions.create({ model: 'strata-test', prompt, max_tokens: 8 }).catch((e) => e);
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.equal(e.status, 400);
  assert.equal(e.code, 'context_length_exceeded');
  assert.match(e.message, new RegExp(`${nCtx} tokens`));
  assert.match(e.message, new RegExp(`prompt is ${nCtx + 3} tokens`));
});

check('bad values and unknown models are 4xx errors', async () => {
  const bad = await client.chat.completions.create({ model: 'strata-test', messages, temperature: 7 }).catch((e) => e);
  assert.ok(bad instanceof OpenAI.BadRequestError, String(bad));
  assert.equal(bad.param, 'temperature');
  const unknown = await client.chat.completions.create({ model: 'no-such-model', messages }).catch((e) => e);
  assert.ok(unknown instanceof OpenAI.NotFoundError, String(unknown));
  assert.equal(unknown.code, 'model_not_found');
  assert.match(unknown.message, /strata-test', 'strata-coder', 'e2e-chat-model/);
});

check('every alias is accepted and named back', async () => {
  for (const model of ['strata-coder', 'e2e-chat-model']) {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 2 });
    assert.equal(r.model, model);
  }
});

check('tool_choice must name an offered tool', async () => {
  const tools = [{ type: 'function', function: { name: 'read_file', parameters: { type: 'object', properties: {} } } }];
  const e = await client.chat.completions.create({
    model: 'strata-test', messages, tools, tool_choice: { type: 'function', function: { name: 'rm_rf' } },
  }).catch((e) => e);
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.equal(e.param, 'tool_choice');
  assert.match(e.message, /rm_rf/);
  const none = await client.chat.completions.create({ model: 'strata-test', messages, tool_choice: 'required' }).catch((e) => e);
  assert.ok(none instanceof OpenAI.BadRequestError, String(none));
  const one = await client.chat.completions.create({
    model: 'strata-test', messages, tools, tool_choice: { type: 'function', function: { name: 'read_file' } },
    parallel_tool_calls: false, max_tokens: 3,
  });
  assert.equal(one.choices[0].message.role, 'assistant');
});

check('reasoning_effort none turns thinking off', async () => {
  const ask = (extra) => client.chat.completions.create({ model: 'strata-test', messages, max_tokens: 1, ...extra });
  const thinking = await ask({});
  const off = await ask({ reasoning_effort: 'none' });
  // Qwen3's template then writes an empty <think></think> block (4 tokens) into the prompt.
  assert.equal(off.usage.prompt_tokens, thinking.usage.prompt_tokens + 4);
  const same = await ask({ enable_thinking: false });
  assert.equal(same.usage.prompt_tokens, off.usage.prompt_tokens);
  const bad = await ask({ reasoning_effort: 'extreme' }).catch((e) => e);
  assert.ok(bad instanceof OpenAI.BadRequestError, String(bad));
});

check('a final assistant message is continued, not answered', async () => {
  const prefill = [...messages, { role: 'assistant', content: 'Hello! I am' }];
  const ask = (extra) => client.chat.completions.create({ model: 'strata-test', messages: prefill, max_tokens: 3, temperature: 0, ignore_eos: true, ...extra });
  const continued = await ask({});
  const newTurn = await ask({ continue_final_message: false });
  assert.ok(newTurn.usage.prompt_tokens > continued.usage.prompt_tokens);
  assert.ok(!continued.choices[0].message.content.startsWith('Hello! I am'), 'only the continuation comes back');
});

check('logprobs on chat (whole and streamed) and completions', async () => {
  const ask = { model: 'strata-test', messages, max_tokens: 4, temperature: 0, ignore_eos: true,
    logprobs: true, top_logprobs: 2 };
  const r = await client.chat.completions.create(ask);
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(Array.isArray(e.bytes) && e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].token, e.token, 'greedy: the chosen token is the likeliest');
  }
  const streamed = [];
  for await (const chunk of await client.chat.completions.create({ ...ask, stream: true })) {
    for (const c of chunk.choices) streamed.push(...(c.logprobs?.content ?? []));
  }
  assert.deepEqual(streamed, content);
  const legacy = await client.completions.create({ model: 'strata-test', prompt: 'Once upon a time',
    max_tokens: 3, temperature: 0, ignore_eos: true, logprobs: 1 });
  assert.equal(legacy.choices[0].logprobs.tokens.length, 3);
  assert.equal(legacy.choices[0].logprobs.text_offset[0], 0);
  assert.equal(legacy.choices[0].logprobs.token_logprobs.length, 3);
  const bad = await client.chat.completions.create({ ...ask, top_logprobs: 30 }).catch((e) => e);
  assert.ok(bad instanceof OpenAI.BadRequestError, String(bad));
});

// Bounded schemas: a random-weight model sampling at temperature 1 finishes them well within
// max_tokens (strings have a maxLength, arrays a maxItems; the grammar bounds digits and blanks).
const thingSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 8 },
    count: { type: 'integer' },
    color: { enum: ['red', 'green', 'blue'] },
    inner: { type: 'object', properties: { flag: { type: 'boolean' }, code: { type: 'string', maxLength: 4 } },
      required: ['flag', 'code'], additionalProperties: false },
    tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
  },
  required: ['name', 'count', 'color', 'inner', 'tags'],
  additionalProperties: false,
};
const boundedTools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } },
    required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: {
    type: 'object', properties: { zone: { type: 'string', maxLength: 8 },
      hours: { type: 'array', items: { type: 'integer' }, maxItems: 3 } },
    required: ['zone'], additionalProperties: false } } },
];
const ajv = new Ajv({ allErrors: true });
const validateThing = ajv.compile(thingSchema);
const validateArgs = Object.fromEntries(boundedTools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
// Every call names an offered tool and its arguments validate against that tool's parameters.
const assertValidCalls = (calls, onlyName) => {
  assert.ok(calls?.length >= 1, 'at least one tool call');
  for (const call of calls) {
    assert.equal(call.type, 'function');
    if (onlyName) assert.equal(call.function.name, onlyName);
    const validate = validateArgs[call.function.name];
    assert.ok(validate, `unknown tool ${call.function.name}`);
    const args = JSON.parse(call.function.arguments);
    assert.ok(validate(args), `${call.function.arguments}: ${ajv.errorsText(validate.errors)}`);
  }
};

if (device) {
  check('tool_choice naming a tool on the GPU: a short call whose arguments validate', async () => {
    const unitTool = [{ type: 'function', function: { name: 'set_unit', parameters: {
      type: 'object', properties: { unit: { enum: ['c', 'f'] } }, required: ['unit'], additionalProperties: false } } }];
    const validate = ajv.compile(unitTool[0].function.parameters);
    const r = await client.chat.completions.create({
      model: 'strata-test', messages, tools: unitTool, parallel_tool_calls: false,
      tool_choice: { type: 'function', function: { name: 'set_unit' } }, max_tokens: 100, temperature: 0,
    }, { timeout: 400_000 });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const [call] = r.choices[0].message.tool_calls;
    assert.equal(call.function.name, 'set_unit');
    assert.ok(validate(JSON.parse(call.function.arguments)), call.function.arguments);
  });
} else {
  check('response_format json_schema: the content validates (ajv)', async () => {
    const r = await client.chat.completions.create({
      model: 'strata-test', messages, max_tokens: 300, temperature: 1,
      response_format: { type: 'json_schema', json_schema: { name: 'thing', schema: thingSchema, strict: true } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const content = r.choices[0].message.content;
    assert.ok(validateThing(JSON.parse(content)), `${content}: ${ajv.errorsText(validateThing.errors)}`);
  });

  check('response_format json_object: the content is an object', async () => {
    // Greedy: any object is allowed, and sampled ones can outgrow max_tokens.
    const r = await client.chat.completions.create({
      model: 'strata-test', messages, max_tokens: 100, temperature: 0, response_format: { type: 'json_object' },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const value = JSON.parse(r.choices[0].message.content);
    assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value), r.choices[0].message.content);
  });

  // Greedy as well: sampled at temperature 1 it ran past max_tokens (finish_reason length) in
  // about 1 run in 20; sampled constrained outputs are checked by the json_schema case above.
  check('tool_choice required, one call: a tool call whose arguments validate', async () => {
    const r = await client.chat.completions.create({
      model: 'strata-test', messages, tools: boundedTools, tool_choice: 'required', parallel_tool_calls: false,
      max_tokens: 200, temperature: 0,
    });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(r.choices[0].message.tool_calls.length, 1);
    assertValidCalls(r.choices[0].message.tool_calls);
  });

  // Greedy: get_time's integers have no bound on their digits, and a random model sampling at
  // temperature 1 sometimes wrote one past max_tokens (finish_reason length in a clean-clone run).
  check('tool_choice naming a tool: a call of that tool', async () => {
    const r = await client.chat.completions.create({
      model: 'strata-test', messages, tools: boundedTools, parallel_tool_calls: false,
      tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 200, temperature: 0,
    });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(r.choices[0].message.tool_calls.length, 1);
    assertValidCalls(r.choices[0].message.tool_calls, 'get_time');
  });

  check('tool_choice required, parallel calls allowed: every whole call validates', async () => {
    // A random model may keep calling until max_tokens; the calls that closed must still validate
    // (the last one of a cut output may be cut too, as OpenAI's are).
    const r = await client.chat.completions.create({
      model: 'strata-test', messages, tools: boundedTools, tool_choice: 'required', max_tokens: 120, temperature: 0,
    });
    const { finish_reason: finish, message } = r.choices[0];
    assert.ok(finish === 'tool_calls' || (finish === 'length' && r.usage.completion_tokens === 120), finish);
    const calls = message.tool_calls ?? [];
    assert.ok(calls.length >= 1, 'at least one tool call');
    const whole = finish === 'length' ? calls.slice(0, -1) : calls;
    if (whole.length > 0) assertValidCalls(whole);
  });

  check('streamed required tool call, accumulated by the stream helper', async () => {
    // Greedy, for the same reason as the one-call case (sampled: length about 1 run in 20).
    const runner = client.chat.completions.stream({
      model: 'strata-test', messages, tools: boundedTools, tool_choice: 'required', parallel_tool_calls: false,
      max_tokens: 200, temperature: 0,
    });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.equal(final.choices[0].message.tool_calls.length, 1);
    assertValidCalls(final.choices[0].message.tool_calls);
    assert.ok(final.choices[0].message.tool_calls[0].id, 'the call has an id');
  });
}

check('the API key is enforced', async () => {
  const anonymous = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  const e = await anonymous.models.list().catch((e) => e);
  assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
});

await runChecks();
