// The web chat page in a real headless Chromium (Debian's), driven with playwright-core.
// Usage: node webui_browser.js PORT CHROMIUM_PATH SCREENSHOT_PATH
// The server (webui_browser_test.cpp) serves a random-weight model named "webui-test" with a
// 4096-token context and a chat template that opens a <think> block when the system prompt is
// "Think first." (so its replies are reasoning). Prints WEBUI_BROWSER_OK when every check holds.
'use strict';
const {chromium} = require('playwright-core');

const [port, chromiumPath, screenshotPath] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}

// vllm:request_success_total{finished_reason="abort",...} from /metrics.
async function abortedRequests() {
  const text = await (await fetch(base + '/metrics')).text();
  const m = text.match(/^vllm:request_success_total\{finished_reason="abort"[^}]*\} (\S+)$/m);
  check(m, 'the abort counter is in /metrics');
  return Number(m[1]);
}

async function waitFor(what, fn, timeoutMs = 8000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 25));
  }
}

// The deltas of a /v1/chat/completions SSE body, folded.
function foldStream(body) {
  const out = {content: '', reasoning: '', usage: null, finish: null, chunks: 0};
  for (const event of body.split('\n\n')) {
    const line = event.trim();
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '[DONE]') continue;
    const j = JSON.parse(data);
    out.chunks++;
    if (j.usage) out.usage = j.usage;
    const c = j.choices && j.choices[0];
    if (!c) continue;
    out.content += c.delta.content || '';
    out.reasoning += c.delta.reasoning_content || '';
    if (c.finish_reason) out.finish = c.finish_reason;
  }
  return out;
}

const kAssistant = '#messages .message.assistant';

// A copy of every /v1/chat/completions response body as the page received it (a tee of the
// stream: the DevTools protocol's copy of a streamed body is not decoded as UTF-8).
function recordStreams() {
  const fetch0 = window.fetch;
  window.recordedStreams = [];
  window.fetch = async (...args) => {
    const res = await fetch0(...args);
    if (!String(args[0]).endsWith('/v1/chat/completions') || !res.body) return res;
    const [mine, theirs] = res.body.tee();
    const rec = {status: res.status, text: '', done: false};
    window.recordedStreams.push(rec);
    (async () => {
      const reader = theirs.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        rec.text += decoder.decode(value, {stream: true});
      }
    })().catch(() => {}).finally(() => (rec.done = true));
    return new Response(mine, {status: res.status, statusText: res.statusText, headers: res.headers});
  };
}

async function sendAndFinish(page, text) {
  const requestP = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
  const request = (await requestP).postDataJSON();
  await page.waitForSelector('#send', {state: 'visible'});
  await page.waitForFunction(() => window.recordedStreams.at(-1).done);
  const rec = await page.evaluate(() => window.recordedStreams.at(-1));
  check(rec.status === 200, 'chat completion answered 200');
  return {request, streamed: foldStream(rec.text)};
}

function storedConversations(page) {
  return page.evaluate(() => JSON.parse(localStorage.getItem('loom.conversations') || '[]'));
}

const t0 = Date.now();
const laps = [];
const lap = (name) => laps.push(`${name} ${Date.now() - t0} ms`);

(async () => {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const context = await browser.newContext({viewport: {width: 1280, height: 800}, colorScheme: 'light'});
    await context.addInitScript(recordStreams);
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('console', (m) => m.type() === 'error' && problems.push('console error: ' + m.text() + ' at ' + JSON.stringify(m.location())));
    page.on('request', (r) => {
      if (!r.url().startsWith(base + '/') && !r.url().startsWith('data:'))
        problems.push('request to another origin: ' + r.url());
    });

    await page.goto(base + '/');
    await page.waitForFunction(() => document.getElementById('model-name').textContent === 'webui-test');
    check((await page.textContent('#context-text')) === 'context 0 / 4,096', 'context shown empty');

    // Sampling settings: greedy for the long reply (a random model's greedy text is the same on
    // every run), top_p 0.9, no max_tokens (the server's default: the rest of the context).
    await page.click('#toggle-settings');
    await page.fill('#temperature', '0');
    await page.fill('#top-p', '0.9');

    lap('loaded');
    // ---- 1. A long reply streams; Stop ends it, and the server aborts the request.
    const abortsBefore = await abortedRequests();
    const requestP = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    await page.fill('#input', 'Tell me a long story');
    await page.press('#input', 'Enter');
    const req1 = (await requestP).postDataJSON();
    check(req1.stream === true && req1.stream_options && req1.stream_options.include_usage === true,
          'streams with usage: ' + JSON.stringify(req1));
    check(req1.model === 'webui-test' && req1.temperature === 0 && req1.top_p === 0.9 &&
              !('max_tokens' in req1),
          'sampling settings sent: ' + JSON.stringify(req1));
    check(JSON.stringify(req1.messages) === JSON.stringify([{role: 'user', content: 'Tell me a long story'}]),
          'messages: ' + JSON.stringify(req1.messages));
    const liveText = () => page.evaluate(
        (sel) => (document.querySelector(sel + '.streaming') || {textContent: ''}).textContent.length, kAssistant);
    await waitFor('the first tokens', async () => (await liveText()) > 0);
    const seen = [await liveText()];
    // Tokens stream: the reply is seen growing at least three times while Stop is offered.
    await waitFor('the reply to grow', async () => {
      const n = await liveText();
      if (n > seen[seen.length - 1]) seen.push(n);
      return seen.length >= 3;
    });
    check(await page.isVisible('#stop') && !(await page.isVisible('#send')), 'Stop replaces Send while streaming');
    await page.click('#stop');
    await page.waitForSelector('#send', {state: 'visible'});
    check((await page.textContent(kAssistant + ' .note')).includes('stopped'), 'the reply is marked stopped');
    await waitFor('the server to abort the request', async () => (await abortedRequests()) === abortsBefore + 1);
    let convs = await storedConversations(page);
    check(convs.length === 1 && convs[0].title === 'Tell me a long story', 'conversation stored');
    const stoppedReply = convs[0].messages[1];
    check(stoppedReply.stopped === true && stoppedReply.content.length > 0, 'partial reply stored');

    lap('stopped');
    // ---- 2. A second turn with max_tokens: the final usage chunk becomes the context figure.
    await page.fill('#temperature', '0.7');
    await page.fill('#max-tokens', '12');
    const turn2 = await sendAndFinish(page, 'And then?');
    check(turn2.request.temperature === 0.7 && turn2.request.max_tokens === 12, 'new settings sent');
    check(turn2.request.messages.length === 3 && turn2.request.messages[1].role === 'assistant' &&
              turn2.request.messages[1].content === stoppedReply.content,
          'the stopped reply is part of the history');
    const usage = turn2.streamed.usage;
    check(usage && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens &&
              usage.completion_tokens <= 12 && usage.completion_tokens > 0,
          'usage chunk: ' + JSON.stringify(usage));
    const shown = await page.textContent('#context-text');
    check(shown === `context ${usage.total_tokens.toLocaleString('en-US')} / 4,096`, 'context shown: ' + shown);
    convs = await storedConversations(page);
    const reply2 = convs[0].messages[3];
    check(reply2.content === turn2.streamed.content, 'stored reply equals the streamed deltas: ' + JSON.stringify([reply2, turn2.streamed]));
    if (turn2.streamed.finish === 'length')
      check((await page.textContent(`${kAssistant}:last-child .note`)).includes('token limit'), 'length noted');

    lap('usage');
    // ---- 3. Reasoning: shown folded, its text exactly the reasoning deltas.
    await page.click('#new-chat');
    await page.fill('#system-prompt', 'Think first.');
    await page.fill('#max-tokens', '24');
    const turn3 = await sendAndFinish(page, 'Why is the sky blue?');
    check(turn3.request.messages[0].role === 'system' && turn3.request.messages[0].content === 'Think first.',
          'system prompt sent');
    check(turn3.streamed.reasoning.length > 0, 'the server streamed reasoning_content');
    const details = page.locator(kAssistant + ' details.reasoning');
    check((await details.count()) === 1, 'one reasoning block');
    check(!(await details.evaluate((d) => d.open)), 'reasoning is folded');
    check((await details.locator('.reasoning-body').evaluate((e) => e.textContent)) === turn3.streamed.reasoning,
          'reasoning text equals the deltas');
    check((await details.locator('summary').textContent()).startsWith('Reasoning ('), 'reasoning summary');

    lap('reasoning');
    // ---- 4. Markdown, code highlighting and sanitising, on a stored conversation.
    await page.evaluate(() => {
      const list = JSON.parse(localStorage.getItem('loom.conversations'));
      const t = Date.now() + 1000;
      list.push({
        id: 'example', title: 'Reverse a linked list in C++', created: t, updated: t,
        usage: {prompt_tokens: 31, completion_tokens: 187, total_tokens: 218},
        messages: [
          {role: 'user', content: 'How do I reverse a singly linked list in C++?'},
          {role: 'assistant',
           reasoning: 'Iterative is simplest: walk the list once, pointing each node back at its predecessor. O(n) time, O(1) space.',
           content: 'Walk the list once and turn each `next` pointer around:\n\n' +
               '```cpp\nNode* reverse(Node* head) {\n  Node* prev = nullptr;\n  while (head) {\n' +
               '    Node* next = head->next;  // keep the rest\n    head->next = prev;\n' +
               '    prev = head;\n    head = next;\n  }\n  return prev;\n}\n```\n\n' +
               '- **Time:** O(n), one pass\n- **Space:** O(1), three pointers'},
        ],
      });
      list.push({
        id: 'hostile', title: 'Sanitiser check', created: t - 10, updated: t - 10, usage: null,
        messages: [
          {role: 'user', content: 'Say something hostile'},
          {role: 'assistant',
           content: 'Text <img src="x" onerror="window.pwned = 1"> and <script>window.pwned = 2</script>' +
               '[link](javascript:window.pwned=3)'},
        ],
      });
      localStorage.setItem('loom.conversations', JSON.stringify(list));
    });

    // ---- 5. Reload: the conversations are listed from localStorage and open again.
    await page.reload();
    await page.waitForFunction(() => document.getElementById('model-name').textContent === 'webui-test');
    const titles = await page.$$eval('#conversations .conversation .title', (b) => b.map((x) => x.textContent));
    for (const t of ['Tell me a long story', 'Why is the sky blue?', 'Reverse a linked list in C++'])
      check(titles.includes(t), 'listed after reload: ' + t + ' in ' + JSON.stringify(titles));
    check((await page.inputValue('#temperature')) === '0.7' && (await page.inputValue('#system-prompt')) === 'Think first.',
          'settings kept');
    await page.click('#conversations .conversation .title >> text=Tell me a long story');
    const texts = await page.$$eval('#messages .message', (m) => m.map((x) => x.className + ':' + x.textContent));
    check(texts.length === 4 && texts[0] === 'message user:Tell me a long story' && texts[2] === 'message user:And then?',
          'conversation restored: ' + JSON.stringify(texts).slice(0, 300));
    check((await page.textContent('#messages .message.assistant .note')).includes('stopped'), 'stopped mark kept');
    check((await page.textContent('#context-text')) === shown, 'its context figure restored');

    await page.click('#conversations .conversation .title >> text=Sanitiser check');
    const hostile = page.locator(kAssistant + ' .content');
    check((await hostile.locator('img').count()) === 1, 'the image tag is kept');
    check((await hostile.locator('[onerror], script').count()) === 0, 'handlers and scripts removed');
    const hrefs = await hostile.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href') || ''));
    check(hrefs.every((h) => !h.toLowerCase().startsWith('javascript:')), 'javascript: links removed: ' + hrefs);
    check(!(await page.evaluate(() => window.pwned)), 'no injected script ran');

    await page.click('#conversations .conversation .title >> text=Reverse a linked list in C++');
    const code = page.locator(kAssistant + ' pre code.hljs');
    check((await code.count()) === 1, 'one highlighted code block');
    check((await code.getAttribute('class')).includes('language-cpp'), 'language from the fence');
    check((await code.locator('span.hljs-keyword').count()) > 0, 'keywords highlighted');
    check((await page.locator(kAssistant + ' strong').count()) === 2, 'bold rendered');
    check(!(await page.locator(kAssistant + ' details.reasoning').evaluate((d) => d.open)), 'stored reasoning folded');
    check((await page.textContent('#context-text')) === 'context 218 / 4,096', 'example context');

    lap('reloaded');
    await page.click('#toggle-settings');
    await page.fill('#system-prompt', 'You are a concise C++ expert.');
    await page.fill('#max-tokens', '1024');
    await page.locator('#max-tokens').blur();
    await page.screenshot({path: screenshotPath});

    // Expected console errors, both from the hostile image tag: its src "x" is a 404, and
    // DOMPurify parsing it (in an inert document that inherits the page's CSP) makes Chromium
    // report the blocked handler.
    const unexpected = problems.filter(
        (p) => !(p.includes('404') && p.includes('/x"')) &&
            !(p.includes('inline event handler') && p.includes('/webui/lib/purify.min.js')));
    check(unexpected.length === 0, 'no page errors: ' + JSON.stringify(unexpected));
    lap('done');
    console.log(laps.join(', '));
    console.log(`streamed lengths seen: ${seen.join(', ')}; usage ${JSON.stringify(usage)}`);
    console.log('WEBUI_BROWSER_OK');
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
