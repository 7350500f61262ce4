// Drives a running loom server with the official `openai` npm package (run by
// node_client_test.cpp): models, completions, chat, streaming with usage, and a 404 error.
// Usage: node openai_client.js PORT MODEL API_KEY   (NODE_PATH must find `openai`)
'use strict';
const assert = require('assert');
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;

const [port, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });

async function main() {
  const models = await client.models.list();
  const ids = [];
  for await (const m of models) ids.push(m.id);
  assert.deepStrictEqual(ids, [model]);

  const c = await client.completions.create({ model, prompt: 'Hello from node', max_tokens: 5, temperature: 0, ignore_eos: true });
  assert.strictEqual(c.object, 'text_completion');
  assert.strictEqual(c.choices.length, 1);
  assert.strictEqual(c.choices[0].finish_reason, 'length');
  assert.strictEqual(c.usage.completion_tokens, 5);
  assert.strictEqual(typeof c.choices[0].text, 'string');

  const chat = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'be nice' }, { role: 'user', content: 'hi' }],
    max_completion_tokens: 6, temperature: 0, ignore_eos: true,
  });
  assert.strictEqual(chat.object, 'chat.completion');
  assert.strictEqual(chat.choices[0].message.role, 'assistant');
  assert.strictEqual(chat.usage.completion_tokens, 6);

  // Streaming chat: the concatenated deltas equal the non-streaming answer (greedy).
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'be nice' }, { role: 'user', content: 'hi' }],
    max_completion_tokens: 6, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      if (ch.delta && ch.delta.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.strictEqual(text, chat.choices[0].message.content);
  assert.strictEqual(finish, 'length');
  assert.ok(usage && usage.completion_tokens === 6, JSON.stringify(usage));

  // Streaming completions.
  const cs = await client.completions.create({ model, prompt: 'Hello from node', max_tokens: 5, temperature: 0, ignore_eos: true, stream: true });
  let ctext = '';
  for await (const chunk of cs) for (const ch of chunk.choices) ctext += ch.text;
  assert.strictEqual(ctext, c.choices[0].text);

  // Errors surface as the client's typed errors.
  try {
    await client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 });
    assert.fail('expected a 404');
  } catch (e) {
    assert.strictEqual(e.status, 404, String(e));
  }
  try {
    await client.completions.create({ model, prompt: 'x', max_tokens: 1, top_p: 7 });
    assert.fail('expected a 400');
  } catch (e) {
    assert.strictEqual(e.status, 400, String(e));
  }
  console.log('OPENAI_CLIENT_OK');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
