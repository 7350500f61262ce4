// loom's web chat page. Talks to the server it came from: /v1/models for the model's name and
// context length, /v1/chat/completions with stream: true for replies (SSE). Conversations
// and settings live in the browser's localStorage. Libraries: marked (markdown), DOMPurify
// (sanitises the model's markdown before it becomes HTML), highlight.js (code blocks).
'use strict';

const STORE_KEY = 'loom.conversations';
const SETTINGS_KEY = 'loom.settings';
const $ = (id) => document.getElementById(id);

const state = {
  conversations: [],  // [{id, title, created, updated, messages: [...], usage}]
  currentId: null,
  model: null,
  contextLength: 0,
  controller: null,  // AbortController of the generation in flight
  streaming: null,   // {conv, msg, el} while a reply streams
};

// ---------------------------------------------------------------- storage

function loadConversations() {
  try {
    const list = JSON.parse(localStorage.getItem(STORE_KEY) || '[]');
    state.conversations = Array.isArray(list) ? list : [];
  } catch {
    state.conversations = [];
  }
}

function saveConversations() {
  try {
    localStorage.setItem(STORE_KEY, JSON.stringify(state.conversations));
  } catch (e) {
    showError('Could not save the conversation: ' + e.message);
  }
}

const settingFields = {
  systemPrompt: 'system-prompt',
  temperature: 'temperature',
  topP: 'top-p',
  maxTokens: 'max-tokens',
  apiKey: 'api-key',
};

function loadSettings() {
  let s = {};
  try {
    s = JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}') || {};
  } catch {}
  for (const [key, id] of Object.entries(settingFields)) $(id).value = s[key] ?? '';
}

function saveSettings() {
  const s = {};
  for (const [key, id] of Object.entries(settingFields)) s[key] = $(id).value;
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(s));
}

// The sampling fields of a request; throws with a readable message on a bad value.
function samplingParams() {
  const out = {};
  const num = (id, name, field, lo, hi, integer) => {
    const raw = $(id).value.trim();
    if (raw === '') return;
    const v = Number(raw);
    if (!Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v)))
      throw new Error(`${name} must be ${integer ? 'an integer' : 'a number'} from ${lo} to ${hi}`);
    out[field] = v;
  };
  num('temperature', 'Temperature', 'temperature', 0, 2, false);
  num('top-p', 'Top p', 'top_p', 0, 1, false);
  num('max-tokens', 'Max tokens', 'max_tokens', 1, 1e9, true);
  return out;
}

function authHeaders() {
  const key = $('api-key').value.trim();
  return key ? {Authorization: 'Bearer ' + key} : {};
}

// ---------------------------------------------------------------- conversations

function currentConversation() {
  return state.conversations.find((c) => c.id === state.currentId) || null;
}

function newConversation(firstText) {
  const now = Date.now();
  const title = firstText.replace(/\s+/g, ' ').trim().slice(0, 60) || 'New chat';
  const conv = {
    id: now.toString(36) + Math.random().toString(36).slice(2, 8),
    title,
    created: now,
    updated: now,
    messages: [],
    usage: null,
  };
  state.conversations.unshift(conv);
  state.currentId = conv.id;
  return conv;
}

function selectConversation(id) {
  if (state.controller) return;  // one generation at a time; stop it first
  state.currentId = id;
  renderAll();
}

function deleteConversation(id) {
  if (state.controller && state.streaming && state.streaming.conv.id === id) return;
  state.conversations = state.conversations.filter((c) => c.id !== id);
  if (state.currentId === id) state.currentId = null;
  saveConversations();
  renderAll();
}

// ---------------------------------------------------------------- rendering

function renderMarkdown(text) {
  const html = DOMPurify.sanitize(marked.parse(text, {gfm: true, breaks: false}));
  const box = document.createElement('div');
  box.innerHTML = html;
  for (const code of box.querySelectorAll('pre code')) {
    hljs.highlightElement(code);
    const pre = code.parentElement;
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'copy';
    copy.textContent = 'Copy';
    copy.addEventListener('click', () => {
      navigator.clipboard?.writeText(code.textContent).then(() => {
        copy.textContent = 'Copied';
        setTimeout(() => (copy.textContent = 'Copy'), 1200);
      });
    });
    pre.appendChild(copy);
  }
  for (const a of box.querySelectorAll('a')) {
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
  }
  return box;
}

function renderConversationList() {
  const ul = $('conversations');
  ul.replaceChildren();
  const sorted = [...state.conversations].sort((a, b) => b.updated - a.updated);
  for (const c of sorted) {
    const li = document.createElement('li');
    li.className = 'conversation' + (c.id === state.currentId ? ' active' : '');
    li.dataset.id = c.id;
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'title';
    open.textContent = c.title;
    open.title = c.title;
    open.addEventListener('click', () => selectConversation(c.id));
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'delete';
    del.textContent = '×';
    del.title = 'Delete this conversation';
    del.setAttribute('aria-label', 'Delete ' + c.title);
    del.addEventListener('click', () => deleteConversation(c.id));
    li.append(open, del);
    ul.appendChild(li);
  }
}

// Fills (or refills) the element of one message.
function fillMessage(el, msg, live) {
  el.replaceChildren();
  el.className = 'message ' + msg.role + (live ? ' streaming' : '');
  if (msg.role === 'user') {
    const body = document.createElement('div');
    body.className = 'content';
    body.textContent = msg.content;
    el.appendChild(body);
    return;
  }
  if (msg.reasoning) {
    // Folded: reasoning is there to inspect, not to read by default.
    const details = document.createElement('details');
    details.className = 'reasoning';
    if (el.dataset.reasoningOpen === '1') details.open = true;
    details.addEventListener('toggle', () => (el.dataset.reasoningOpen = details.open ? '1' : ''));
    const summary = document.createElement('summary');
    const words = msg.reasoning.trim().split(/\s+/).filter(Boolean).length;
    summary.textContent =
        live && !msg.content ? 'Thinking…' : `Reasoning (${words} word${words === 1 ? '' : 's'})`;
    const body = document.createElement('div');
    body.className = 'reasoning-body';
    body.textContent = msg.reasoning;
    details.append(summary, body);
    el.appendChild(details);
  }
  const content = renderMarkdown(msg.content || '');
  content.className = 'content markdown';
  el.appendChild(content);
  if (live && !msg.content && !msg.reasoning) {
    const dots = document.createElement('div');
    dots.className = 'typing';
    dots.append(document.createElement('span'), document.createElement('span'),
                document.createElement('span'));
    el.appendChild(dots);
  }
  const notes = [];
  if (msg.stopped) notes.push('stopped');
  if (msg.finish === 'length') notes.push('cut at the token limit');
  if (notes.length || msg.error) {
    const note = document.createElement('div');
    note.className = 'note' + (msg.error ? ' error' : '');
    note.textContent = msg.error ? 'Error: ' + msg.error : notes.join(' · ');
    el.appendChild(note);
  }
}

function renderMessages() {
  const box = $('messages');
  box.replaceChildren();
  const conv = currentConversation();
  if (!conv || conv.messages.length === 0) {
    const empty = document.createElement('div');
    empty.className = 'empty';
    const h = document.createElement('h1');
    h.textContent = 'What can I help with?';
    const p = document.createElement('p');
    p.textContent = state.model ? 'You are talking to ' + state.model + '.' : '';
    empty.append(h, p);
    box.appendChild(empty);
    return;
  }
  for (const msg of conv.messages) {
    const el = document.createElement('div');
    const live = state.streaming && state.streaming.msg === msg;
    fillMessage(el, msg, live);
    if (live) state.streaming.el = el;
    box.appendChild(el);
  }
  box.scrollTop = box.scrollHeight;
}

function renderContext() {
  const conv = currentConversation();
  const used = conv && conv.usage ? conv.usage.total_tokens : 0;
  const max = state.contextLength;
  $('context-text').textContent =
      max ? `context ${used.toLocaleString('en-US')} / ${max.toLocaleString('en-US')}` : 'context –';
  const frac = max ? Math.min(1, used / max) : 0;
  $('context-fill').style.width = (frac * 100).toFixed(1) + '%';
  $('context').classList.toggle('full', frac > 0.9);
}

function renderAll() {
  renderConversationList();
  renderMessages();
  renderContext();
}

function setBusy(busy) {
  $('send').hidden = busy;
  $('stop').hidden = !busy;
  $('new-chat').disabled = busy;
}

function showError(text) {
  const el = $('error');
  el.textContent = text;
  el.hidden = !text;
}

// ---------------------------------------------------------------- streaming

let renderQueued = false;
function scheduleStreamRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    const s = state.streaming;
    if (!s || !s.el) return;
    const box = $('messages');
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    fillMessage(s.el, s.msg, true);
    if (atBottom) box.scrollTop = box.scrollHeight;
  });
}

// One SSE event of /v1/chat/completions.
function handleEvent(text, conv, msg) {
  for (const line of text.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '[DONE]') continue;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new Error(chunk.error.message || 'the server reported an error');
    const choice = chunk.choices && chunk.choices[0];
    if (choice) {
      const d = choice.delta || {};
      if (d.reasoning_content) msg.reasoning = (msg.reasoning || '') + d.reasoning_content;
      if (d.content) msg.content += d.content;
      if (choice.finish_reason) msg.finish = choice.finish_reason;
    }
    if (chunk.usage) {
      conv.usage = chunk.usage;
      renderContext();
    }
  }
  scheduleStreamRender();
}

function apiMessages(conv) {
  const out = [];
  const system = $('system-prompt').value;
  if (system.trim()) out.push({role: 'system', content: system});
  for (const m of conv.messages) {
    if (m.role === 'assistant' && !m.content) continue;  // failed or reasoning-only turns
    out.push({role: m.role, content: m.content});
  }
  return out;
}

async function sendMessage(text) {
  showError('');
  let params;
  try {
    params = samplingParams();
  } catch (e) {
    showError(e.message);
    return false;
  }
  const conv = currentConversation() || newConversation(text);
  conv.messages.push({role: 'user', content: text});
  const request = {
    model: state.model || undefined,
    messages: apiMessages(conv),
    stream: true,
    stream_options: {include_usage: true},
    ...params,
  };
  const msg = {role: 'assistant', content: '', reasoning: ''};
  conv.messages.push(msg);
  conv.updated = Date.now();
  saveConversations();
  state.controller = new AbortController();
  state.streaming = {conv, msg, el: null};
  setBusy(true);
  renderAll();

  let lastSave = Date.now();
  try {
    const res = await fetch('/v1/chat/completions', {
      method: 'POST',
      headers: {'Content-Type': 'application/json', ...authHeaders()},
      body: JSON.stringify(request),
      signal: state.controller.signal,
    });
    if (!res.ok) {
      const body = await res.json().catch(() => null);
      throw new Error((body && body.error && body.error.message) || `HTTP ${res.status}`);
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += decoder.decode(value, {stream: true}).replace(/\r\n/g, '\n');
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        handleEvent(buf.slice(0, end), conv, msg);
        buf = buf.slice(end + 2);
      }
      if (Date.now() - lastSave > 1000) {
        saveConversations();
        lastSave = Date.now();
      }
    }
    if (buf.trim()) handleEvent(buf, conv, msg);
  } catch (e) {
    if (e.name === 'AbortError') {
      msg.stopped = true;
    } else {
      msg.error = e.message;
    }
  } finally {
    state.controller = null;
    state.streaming = null;
    conv.updated = Date.now();
    saveConversations();
    setBusy(false);
    renderAll();
  }
  return true;
}

function stopGeneration() {
  if (state.controller) state.controller.abort();
}

// ---------------------------------------------------------------- model

async function loadModel() {
  try {
    const res = await fetch('/v1/models', {headers: authHeaders()});
    if (res.status === 401) throw new Error('the server wants an API key: set it in Settings');
    if (!res.ok) throw new Error(`/v1/models answered HTTP ${res.status}`);
    const body = await res.json();
    const m = body.data && body.data[0];
    if (!m) throw new Error('the server lists no model');
    state.model = m.id;
    state.contextLength = m.max_model_len || 0;
    $('model-name').textContent = m.id;
    $('model-name').title = m.root || m.id;
    $('status-dot').className = 'dot ok';
    showError('');
  } catch (e) {
    $('model-name').textContent = 'no model';
    $('status-dot').className = 'dot bad';
    showError('Could not read the model: ' + e.message);
  }
  renderAll();
}

// ---------------------------------------------------------------- wiring

function autoGrow() {
  const t = $('input');
  t.style.height = 'auto';
  t.style.height = Math.min(t.scrollHeight, 240) + 'px';
}

function submit() {
  const text = $('input').value;
  if (!text.trim() || state.controller) return;
  $('input').value = '';
  autoGrow();
  sendMessage(text);
}

function init() {
  marked.use({gfm: true});
  loadSettings();
  loadConversations();
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    submit();
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit();
    }
  });
  $('input').addEventListener('input', autoGrow);
  $('stop').addEventListener('click', stopGeneration);
  $('new-chat').addEventListener('click', () => {
    state.currentId = null;
    renderAll();
    $('input').focus();
  });
  $('toggle-settings').addEventListener('click', () => {
    const panel = $('settings');
    panel.hidden = !panel.hidden;
    $('toggle-settings').setAttribute('aria-expanded', String(!panel.hidden));
  });
  for (const id of Object.values(settingFields)) $(id).addEventListener('input', saveSettings);
  $('api-key').addEventListener('change', loadModel);
  // Another tab changed the stored conversations.
  window.addEventListener('storage', (e) => {
    if (e.key === STORE_KEY && !state.controller) {
      loadConversations();
      renderAll();
    }
  });
  renderAll();
  loadModel();
  $('input').focus();
}

init();
