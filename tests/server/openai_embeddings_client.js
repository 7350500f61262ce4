// Drives a loom embedding server (synth tiny-qwen3-embed) with the official `openai` npm
// package (run by node_client_test.cpp): embeddings.create as floats and as base64 (the
// package's default, decoded by it), which must agree exactly, with unit norms, `dimensions`,
// token-id input, usage, and a 400 for a bad encoding_format.
// Usage: node openai_embeddings_client.js PORT MODEL API_KEY   (NODE_PATH must find `openai`)
'use strict';
const assert = require('assert');
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;

const [port, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

async function main() {
  const input = ['The sky is blue.', 'Grass is green.', 'Paris is in France.'];
  const floats = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.strictEqual(floats.object, 'list');
  assert.strictEqual(floats.model, model);
  assert.strictEqual(floats.data.length, 3);
  floats.data.forEach((d, i) => {
    assert.strictEqual(d.object, 'embedding');
    assert.strictEqual(d.index, i);
    assert.strictEqual(d.embedding.length, 64);
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-5, `norm ${norm(d.embedding)}`);
  });
  assert.ok(floats.usage.prompt_tokens > 0);
  assert.strictEqual(floats.usage.total_tokens, floats.usage.prompt_tokens);

  // No encoding_format: the package asks for base64 and decodes little-endian float32 itself.
  const b64 = await client.embeddings.create({ model, input });
  b64.data.forEach((d, i) => assert.deepStrictEqual(Array.from(d.embedding), floats.data[i].embedding));
  const explicit = await client.embeddings.create({ model, input: input[0], encoding_format: 'base64' });
  assert.strictEqual(typeof explicit.data[0].embedding, 'string');
  const bytes = Buffer.from(explicit.data[0].embedding, 'base64');
  const decoded = Array.from({ length: bytes.length / 4 }, (_, k) => bytes.readFloatLE(4 * k));
  assert.deepStrictEqual(decoded, floats.data[0].embedding);

  const short = await client.embeddings.create({ model, input: input[0], dimensions: 8, encoding_format: 'float' });
  assert.strictEqual(short.data[0].embedding.length, 8);
  assert.ok(Math.abs(norm(short.data[0].embedding) - 1) < 1e-5);

  const ids = await client.embeddings.create({ model, input: [[9707, 11, 1879], [9707]], encoding_format: 'float' });
  assert.strictEqual(ids.data.length, 2);
  assert.strictEqual(ids.usage.prompt_tokens, 4);

  await assert.rejects(
    client.embeddings.create({ model, input: 'x', encoding_format: 'int8' }),
    (e) => e.status === 400 && e.param === 'encoding_format',
  );
  console.log('OPENAI_EMBEDDINGS_CLIENT_OK');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
