// folio's chat page. Plain JavaScript, no library: every piece of model or
// server text reaches the page through textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const STORE = "folio.chats";   // {current, chats: {id: {title, messages}}}
const KEY = "folio.apiKey";

let state = loadState();
let streaming = null;          // the AbortController of the reply in flight
let modelName = null;

// ------------------------------------------------------------ storage

function loadState() {
  try {
    const s = JSON.parse(localStorage.getItem(STORE));
    if (s && s.chats && s.chats[s.current]) return s;
  } catch (e) { /* a damaged store starts over */ }
  const id = String(Date.now());
  return { current: id, chats: { [id]: { title: "", messages: [] } } };
}

function save() { localStorage.setItem(STORE, JSON.stringify(state)); }
function chat() { return state.chats[state.current]; }

// ------------------------------------------------------------ the API

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = localStorage.getItem(KEY);
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

function showError(message) {
  const e = $("error");
  e.textContent = message || "";
  e.hidden = !message;
}

// A refused call: the key dialog on 401, else the server's message.
async function refused(response) {
  let message = "HTTP " + response.status;
  try { message = (await response.json()).error.message || message; } catch (e) { /* no JSON */ }
  if (response.status === 401) $("api-key-dialog").hidden = false;
  showError(message);
}

async function fetchModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    if (!r.ok) return refused(r);
    const body = await r.json();
    modelName = body.data[0].id;
  } catch (e) {
    showError("The server cannot be reached.");
  }
}

// ------------------------------------------------------------ rendering

// A safe Markdown subset: ``` fenced code, `inline code`, **bold**,
// paragraphs. Everything is text nodes.
function renderMarkdown(el, text) {
  el.replaceChildren();
  const parts = text.split(/```/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      code.textContent = part.replace(/^[^\n]*\n/, "");  // drop the language line
      pre.append(code);
      el.append(pre);
      return;
    }
    for (const para of part.split(/\n{2,}/)) {
      if (!para) continue;
      const p = document.createElement("p");
      for (const [j, piece] of para.split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/).entries()) {
        if (j % 2 === 1 && piece.startsWith("`")) {
          const code = document.createElement("code");
          code.textContent = piece.slice(1, -1);
          p.append(code);
        } else if (j % 2 === 1) {
          const b = document.createElement("strong");
          b.textContent = piece.slice(2, -2);
          p.append(b);
        } else {
          p.append(document.createTextNode(piece));
        }
      }
      el.append(p);
    }
  });
}

function button(label, cls, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = label;
  b.addEventListener("click", onClick);
  return b;
}

// One message's element; assistant messages keep their raw text in
// data-raw and, once done, data-done and data-finish.
function messageElement(m, index, last) {
  const div = document.createElement("div");
  div.className = "msg " + m.role;
  if (m.reasoning) {
    const d = document.createElement("details");
    d.className = "reasoning";
    const s = document.createElement("summary");
    s.textContent = "Reasoning";
    const body = document.createElement("div");
    body.textContent = m.reasoning;
    d.append(s, body);
    div.append(d);
  }
  const content = document.createElement("div");
  content.className = "content";
  if (m.role === "assistant") {
    renderMarkdown(content, m.content);
    div.dataset.raw = m.content;
    if (m.finish) {
      div.dataset.done = "1";
      div.dataset.finish = m.finish;
    }
  } else {
    content.textContent = m.content;
  }
  div.append(content);
  if (m.stats) {
    const st = document.createElement("div");
    st.className = "stats";
    st.textContent = m.stats;
    div.append(st);
  }
  const tools = document.createElement("div");
  tools.className = "tools";
  tools.append(button("Copy", "copy", () => {
    navigator.clipboard.writeText(m.content).catch(() => {});
  }));
  if (last && m.role === "user") tools.append(button("Edit", "edit", () => editLast(index)));
  if (last && m.role === "assistant") tools.append(button("Regenerate", "regenerate", regenerate));
  div.append(tools);
  return div;
}

// The saved conversations, newest first, in the header's list.
function renderChats() {
  const list = $("chats");
  const ids = Object.keys(state.chats).sort().reverse();
  list.replaceChildren(...ids.map((id) => {
    const o = document.createElement("option");
    o.value = id;
    o.textContent = state.chats[id].title || "New chat";
    o.selected = id === state.current;
    return o;
  }));
}

function render() {
  renderChats();
  const box = $("messages");
  const msgs = chat().messages;
  const lastUser = msgs.map((m) => m.role).lastIndexOf("user");
  const lastAssistant = msgs.map((m) => m.role).lastIndexOf("assistant");
  box.replaceChildren(...msgs.map((m, i) =>
    messageElement(m, i, i === (m.role === "user" ? lastUser : lastAssistant))));
  box.scrollTop = box.scrollHeight;
}

// ------------------------------------------------------------ a reply

function number(id, integer) {
  const v = $(id).value.trim();
  if (v === "") return undefined;
  const n = integer ? parseInt(v, 10) : parseFloat(v);
  return Number.isFinite(n) ? n : undefined;
}

function requestBody() {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  for (const m of chat().messages) {
    if (m.role === "assistant" && !m.finish) continue;  // the one being written
    messages.push({ role: m.role, content: m.content });
  }
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  if (modelName) body.model = modelName;
  const fields = [["temperature", "temperature", false], ["top_p", "top-p", false],
                  ["top_k", "top-k", true], ["min_p", "min-p", false],
                  ["max_tokens", "max-tokens", true], ["seed", "seed", true]];
  for (const [name, id, integer] of fields) {
    const v = number(id, integer);
    if (v !== undefined) body[name] = v;
  }
  return body;
}

async function reply() {
  const c = chat();  // the reply belongs to this chat, even if another is opened meanwhile
  const msgs = c.messages;
  const m = { role: "assistant", content: "", reasoning: "" };
  msgs.push(m);
  render();
  const div = $("messages").lastElementChild;
  const controller = new AbortController();
  streaming = controller;
  $("stop").disabled = false;
  $("send").disabled = true;
  showError("");
  const start = performance.now();
  let first = null, usage = null, finish = null;
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(requestBody()),
      signal: controller.signal });
    if (!r.ok) {
      finish = "error";
      await refused(r);
    } else {
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let pending = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        pending += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = pending.indexOf("\n\n")) >= 0) {
          const event = pending.slice(0, cut);
          pending = pending.slice(cut + 2);
          if (!event.startsWith("data: ")) continue;
          const data = event.slice(6);
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) {
            finish = "error";
            showError(chunk.error.message);
            continue;
          }
          if (chunk.usage) usage = chunk.usage;
          for (const c of chunk.choices || []) {
            const d = c.delta || {};
            if (d.content || d.reasoning_content) first = first || performance.now();
            if (d.content) m.content += d.content;
            if (d.reasoning_content) m.reasoning += d.reasoning_content;
            if (c.finish_reason) finish = c.finish_reason;
          }
          div.dataset.raw = m.content;
          renderMarkdown(div.querySelector(".content"), m.content);
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") {
      finish = "aborted";
    } else {
      finish = "error";
      showError("The server cannot be reached: " + e.message);
    }
  }
  const end = performance.now();
  m.finish = finish || "stop";
  if (usage) {
    const rate = first && end > first ? (usage.completion_tokens / ((end - first) / 1000)) : 0;
    const details = usage.prompt_tokens_details;
    const cached = details && details.cached_tokens ? ` (${details.cached_tokens} cached)` : "";
    m.stats = `${usage.prompt_tokens} prompt${cached} + ${usage.completion_tokens} generated` +
      (first ? ` · first token ${((first - start) / 1000).toFixed(2)} s` : "") +
      (rate ? ` · ${rate.toFixed(1)} tok/s` : "");
  } else if (first) {
    m.stats = `prompt sent · first token ${((first - start) / 1000).toFixed(2)} s`;
  }
  streaming = null;
  $("stop").disabled = true;
  $("send").disabled = false;
  if (!c.title) c.title = (msgs[0] && msgs[0].content.slice(0, 40)) || "";
  save();
  render();
}

function send() {
  const text = $("prompt").value;
  if (!text.trim() || streaming) return;
  $("prompt").value = "";
  chat().messages.push({ role: "user", content: text });
  save();
  reply();
}

function stop() { if (streaming) streaming.abort(); }

function regenerate() {
  if (streaming) return;
  const msgs = chat().messages;
  if (msgs.length && msgs[msgs.length - 1].role === "assistant") msgs.pop();
  save();
  reply();
}

function editLast(index) {
  if (streaming) return;
  const msgs = chat().messages;
  $("prompt").value = msgs[index].content;
  msgs.splice(index);
  save();
  render();
  $("prompt").focus();
}

function newChat() {
  if (streaming) stop();
  if (!chat().messages.length) return;  // already a new one
  let id = String(Date.now());
  while (state.chats[id]) id = String(Number(id) + 1);
  state.chats[id] = { title: "", messages: [] };
  state.current = id;
  const ids = Object.keys(state.chats).sort();
  for (const old of ids.slice(0, Math.max(0, ids.length - 20))) delete state.chats[old];
  save();
  render();
}

// ------------------------------------------------------------ live panel

function metric(text, name) {
  const m = text.match(new RegExp("^" + name + " ([0-9.eE+-]+)$", "m"));
  return m ? Number(m[1]) : null;
}

async function poll() {
  try {
    const r = await fetch("/metrics", { headers: headers() });
    if (r.status === 401) {
      $("status").textContent = "API key needed";
      $("api-key-dialog").hidden = false;
    } else if (!r.ok) {
      $("status").textContent = "server answered " + r.status;
    } else {
      const t = await r.text();
      const hit = metric(t, "folio_prefix_cache_hit_rate");
      $("status").textContent =
        `${modelName || "model"} · running ${metric(t, "folio_requests_running")}` +
        ` · waiting ${metric(t, "folio_requests_waiting")}` +
        ` · KV pages ${metric(t, "folio_kv_pages_used")} of ${metric(t, "folio_kv_pages_total")}` +
        (hit === null ? "" : ` · prefix cache ${(100 * hit).toFixed(0)}% hits`);
      if (!modelName) fetchModel();
    }
  } catch (e) {
    $("status").textContent = "the server is unreachable; retrying…";
  }
}

// ------------------------------------------------------------ start

function start() {
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") stop(); });
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", newChat);
  $("chats").addEventListener("change", () => {
    if (streaming) stop();
    state.current = $("chats").value;
    save();
    render();
  });
  $("api-key-save").addEventListener("click", () => {
    localStorage.setItem(KEY, $("api-key").value);
    $("api-key-dialog").hidden = true;
    showError("");
    fetchModel();
    poll();
  });
  // A reply cut off by a reload is kept as it was.
  for (const m of chat().messages) if (m.role === "assistant" && !m.finish) m.finish = "aborted";
  render();
  fetchModel().finally(() => { document.body.dataset.ready = "1"; });
  poll();
  setInterval(poll, 2000);
}

start();
