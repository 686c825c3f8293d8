// folio's chat page. Plain JavaScript, no library, no build step. Model and
// server text reaches the page only through textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const STORE = "folio.chats";   // {current, chats: {id: {title, messages}}}
const KEY = "folio.apiKey";
const MAX_CHATS = 20;

let state = loadState();
let live = null;               // the reply being streamed: {controller, msg, div}
let modelName = null;

// ------------------------------------------------------------ storage

function loadState() {
  try {
    const s = JSON.parse(localStorage.getItem(STORE));
    if (s && s.chats && s.chats[s.current] && Array.isArray(s.chats[s.current].messages)) return s;
  } catch (e) { /* a damaged store starts over */ }
  const id = String(Date.now());
  return { current: id, chats: { [id]: { title: "", messages: [] } } };
}

function save() {
  try { localStorage.setItem(STORE, JSON.stringify(state)); } catch (e) { /* full: keep going */ }
}

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

function askForKey() {
  const d = $("api-key-dialog");
  if (!d.hidden) return;
  d.hidden = false;
  $("api-key").focus();
}

// A refused call (non-200): the key dialog on 401, and the server's message.
async function refused(response) {
  let message = "The server answered HTTP " + response.status;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (e) { /* not JSON */ }
  if (response.status === 401) askForKey();
  showError(message);
}

async function fetchModel() {
  try {
    const r = await get("/v1/models");
    if (!r.ok) return refused(r);
    const body = await r.json();
    if (body.data && body.data.length) modelName = body.data[0].id;
  } catch (e) {
    // Unreachable: the status panel says so and the poll retries.
  }
}

// ------------------------------------------------------------ rendering

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// `code` and **bold** inside one paragraph, as DOM nodes.
function appendInline(parent, text) {
  text.split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/).forEach((piece, i) => {
    if (i % 2 === 0) parent.append(document.createTextNode(piece));
    else if (piece[0] === "`") parent.append(el("code", "", piece.slice(1, -1)));
    else parent.append(el("strong", "", piece.slice(2, -2)));
  });
}

// A safe Markdown subset: ``` fenced code, `inline code`, **bold**,
// paragraphs (blank lines) and line breaks (kept by white-space: pre-wrap).
// Everything else stays plain text. An unclosed fence (still streaming)
// shows as code up to the end.
function renderMarkdown(target, text) {
  target.replaceChildren();
  const parts = text.split("```");
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const closed = i < parts.length - 1;
      const nl = part.indexOf("\n");
      // The fence's first line names the language: drop it.
      const body = nl >= 0 ? part.slice(nl + 1) : closed ? part : "";
      const pre = el("pre");
      pre.append(el("code", "", body.replace(/\n$/, "")));
      target.append(pre);
      return;
    }
    for (const para of part.split(/\n{2,}/)) {
      const t = para.replace(/^\n+|\n+$/g, "");
      if (!t.trim()) continue;
      const p = el("p");
      appendInline(p, t);
      target.append(p);
    }
  });
}

function copyText(text) {
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(text).catch(() => {});
    return;
  }
  // Plain http off localhost has no navigator.clipboard: the old way.
  const t = el("textarea");
  t.value = text;
  document.body.append(t);
  t.select();
  try { document.execCommand("copy"); } catch (e) { /* ignore */ }
  t.remove();
}

function button(label, cls, onClick) {
  const b = el("button", cls, label);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

// Shows a message's reasoning, raw text and rendered content; used both for
// a full render and for each streamed update.
function paint(div, m) {
  if (m.role === "assistant") div.dataset.raw = m.content;
  let r = div.querySelector(":scope > details.reasoning");
  if (m.reasoning && !r) {
    r = el("details", "reasoning");
    r.append(el("summary", "", "Reasoning"), el("div", "reasoning-text"));
    div.prepend(r);
  }
  if (r) r.lastChild.textContent = m.reasoning;
  const content = div.querySelector(":scope > .content");
  if (m.role === "assistant") renderMarkdown(content, m.content);
  else content.textContent = m.content;
}

// One message's element. Assistant messages keep their raw text in
// data-raw and, once done, data-done and data-finish.
function messageElement(m, index, last) {
  const div = el("div", "msg " + m.role);
  div.append(el("div", "content"));
  paint(div, m);
  if (m.finish) {
    div.dataset.done = "1";
    div.dataset.finish = m.finish;
  }
  if (m.stats) div.append(el("div", "stats", m.stats));
  const tools = el("div", "tools");
  const copy = button("Copy", "copy", () => {
    copyText(m.content);
    copy.textContent = "Copied";
    setTimeout(() => { copy.textContent = "Copy"; }, 1200);
  });
  copy.setAttribute("aria-label", "Copy this message");
  tools.append(copy);
  if (last && m.role === "user") tools.append(button("Edit", "edit", () => editLast(index)));
  if (last && m.role === "assistant") tools.append(button("Regenerate", "regenerate", regenerate));
  for (const b of tools.querySelectorAll(".edit, .regenerate")) b.disabled = !!live;
  div.append(tools);
  if (live && live.msg === m) live.div = div;
  return div;
}

// The saved conversations, newest first.
function renderChats() {
  const ids = Object.keys(state.chats).sort().reverse();
  $("chats").replaceChildren(...ids.map((id) => {
    const o = el("option", "", state.chats[id].title || "New chat");
    o.value = id;
    o.selected = id === state.current;
    return o;
  }));
}

// Whether the view follows the end of the conversation: it does unless the
// reader has scrolled up.
function following() {
  const box = $("messages");
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80 &&
    $("composer").getBoundingClientRect().top < window.innerHeight + 40;
}

function scrollDown() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
  $("composer").scrollIntoView({ block: "nearest" });  // phones scroll the page
}

function render() {
  renderChats();
  const msgs = chat().messages;
  const roles = msgs.map((m) => m.role);
  const lastUser = roles.lastIndexOf("user"), lastAssistant = roles.lastIndexOf("assistant");
  $("messages").replaceChildren(...msgs.map((m, i) =>
    messageElement(m, i, i === (m.role === "user" ? lastUser : lastAssistant))));
  scrollDown();
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
  const system = $("system").value;
  if (system.trim()) messages.push({ role: "system", content: system });
  for (const m of chat().messages) {
    if (m.role === "assistant" && !m.content) continue;  // a failed reply
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

// Yields each event's data ("data:" lines joined) from a Server-Sent Events
// body; reads may split the stream anywhere.
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    buf += decoder.decode(value || new Uint8Array(), { stream: !done });
    buf = buf.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0 || (done && buf.trim())) {
      const block = cut >= 0 ? buf.slice(0, cut) : buf;
      buf = cut >= 0 ? buf.slice(cut + 2) : "";
      const data = block.split("\n").filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(l[5] === " " ? 6 : 5)).join("\n");
      if (data) yield data;
    }
    if (done) return;
  }
}

const seconds = (ms) => (ms / 1000).toFixed(2) + " s";

// The stats line, e.g. "12 prompt + 34 generated · first token 0.12 s · 56.7 tok/s".
function statsText(t) {
  const parts = [];
  if (t.usage) {
    const u = t.usage, d = u.prompt_tokens_details;
    const cached = d && d.cached_tokens ? ` (${d.cached_tokens} cached)` : "";
    parts.push(`${u.prompt_tokens} prompt${cached} + ${u.completion_tokens} generated`);
  } else {
    parts.push({ aborted: "stopped", error: "failed" }[t.finish] || "done");
  }
  if (t.first !== null) parts.push("first token " + seconds(t.first - t.start));
  if (t.usage && t.first !== null && t.end > t.first && t.usage.completion_tokens) {
    parts.push((t.usage.completion_tokens / ((t.end - t.first) / 1000)).toFixed(1) + " tok/s");
  } else if (!t.usage) {
    parts.push("total " + seconds(t.end - t.start));
  }
  if (t.finish === "length") parts.push("cut at the token limit");
  if (t.seed) parts.push("seed " + t.seed);
  return parts.join(" · ");
}

async function reply() {
  const c = chat();  // the reply belongs to this chat, even if another is opened meanwhile
  const body = requestBody();
  const m = { role: "assistant", content: "", reasoning: "" };
  c.messages.push(m);
  live = { controller: new AbortController(), msg: m, div: null };
  $("stop").disabled = false;
  $("send").disabled = true;
  showError("");
  render();
  const t = { start: performance.now(), first: null, end: 0, usage: null, seed: null,
              finish: null };
  let failed = false, sawDone = false, lastSave = 0;
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(body),
      signal: live.controller.signal });
    t.seed = r.headers.get("X-Folio-Seed");
    if (!r.ok) {
      failed = true;
      await refused(r);
    } else {
      for await (const data of events(r)) {
        if (data === "[DONE]") { sawDone = true; continue; }
        let chunk;
        try { chunk = JSON.parse(data); } catch (e) { continue; }  // not ours to show
        if (chunk.error) {
          failed = true;
          showError(chunk.error.message || "The server reported an error.");
          continue;
        }
        if (chunk.usage) t.usage = chunk.usage;
        for (const ch of chunk.choices || []) {
          const d = ch.delta || {};
          if ((d.content || d.reasoning_content) && t.first === null) t.first = performance.now();
          if (d.content) m.content += d.content;
          if (d.reasoning_content) m.reasoning += d.reasoning_content;
          if (ch.finish_reason) t.finish = ch.finish_reason;
        }
        if (live.div) {
          const follow = following();
          paint(live.div, m);
          if (follow) scrollDown();
        }
        // Keep what has come so far in case the page is reloaded.
        if (performance.now() - lastSave > 1000) { save(); lastSave = performance.now(); }
      }
      if (!failed && !t.finish && !sawDone) {
        failed = true;
        showError("The reply was cut off: the connection to the server closed.");
      }
    }
  } catch (e) {
    if (e.name === "AbortError") t.finish = "aborted";
    else {
      failed = true;
      showError("The server cannot be reached (" + e.message + ").");
    }
  }
  t.end = performance.now();
  if (failed) t.finish = "error";
  m.finish = t.finish || "stop";
  m.stats = statsText(t);
  live = null;
  $("stop").disabled = true;
  $("send").disabled = false;
  if (!c.title) {
    const first = c.messages.find((x) => x.role === "user");
    c.title = first ? first.content.replace(/\s+/g, " ").trim().slice(0, 40) : "";
  }
  save();
  render();
}

function send() {
  const text = $("prompt").value;
  if (!text.trim() || live) return;
  $("prompt").value = "";
  chat().messages.push({ role: "user", content: text });
  save();
  reply();
}

function stop() { if (live) live.controller.abort(); }

function regenerate() {
  if (live) return;
  const msgs = chat().messages;
  if (msgs.length && msgs[msgs.length - 1].role === "assistant") msgs.pop();
  if (!msgs.length) return render();
  save();
  reply();
}

// Puts the last user message back into the prompt box, dropping it and the
// reply after it; Send resends the edited text.
function editLast(index) {
  if (live) return;
  const msgs = chat().messages;
  $("prompt").value = msgs[index].content;
  msgs.splice(index);
  save();
  render();
  $("prompt").focus();
}

function newChat() {
  stop();
  if (!chat().messages.length) return;  // already an empty one
  let id = String(Date.now());
  while (state.chats[id]) id = String(Number(id) + 1);
  state.chats[id] = { title: "", messages: [] };
  state.current = id;
  const ids = Object.keys(state.chats).sort();
  for (const old of ids.slice(0, Math.max(0, ids.length - MAX_CHATS))) delete state.chats[old];
  save();
  render();
  $("prompt").focus();
}

// ------------------------------------------------------------ live panel

// The value of an unlabelled Prometheus series, or "?".
function metric(text, name) {
  const m = text.match(new RegExp("^" + name + "\\s+(\\S+)", "m"));
  return m ? Number(m[1]) : "?";
}

// fetch with a time limit, so that a hung server reads as unreachable.
async function get(path) {
  const c = new AbortController();
  const timer = setTimeout(() => c.abort(), 5000);
  try {
    return await fetch(path, { headers: headers(), signal: c.signal, cache: "no-store" });
  } finally {
    clearTimeout(timer);
  }
}

async function poll() {
  const status = $("status");
  try {
    const h = await get("/health");
    const r = await get("/metrics");
    const model = modelName || "model";
    if (r.status === 401) {
      status.textContent = "API key needed";
      askForKey();
    } else if (!r.ok) {
      status.textContent = `${model} · metrics unavailable (HTTP ${r.status})`;
    } else {
      const m = await r.text();
      const hit = metric(m, "folio_prefix_cache_hit_rate");
      status.textContent = `${model} · running ${metric(m, "folio_requests_running")}` +
        ` · waiting ${metric(m, "folio_requests_waiting")}` +
        ` · KV pages ${metric(m, "folio_kv_pages_used")} of ${metric(m, "folio_kv_pages_total")}` +
        ` · prefix cache ${typeof hit === "number" ? (100 * hit).toFixed(0) + "%" : "?"} hits`;
    }
    if (h.status === 503) status.textContent += " · draining: no new requests";
    if (!modelName && r.status !== 401) fetchModel();
    status.classList.remove("down");
  } catch (e) {
    status.textContent = "The server is unreachable; retrying…";
    status.classList.add("down");
  }
  setTimeout(poll, 2000);
}

// ------------------------------------------------------------ start

function saveKey() {
  const key = $("api-key").value.trim();
  if (key) localStorage.setItem(KEY, key);
  else localStorage.removeItem(KEY);
  $("api-key").value = "";
  $("api-key-dialog").hidden = true;
  showError("");
  fetchModel();
  $("prompt").focus();
}

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
    stop();
    state.current = $("chats").value;
    save();
    render();
  });
  $("api-key-save").addEventListener("click", saveKey);
  $("api-key").addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); saveKey(); }
  });
  // The settings start open where there is room for them.
  if (window.matchMedia("(min-width: 721px)").matches) {
    document.querySelector("#settings details").open = true;
  }
  // A reply cut off by a reload is kept as it was.
  for (const c of Object.values(state.chats)) {
    for (const m of c.messages) {
      if (m.role === "assistant" && !m.finish) {
        m.finish = "aborted";
        m.stats = m.stats || "stopped by a reload";
      }
    }
  }
  render();
  fetchModel().finally(() => {
    document.body.dataset.ready = "1";
    poll();
  });
}

start();
