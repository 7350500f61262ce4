// Drives a running loom server with the official `@anthropic-ai/sdk` npm package (run by
// anthropic_client_test.cpp): count_tokens, messages.create with tools and tool_choice "any",
// the same call streamed through client.messages.stream(...).finalMessage(), a tool_result
// follow-up turn, and a 400 for an image block.
// Usage: node anthropic_client.js PORT MODEL API_KEY MAX_MODEL_LEN   (NODE_PATH must find the SDK)
'use strict';
const assert = require('assert');
const mod = require('@anthropic-ai/sdk');
const Anthropic = mod.Anthropic || mod.default || mod;

const [port, model, apiKey, maxModelLen] = process.argv.slice(2);
const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey, maxRetries: 0, timeout: 60000 });

// Bounded values, so a call fits the test model's small context.
const tools = [{
  name: 'get_weather',
  description: 'Weather for a city',
  input_schema: {
    type: 'object',
    properties: {
      city: { type: 'string', maxLength: 8 },
      unit: { enum: ['c', 'f'] },
      days: { type: 'integer', minimum: 1, maximum: 7 },
    },
    required: ['city', 'unit', 'days'],
    additionalProperties: false,
  },
}];

function checkToolUse(msg, what) {
  assert.strictEqual(msg.type, 'message', what);
  assert.strictEqual(msg.role, 'assistant', what);
  assert.strictEqual(msg.stop_reason, 'tool_use', `${what}: ${JSON.stringify(msg)}`);
  const calls = msg.content.filter((b) => b.type === 'tool_use');
  assert.strictEqual(calls.length, 1, `${what}: ${JSON.stringify(msg.content)}`);
  const call = calls[0];
  assert.match(call.id, /^toolu_[A-Za-z0-9]{24}$/);
  assert.strictEqual(call.name, 'get_weather');
  const input = call.input;
  assert.deepStrictEqual(Object.keys(input).sort(), ['city', 'days', 'unit'], `${what}: ${JSON.stringify(input)}`);
  assert.strictEqual(typeof input.city, 'string');
  assert.ok(['c', 'f'].includes(input.unit), JSON.stringify(input));
  assert.ok(Number.isInteger(input.days) && input.days >= 1 && input.days <= 7, JSON.stringify(input));
  return call;
}

// Comparable content: plain data (the stream's inputs are lazy getters) without the random ids.
function plain(content) {
  return JSON.parse(JSON.stringify(content)).map((b) => ({ ...b, id: undefined }));
}

async function main() {
  const messages = [{ role: 'user', content: 'weather in Paris?' }];
  const tool_choice = { type: 'any', disable_parallel_tool_use: true };
  const count = await client.messages.countTokens({ model, messages, tools, tool_choice });
  assert.ok(count.input_tokens > 0, JSON.stringify(count));
  const max_tokens = Number(maxModelLen) - count.input_tokens - 1;
  const params = { model, max_tokens, messages, tools, tool_choice, temperature: 0 };

  const msg = await client.messages.create(params);
  const call = checkToolUse(msg, 'create');
  assert.strictEqual(msg.usage.input_tokens, count.input_tokens);

  // Streaming with the SDK's own accumulation; the argument fragments arrive as inputJson events.
  const stream = client.messages.stream(params);
  let fragments = '';
  stream.on('inputJson', (partial) => { fragments += partial; });
  const final = await stream.finalMessage();
  checkToolUse(final, 'stream');
  assert.deepStrictEqual(JSON.parse(fragments), call.input);
  assert.deepStrictEqual(plain(final.content), plain(msg.content));
  assert.strictEqual(final.usage.output_tokens, msg.usage.output_tokens);

  // The follow-up turn: the assistant's content as returned, then the tool's result.
  const follow = await client.messages.create({
    model, max_tokens: 5, temperature: 0, tools,
    messages: [...messages, { role: 'assistant', content: msg.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny, 21 C' }] }],
  });
  assert.strictEqual(follow.type, 'message');
  assert.ok(follow.content.length >= 1, JSON.stringify(follow));
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(follow.stop_reason), follow.stop_reason);

  // Images are refused with a typed 400.
  try {
    await client.messages.create({
      model, max_tokens: 5,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }],
    });
    assert.fail('expected a 400');
  } catch (e) {
    assert.strictEqual(e.status, 400, String(e));
    assert.ok(e instanceof Anthropic.BadRequestError, String(e));
  }
  console.log('ANTHROPIC_CLIENT_OK');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
