// The Vercel AI SDK (npm `ai` 6, `@ai-sdk/openai-compatible`) against a running `strata serve`
// started with STRATA_TEST_SCRIPTED_OUTPUT=the file that `node ai_sdk_e2e.mjs --script` prints:
// the n-th generation request writes the n-th scripted text, so the checks below must run in
// this order and each must make exactly the requests its entries are for.
//   node ai_sdk_e2e.mjs --script > FILE
//   node ai_sdk_e2e.mjs NODE_PREFIX BASE_URL API_KEY MODEL
// (run_clients_e2e.sh passes a WORK_DIR after both; it is not needed here)
// Prints `ok   name` or `FAIL name: ...` per check; exits non-zero on any failure.
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import { check, runChecks } from './e2e_checks.mjs';

const toolCall = (name, args) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;
const weatherArgs = { city: 'Paris', unit: 'c' };
const scriptedThing = { name: 'lamp', count: 3, color: 'blue', tags: ['a', 'b'] };
// One entry per request, in the order the checks make them (null: the model samples).
const script = [
  '<think>\nscripted reasoning\n</think>\n\nAI-SDK-TEXT-1',  // generateText
  'AI-SDK-STREAM-2, streamed in pieces.',                    // streamText
  toolCall('get_weather', weatherArgs),                      // tool loop, step 1
  'AI-SDK-TOOL-FINAL-3',                                     // tool loop, step 2 (after the result)
  toolCall('get_weather', weatherArgs),                      // streamed tool loop, step 1
  'AI-SDK-STREAM-TOOL-FINAL-4',                              // streamed tool loop, step 2
  JSON.stringify(scriptedThing),                             // object output, json_object
  null,                                                      // object output, json_schema: sampled
];
if (process.argv[2] === '--script') {
  console.log(JSON.stringify(script));
  process.exit(0);
}

const [prefix, baseURL, apiKey, modelId] = process.argv.slice(2);
const require = createRequire(prefix + '/');
const { generateText, streamText, tool, stepCountIs, Output } = require('ai');
const { createOpenAICompatible } = require('@ai-sdk/openai-compatible');
const { z } = require('zod');
// The default provider warns (on stdout) that it cannot send the schema: expected, see below.
globalThis.AI_SDK_LOG_WARNINGS = false;

// Default settings: what a user writes first.
const model = createOpenAICompatible({ name: 'strata', baseURL, apiKey })(modelId);
// The provider sends a schema (response_format json_schema) only when told the server takes one;
// by default it asks for json_object and validates the answer itself.
const structuredModel = createOpenAICompatible({ name: 'strata', baseURL, apiKey, supportsStructuredOutputs: true })(modelId);
const prompt = 'What is the weather in Paris?';

check('generateText: text and reasoning', async () => {
  const r = await generateText({ model, prompt, maxRetries: 0 });
  assert.equal(r.text, 'AI-SDK-TEXT-1');
  assert.match(r.reasoningText ?? '', /scripted reasoning/);
  assert.equal(r.finishReason, 'stop');
  assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0, JSON.stringify(r.usage));
});

// streamText reports errors to onError (the stream just ends): collect them and fail on any.
const streamErrors = (errors) => ({ onError: ({ error }) => errors.push(error) });

check('streamText: the whole stream', async () => {
  const errors = [];
  const r = streamText({ model, prompt, maxRetries: 0, ...streamErrors(errors) });
  const parts = [];
  for await (const part of r.textStream) parts.push(part);
  assert.deepEqual(errors, []);
  assert.ok(parts.length >= 2, `${parts.length} text parts`);
  assert.equal(parts.join(''), 'AI-SDK-STREAM-2, streamed in pieces.');
  assert.equal(await r.finishReason, 'stop');
});

// A tool the SDK executes; the scripted call's arguments must reach it.
const weatherTool = (calls) => tool({
  description: 'Weather of a city',
  inputSchema: z.object({ city: z.string(), unit: z.enum(['c', 'f']) }),
  execute: async (input) => {
    calls.push(input);
    return { temperature: 21, unit: input.unit };
  },
});
// The request that carried the tool result back: the step after the call.
const assertToolRoundTrip = (steps, calls, finalText, text) => {
  assert.deepEqual(calls, [weatherArgs]);
  assert.equal(steps.length, 2);
  assert.equal(steps[0].finishReason, 'tool-calls');
  assert.equal(steps[0].toolCalls[0].toolName, 'get_weather');
  assert.deepEqual(steps[0].toolResults[0].output, { temperature: 21, unit: 'c' });
  assert.equal(text, finalText);
};

check('generateText: a tool call, executed, then the answer (two steps)', async () => {
  const calls = [];
  const r = await generateText({ model, prompt, maxRetries: 0, tools: { get_weather: weatherTool(calls) },
    stopWhen: stepCountIs(2) });
  assertToolRoundTrip(r.steps, calls, 'AI-SDK-TOOL-FINAL-3', r.text);
});

check('streamText: a streamed tool call, executed, then the answer (two steps)', async () => {
  const calls = [], errors = [];
  const r = streamText({ model, prompt, maxRetries: 0, tools: { get_weather: weatherTool(calls) },
    stopWhen: stepCountIs(2), ...streamErrors(errors) });
  const kinds = new Set();
  for await (const part of r.fullStream) kinds.add(part.type);
  assert.deepEqual(errors, []);
  // The call came in pieces (tool-input-*) and was assembled into one tool-call.
  for (const kind of ['tool-input-start', 'tool-input-delta', 'tool-call', 'tool-result']) {
    assert.ok(kinds.has(kind), `no ${kind} part (got ${[...kinds]})`);
  }
  assertToolRoundTrip(await r.steps, calls, 'AI-SDK-STREAM-TOOL-FINAL-4', await r.text);
});

// Bounded so that sampling finishes it quickly. Strings: the schema sent says maxLength N, which
// JSON Schema (and the grammar) counts in code points, while zod's .max() counts UTF-16 units, so
// a character beyond U+FFFF counts twice there: zod checks 2N. Numbers: z.number(), not .int(),
// whose safe-integer bounds the grammar does not enforce.
const boundedString = (n) => z.string().max(2 * n).meta({ maxLength: n });
const thingSchema = z.object({
  name: boundedString(8),
  count: z.number(),
  color: z.enum(['red', 'green', 'blue']),
  tags: z.array(boundedString(6)).max(3),
});

check('generateText with Output.object (json_object, scripted), validated by zod', async () => {
  const r = await generateText({ model, prompt, maxRetries: 0, output: Output.object({ schema: thingSchema }) });
  assert.deepEqual(r.output, scriptedThing);
});

check('generateText with Output.object (json_schema, sampled under the grammar), validated by zod', async () => {
  const r = await generateText({ model: structuredModel, prompt, maxRetries: 0, temperature: 1, maxOutputTokens: 300,
    output: Output.object({ schema: thingSchema }) });
  assert.equal(r.finishReason, 'stop');
  assert.ok(thingSchema.safeParse(r.output).success, JSON.stringify(r.output));
});
// The SDK's NoObjectGeneratedError keeps the text it rejected: show it.
const describe = (e) => (e?.text === undefined ? e?.stack ?? e : `${e.stack}\n  text: ${JSON.stringify(e.text)}\n  cause: ${e.cause}`);

await runChecks(describe);
