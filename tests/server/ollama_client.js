// Drives a running loom server with the official `ollama` npm package (run by
// node_client_test.cpp): version, list, show, ps, generate and chat, each streamed and not (the
// same text either way), chat with a JSON-schema `format`, a continued generate via `context`,
// and a 400 surfacing as the client's ResponseError.
// Usage: node ollama_client.js PORT MODEL API_KEY   (NODE_PATH must find the package)
'use strict';
const assert = require('assert');
const { Ollama } = require('ollama');

const [port, model, apiKey] = process.argv.slice(2);
const ollama = new Ollama({
  host: `http://127.0.0.1:${port}`,
  headers: { Authorization: `Bearer ${apiKey}` },
});
const options = { temperature: 0, num_predict: 8, seed: 1 };

async function main() {
  const v = await ollama.version();
  assert.strictEqual(typeof v.version, 'string');

  const list = await ollama.list();
  assert.strictEqual(list.models[0].name, model);
  const ps = await ollama.ps();
  assert.strictEqual(ps.models[0].name, model);
  const show = await ollama.show({ model });
  assert.ok(show.capabilities.includes('completion'));

  const once = await ollama.generate({ model, prompt: 'Why is the sky blue?', stream: false, options });
  assert.strictEqual(once.done, true);
  assert.strictEqual(once.done_reason, 'length');
  assert.strictEqual(once.eval_count, 8);
  let text = '';
  let last = null;
  for await (const part of await ollama.generate({ model, prompt: 'Why is the sky blue?', stream: true, options })) {
    text += part.response;
    last = part;
  }
  assert.strictEqual(text, once.response);
  assert.strictEqual(last.done, true);
  assert.deepStrictEqual(last.context, once.context);
  const next = await ollama.generate({ model, prompt: 'And the sea?', context: once.context, stream: false, options });
  assert.ok(next.prompt_eval_count > once.context.length);

  const messages = [{ role: 'user', content: 'Hi' }];
  const chat = await ollama.chat({ model, messages, stream: false, options });
  assert.strictEqual(chat.message.role, 'assistant');
  let streamed = '';
  for await (const part of await ollama.chat({ model, messages, stream: true, options })) {
    streamed += part.message.content;
  }
  assert.strictEqual(streamed, chat.message.content);

  const format = {
    type: 'object',
    properties: { n: { type: 'integer', minimum: 0, maximum: 99 } },
    required: ['n'],
    additionalProperties: false,
  };
  const json = await ollama.chat({ model, messages, format, stream: false, options: { num_predict: 64, seed: 2 } });
  assert.strictEqual(json.done_reason, 'stop');
  const doc = JSON.parse(json.message.content);
  assert.ok(Number.isInteger(doc.n) && doc.n >= 0 && doc.n <= 99, json.message.content);

  await assert.rejects(
    ollama.generate({ model, prompt: 'x', stream: false, options: { num_gpu: 1 } }),
    (e) => e.status_code === 400 && /num_gpu/.test(e.error),
  );
  console.log('OLLAMA_CLIENT_OK');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
