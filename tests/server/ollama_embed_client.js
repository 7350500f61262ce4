// Drives a loom embedding server (synth tiny-qwen3-embed) with the official `ollama` npm
// package (run by node_client_test.cpp): embed with one input and with several, the same
// vectors either way, unit norms, counts, and a 400 for an option embeddings cannot take.
// Usage: node ollama_embed_client.js PORT MODEL API_KEY   (NODE_PATH must find the package)
'use strict';
const assert = require('assert');
const { Ollama } = require('ollama');

const [port, model, apiKey] = process.argv.slice(2);
const ollama = new Ollama({
  host: `http://127.0.0.1:${port}`,
  headers: { Authorization: `Bearer ${apiKey}` },
});
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

async function main() {
  const show = await ollama.show({ model });
  assert.deepStrictEqual(show.capabilities, ['embedding']);
  const many = await ollama.embed({ model, input: ['Why is the sky blue?', 'Why is grass green?'] });
  assert.strictEqual(many.model, model);
  assert.strictEqual(many.embeddings.length, 2);
  for (const e of many.embeddings) {
    assert.strictEqual(e.length, 64);
    assert.ok(Math.abs(norm(e) - 1) < 1e-5);
  }
  assert.notDeepStrictEqual(many.embeddings[0], many.embeddings[1]);
  assert.ok(many.prompt_eval_count > 0);
  assert.ok(many.total_duration > 0);

  const one = await ollama.embed({ model, input: 'Why is the sky blue?', truncate: true, keep_alive: '5m' });
  assert.deepStrictEqual(one.embeddings[0], many.embeddings[0]);
  const short = await ollama.embed({ model, input: 'Why is the sky blue?', dimensions: 16 });
  assert.strictEqual(short.embeddings[0].length, 16);

  await assert.rejects(
    ollama.embed({ model, input: 'x', options: { temperature: 0.5 } }),
    (e) => e.status_code === 400 && /options\.temperature/.test(e.error),
  );
  console.log('OLLAMA_EMBED_CLIENT_OK');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
