// Drives a running loom server's Responses API with the official `openai` npm package (run by
// node_client_test.cpp): responses.create for text (the SDK's output_text), a function-tool
// round trip (the output items fed back with a function_call_output, and again through
// previous_response_id), text.format json_schema, responses.stream with the event order
// checked against the documented sequence and the SDK's own reassembly, retrieve / delete,
// and a 400 raised as BadRequestError. The model has random weights, so only enforced
// constraints and greedy equalities can be checked.
// Usage: node openai_responses_client.js PORT MODEL API_KEY   (NODE_PATH must find `openai`)
'use strict';
const assert = require('assert');
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;

const [port, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 120000 });

const tools = [
  { type: 'function', name: 'get_weather', description: 'Weather in a city', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] } },
      required: ['city', 'unit'], additionalProperties: false } },
];

// The documented order of one stream's events (item by item), and every sequence_number.
function checkOrder(events) {
  events.forEach((e, i) => assert.strictEqual(e.sequence_number, i, JSON.stringify(e)));
  const types = events.map((e) => e.type);
  assert.strictEqual(types[0], 'response.created');
  assert.strictEqual(types[1], 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(types[types.length - 1]), types.join());
  let i = 2;
  while (i < types.length - 1) {
    assert.strictEqual(types[i], 'response.output_item.added', types.join());
    const kind = events[i].item.type;
    i++;
    let expected;
    if (kind === 'message') {
      expected = ['response.content_part.added', 'response.output_text.delta*', 'response.output_text.done',
        'response.content_part.done'];
    } else if (kind === 'reasoning') {
      expected = ['response.content_part.added', 'response.reasoning_text.delta*', 'response.reasoning_text.done',
        'response.content_part.done'];
    } else {
      assert.strictEqual(kind, 'function_call');
      expected = ['response.function_call_arguments.delta*', 'response.function_call_arguments.done'];
    }
    for (const want of expected) {
      if (want.endsWith('*')) {
        while (types[i] === want.slice(0, -1)) i++;
      } else {
        assert.strictEqual(types[i], want, types.join());
        i++;
      }
    }
    assert.strictEqual(types[i], 'response.output_item.done', types.join());
    i++;
  }
}

async function main() {
  // Text: the SDK's output_text convenience over our message item.
  const base = { model, instructions: 'Be brief.', input: 'Why is the sky blue?', max_output_tokens: 8,
    temperature: 0, ignore_eos: true };
  const r = await client.responses.create(base);
  assert.strictEqual(r.object, 'response');
  assert.ok(r.id.startsWith('resp_'), r.id);
  assert.strictEqual(r.status, 'incomplete');
  assert.strictEqual(r.incomplete_details.reason, 'max_output_tokens');
  assert.strictEqual(r.output[0].type, 'message');
  assert.strictEqual(r.output_text, r.output[0].content[0].text);
  assert.strictEqual(r.usage.output_tokens, 8);
  assert.strictEqual(r.usage.total_tokens, r.usage.input_tokens + 8);

  // Streaming through the SDK's helper: documented order, deltas add up to the greedy text.
  const stream = client.responses.stream(base);
  const events = [];
  let deltas = '';
  for await (const e of stream) {
    events.push(e);
    if (e.type === 'response.output_text.delta') deltas += e.delta;
  }
  checkOrder(events);
  const final = await stream.finalResponse();
  assert.strictEqual(deltas, r.output_text);
  assert.strictEqual(final.output_text, r.output_text);
  assert.strictEqual(final.status, 'incomplete');

  // A tool round trip: the call, its output fed back with the response's own output items.
  const question = [{ role: 'user', content: 'Weather in Paris?' }];
  const call = await client.responses.create({ model, input: question, tools, tool_choice: 'required',
    parallel_tool_calls: false, max_output_tokens: 200, temperature: 0, store: true });
  assert.strictEqual(call.status, 'completed');
  const fc = call.output.find((o) => o.type === 'function_call');
  assert.ok(fc, JSON.stringify(call.output));
  assert.strictEqual(fc.name, 'get_weather');
  const args = JSON.parse(fc.arguments);
  assert.deepStrictEqual(Object.keys(args).sort(), ['city', 'unit']);
  assert.ok([...args.city].length <= 8 && ['c', 'f'].includes(args.unit), fc.arguments);
  const result = { type: 'function_call_output', call_id: fc.call_id, output: '21 C and sunny' };
  const follow = await client.responses.create({ model, tools, max_output_tokens: 6, temperature: 0,
    ignore_eos: true, input: [...question, ...call.output, result] });
  assert.strictEqual(follow.object, 'response');
  assert.strictEqual(typeof follow.output_text, 'string');
  // The same turn through previous_response_id: the server keeps the conversation.
  const chained = await client.responses.create({ model, tools, max_output_tokens: 6, temperature: 0,
    ignore_eos: true, previous_response_id: call.id, input: [result] });
  assert.strictEqual(chained.previous_response_id, call.id);
  assert.strictEqual(chained.usage.input_tokens, follow.usage.input_tokens);
  assert.strictEqual(chained.output_text, follow.output_text);

  // The call streamed: argument deltas, then the SDK's final response holds the same call.
  const cs = client.responses.stream({ model, input: question, tools, tool_choice: 'required',
    parallel_tool_calls: false, max_output_tokens: 200, temperature: 0 });
  const callEvents = [];
  let argDeltas = '';
  for await (const e of cs) {
    callEvents.push(e);
    if (e.type === 'response.function_call_arguments.delta') argDeltas += e.delta;
  }
  checkOrder(callEvents);
  const cfinal = await cs.finalResponse();
  const sfc = cfinal.output.find((o) => o.type === 'function_call');
  assert.deepStrictEqual(JSON.parse(argDeltas), JSON.parse(fc.arguments));
  assert.strictEqual(sfc.arguments, fc.arguments);

  // Stored responses: retrieve, delete, then gone.
  const got = await client.responses.retrieve(call.id);
  assert.deepStrictEqual(got.output, call.output);
  await client.responses.delete(call.id);
  try {
    await client.responses.retrieve(call.id);
    assert.fail('expected a 404');
  } catch (e) {
    assert.strictEqual(e.status, 404, String(e));
  }

  // text.format json_schema: the answer is a document of the schema.
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 1, maximum: 5 } },
    required: ['ok', 'n'], additionalProperties: false };
  let documents = 0;
  for (const seed of [1, 2, 3]) {
    const j = await client.responses.create({ model, input: 'Answer in JSON', max_output_tokens: 100, seed,
      text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } } });
    if (j.status !== 'completed') continue;
    const doc = JSON.parse(j.output_text);
    assert.deepStrictEqual(Object.keys(doc).sort(), ['n', 'ok']);
    assert.ok(typeof doc.ok === 'boolean' && Number.isInteger(doc.n) && doc.n >= 1 && doc.n <= 5, j.output_text);
    documents++;
  }
  assert.ok(documents >= 1, 'no json_schema answer completed');

  // An unsupported field is a 400 naming it.
  try {
    await client.responses.create({ model, input: 'hi', tools: [{ type: 'web_search' }] });
    assert.fail('expected a 400');
  } catch (e) {
    assert.strictEqual(e.status, 400, String(e));
    assert.ok(String(e.message).includes('web_search'), e.message);
  }
  console.log('OPENAI_RESPONSES_CLIENT_OK');
}

main().catch((e) => { console.error(e); process.exit(1); });
