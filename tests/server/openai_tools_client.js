// Drives a running loom server's structured outputs and tool calls with the official `openai`
// npm package (run by node_client_test.cpp): response_format json_schema, tool_choice
// required / named / auto, streamed tool calls reassembled by the SDK's own stream helper, and
// a multi-turn exchange with role "tool" results. The model has random weights, so only
// enforced constraints can pass.
// Usage: node openai_tools_client.js PORT MODEL API_KEY   (NODE_PATH must find `openai`)
'use strict';
const assert = require('assert');
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;

const [port, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 120000 });

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] } },
      required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add',
    parameters: { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 99 }, b: { type: 'integer', minimum: 0, maximum: 99 } },
      required: ['a', 'b'], additionalProperties: false } } },
];

function checkCall(call) {
  assert.strictEqual(call.type, 'function');
  assert.ok(typeof call.id === 'string' && call.id.length > 0, JSON.stringify(call));
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') {
    assert.deepStrictEqual(Object.keys(args).sort(), ['city', 'unit']);
    assert.ok(typeof args.city === 'string' && [...args.city].length <= 8);
    assert.ok(args.unit === 'c' || args.unit === 'f');
  } else {
    assert.strictEqual(call.function.name, 'add');
    assert.deepStrictEqual(Object.keys(args).sort(), ['a', 'b']);
    for (const v of [args.a, args.b]) assert.ok(Number.isInteger(v) && v >= 0 && v <= 99, JSON.stringify(args));
  }
}

async function main() {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

  // response_format json_schema.
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 1, maximum: 5 },
    word: { enum: ['yes', 'no'] } }, required: ['ok', 'n', 'word'], additionalProperties: false };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 120, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } } });
    assert.strictEqual(r.choices[0].finish_reason, 'stop');
    const doc = JSON.parse(r.choices[0].message.content);
    assert.deepStrictEqual(Object.keys(doc).sort(), ['n', 'ok', 'word']);
    assert.strictEqual(typeof doc.ok, 'boolean');
    assert.ok(Number.isInteger(doc.n) && doc.n >= 1 && doc.n <= 5);
    assert.ok(doc.word === 'yes' || doc.word === 'no');
  }

  // tool_choice required and named.
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required',
      parallel_tool_calls: false, max_tokens: 200, seed });
    assert.strictEqual(r.choices[0].finish_reason, 'tool_calls');
    assert.strictEqual(r.choices[0].message.tool_calls.length, 1);
    checkCall(r.choices[0].message.tool_calls[0]);
    const named = await client.chat.completions.create({ model, messages, tools, max_tokens: 200, seed,
      tool_choice: { type: 'function', function: { name: 'add' } } });
    assert.strictEqual(named.choices[0].message.tool_calls[0].function.name, 'add');
    checkCall(named.choices[0].message.tool_calls[0]);
  }

  // auto: the model may write text or call; whatever it does parses.
  const auto = await client.chat.completions.create({ model, messages, tools, tool_choice: 'auto', max_tokens: 40, seed: 5 });
  const am = auto.choices[0].message;
  if (am.tool_calls && am.tool_calls.length) am.tool_calls.forEach(checkCall);
  else assert.strictEqual(typeof am.content, 'string');

  // Streaming: the SDK reassembles delta.tool_calls into the same call as the non-streamed one.
  const req = { model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200, seed: 9, temperature: 0 };
  const whole = await client.chat.completions.create(req);
  const stream = client.chat.completions.stream(req);
  const final = await stream.finalChatCompletion();
  const sc = final.choices[0].message.tool_calls;
  assert.strictEqual(sc.length, 1);
  checkCall(sc[0]);
  assert.strictEqual(sc[0].function.name, whole.choices[0].message.tool_calls[0].function.name);
  assert.deepStrictEqual(JSON.parse(sc[0].function.arguments), JSON.parse(whole.choices[0].message.tool_calls[0].function.arguments));
  assert.ok(!final.choices[0].message.content, 'markup leaked into content: ' + final.choices[0].message.content);

  // Multi-turn: the assistant's call (content null) and the tool's result go back in.
  const call = whole.choices[0].message.tool_calls[0];
  const follow = await client.chat.completions.create({ model, max_tokens: 8, tools, messages: [
    ...messages,
    { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: call.id, content: '21 C and sunny' },
  ] });
  assert.strictEqual(follow.object, 'chat.completion');

  // A bad schema is a 400 the SDK raises as BadRequestError.
  try {
    await client.chat.completions.create({ model, messages, max_tokens: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { a: {} } } } } });
    assert.fail('expected a 400');
  } catch (e) {
    assert.strictEqual(e.status, 400, String(e));
    assert.ok(String(e.message).includes('patternProperties'), e.message);
  }
  console.log('OPENAI_TOOLS_CLIENT_OK');
}

main().catch((e) => { console.error(e); process.exit(1); });
