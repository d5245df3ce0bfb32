// The codemode playground: plain JavaScript, no framework, nothing fetched from elsewhere.
"use strict";

const $ = (id) => document.getElementById(id);
const editor = $("source");
const LINE_HEIGHT = 20;
const PADDING = 6;
const HISTORY_SIZE = 20;
let lastError = null;
let selected = null;
let tabMovesFocus = false;
let running = null;
let session = null;  // the handle of the session "Keep variables" runs in, once one is kept
let kept = null;  // what that session holds: { names: {name: description}, size, bound }
const TEMPLATE = "def main():\n    return 1\n";

// -- talking to the server --------------------------------------------------------------

async function api(path, body, options = {}) {
  const headers = { "Content-Type": "application/json" };
  const token = sessionStorage.getItem("codemode-token");
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(`api/${path}`, { method: "POST", headers, body: JSON.stringify(body), signal: options.signal });
  if (response.status === 401) {
    $("token-form").hidden = false;
    $("status").textContent = token ? "That token was not accepted: try another." : "This server needs a bearer token.";
    throw new Error("unauthorized");
  }
  $("token-form").hidden = true;
  const type = response.headers.get("Content-Type") || "";
  if (!options.onNote || !type.startsWith("application/x-ndjson")) return response.json();
  return lastLine(response, options.onNote);
}

// A run that streams its progress: each note line goes to `onNote` as it arrives, and the
// last line is the reply a JSON body would have been. A stream cut before it is a server
// that cannot be reached.
async function lastLine(response, onNote) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  let reply = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += value;
    for (let cut = buffered.indexOf("\n"); cut >= 0; cut = buffered.indexOf("\n")) {
      const line = JSON.parse(buffered.slice(0, cut));
      buffered = buffered.slice(cut + 1);
      if ("ok" in line) reply = line; else onNote(line.progress);
    }
  }
  if (!reply) throw new Error("the reply was cut short");
  return reply;
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem("codemode-token", $("token").value);
  $("token-form").hidden = true;
  search();
});

// -- capabilities -----------------------------------------------------------------------

async function search() {
  const query = $("search").value;
  const answer = await api("search", { query });
  if (answer.subject) $("subject").textContent = `Calls run as ${answer.subject}`;
  const list = $("results");
  list.replaceChildren();
  let namespace = null;
  for (const hit of answer.results || []) {
    const root = hit.name.split(".")[0];
    if (!query.trim() && root !== namespace) {  // the catalog, grouped by namespace
      namespace = root;
      const heading = document.createElement("li");
      heading.className = "group";
      heading.setAttribute("role", "presentation");
      heading.textContent = root;
      list.append(heading);
    }
    const item = document.createElement("li");
    item.tabIndex = 0;
    item.setAttribute("role", "option");
    item.dataset.name = hit.name;
    item.innerHTML = '<div class="name"></div><div class="summary"></div>';
    item.querySelector(".name").textContent = hit.name;
    item.querySelector(".summary").textContent = hit.summary;
    item.addEventListener("click", () => select(hit.name));
    item.addEventListener("keydown", (event) => { if (event.key === "Enter") select(hit.name); });
    list.append(item);
  }
  list.scrollTop = 0;
  listCue();
}

// The list scrolls within the window; a cue over its bottom edge says how many capabilities
// lie below what it shows, so none sits out of sight with nothing saying so (a scrollbar may
// be drawn only while scrolling, or not at all). Clicking it shows the next part.
function listCue() {
  const list = $("results");
  // The cue covers the list's bottom padding: what reaches under it counts as below.
  const bottom = list.scrollTop + list.clientHeight - parseFloat(getComputedStyle(list).paddingBottom);
  const below = [...list.querySelectorAll("li[role=option]")]
    .filter((item) => item.offsetTop + item.offsetHeight > bottom + 1).length;
  const cue = $("results-more");
  cue.hidden = below === 0;
  cue.textContent = `↓ ${below} more below`;
  list.parentElement.classList.toggle("scrolled", list.scrollTop > 0);
}

$("results").addEventListener("scroll", listCue);
$("results-more").addEventListener("click", () => {
  const list = $("results");
  const still = matchMedia("(prefers-reduced-motion: reduce)").matches;
  list.scrollBy({ top: Math.max(list.clientHeight - 48, 48), behavior: still ? "instant" : "smooth" });
});

let searchTimer = null;
$("search").addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(search, 150); });
$("search-form").addEventListener("submit", (event) => { event.preventDefault(); search(); });

async function select(name) {
  const answer = await api("describe", { name });
  if (!answer.ok) return;
  selected = answer.capability;
  for (const item of $("results").children) item.setAttribute("aria-selected", item.dataset.name === name);
  $("detail").hidden = false;
  $("detail-name").textContent = selected.name;
  $("detail-signature").textContent = selected.signature;
  $("detail-summary").textContent = selected.summary;
  $("detail-description").textContent = selected.description || "";
  const params = $("detail-parameters");
  params.replaceChildren();
  for (const p of selected.parameters) {
    const item = document.createElement("li");
    const bits = [`${p.name}: ${p.type}`, p.required ? "required" : `default ${p.default}`];
    if (p.constraints) bits.push(p.constraints);
    if (p.examples) bits.push(`e.g. ${JSON.stringify(p.examples[0])}`);
    item.textContent = bits.join(", ") + (p.doc ? ` — ${p.doc}` : "");
    params.append(item);
  }
  if (!selected.parameters.length) params.innerHTML = "<li>none</li>";
  const result = selected.result;
  $("detail-result").textContent = `${result.type}, read as ${result.read_as}` + (result.doc ? ` — ${result.doc}` : "");
  // A shape learned from the capability's own results: what came back, never a promise.
  const observed = result.observed;
  $("detail-observed").hidden = !observed;
  $("detail-observed").textContent = observed
    ? `observed in ${observed.results} result${observed.results === 1 ? "" : "s"} (not declared): ${observed.shape}` : "";
  const shapes = $("detail-shapes");
  shapes.replaceChildren(...selected.shapes.map((text) => { const li = document.createElement("li"); li.textContent = text; return li; }));
  const schemas = { input: selected.input_schema, output: selected.output_schema };
  if (observed) schemas.observed = observed.schema;
  $("detail-schemas").textContent = JSON.stringify(schemas, null, 2);
}

function placeholder(type) {
  const literal = /^Literal\[([^,\]]+)/.exec(type);
  if (literal) return literal[1];
  if (type.startsWith("str")) return '""';
  if (type.startsWith("int")) return "0";
  if (type.startsWith("float")) return "0.0";
  if (type.startsWith("bool")) return "False";
  if (type.startsWith("list") || type.startsWith("tuple")) return "[]";
  return "{}";
}

$("insert-call").addEventListener("click", () => {
  if (!selected) return;
  // The host's own example call when it gave one, else the required arguments to fill in.
  const value = (p) => (p.examples ? JSON.stringify(p.examples[0]) : placeholder(p.type));
  const args = selected.parameters.filter((p) => p.required).map((p) => `${p.name}=${value(p)}`);
  const call = selected.example || `${selected.name}(${args.join(", ")})`;
  if (insideMain()) insert(call);
  else {  // at a new line at the top of main, where a call can run
    const main = editor.value.indexOf("def main():");
    const at = main < 0 ? editor.value.length : editor.value.indexOf("\n", main) + 1;
    const line = `    value = ${call}\n`;
    const text = main < 0 ? `def main():\n${line}    return value\n` : line;
    editor.selectionStart = editor.selectionEnd = at || editor.value.length;
    insert(text);
    editor.selectionStart = editor.selectionEnd = (at || 0) + text.length - 1;
    keepValue();
  }
  editor.focus();
  editor.scrollLeft = 0;  // the call's start in view, however long the line
  changed();
});

function keepValue() {
  // A main() that only returns a constant (the page's template) returns the inserted call's
  // value instead, so Run shows what the call gives.
  const trivial = /^(\s*def main\(\):\n    value = .*\n)    return (None|True|False|-?\d+(\.\d+)?|""|''|\[\]|\{\})\n?$/;
  const match = trivial.exec(editor.value);
  if (match) editor.value = `${match[1]}    return value\n`;
}

// -- the editor -------------------------------------------------------------------------

function insert(text) {
  const { selectionStart: start, selectionEnd: end, value } = editor;
  editor.value = value.slice(0, start) + text + value.slice(end);
  editor.selectionStart = editor.selectionEnd = start + text.length;
  changed();
}

function insideMain() {
  // Whether the cursor sits on an indented line of a def main(): body.
  const { value, selectionStart: at } = editor;
  const start = value.lastIndexOf("\n", at - 1) + 1;
  const before = value.slice(0, start);
  return /^[ \t]/.test(value.slice(start)) && /(^|\n)(async )?def main\(\):/.test(before);
}

function errorLines(error) {
  // Every line an error names: the preflight lists one problem per line.
  if (!error) return new Set();
  const lines = [...error.message.matchAll(/<codemode>:(\d+):\d+/g)].map((m) => Number(m[1]));
  if (error.where) lines.push(error.where.line);
  return new Set(lines);
}

// -- a small highlighter: keywords, strings, comments and numbers ------------------------

const KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else "
  + "except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield "
  + "match case").split(" "));
const TOKENS = /(#[^\n]*)|("""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)|\b(\d[\d_]*(?:\.\d+)?)\b|\b([A-Za-z_]\w*)\b/g;

function escapeHtml(text) {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function highlighted(source) {
  let html = "";
  let last = 0;
  for (const match of source.matchAll(TOKENS)) {
    const [text, comment, string, number, word] = match;
    const kind = comment ? "com" : string ? "str" : number ? "num" : KEYWORDS.has(word) ? "kw" : null;
    if (!kind) continue;
    html += escapeHtml(source.slice(last, match.index)) + `<span class="${kind}">${escapeHtml(text)}</span>`;
    last = match.index + text.length;
  }
  return html + escapeHtml(source.slice(last)) + "\n";
}

function changed() {
  $("highlight").innerHTML = highlighted(editor.value);
  const lines = editor.value.split("\n").length;
  const gutter = $("gutter");
  const marked = errorLines(lastError);
  gutter.replaceChildren(...Array.from({ length: lines }, (_, i) => {
    const div = document.createElement("div");
    div.textContent = i + 1;
    if (marked.has(i + 1)) div.className = "error";
    return div;
  }));
  localStorage.setItem("codemode-program", editor.value);
  scrolled();
}

function scrolled() {
  $("gutter").scrollTop = editor.scrollTop;
  $("highlight").scrollTop = editor.scrollTop;
  $("highlight").scrollLeft = editor.scrollLeft;
  const band = $("error-line");
  const line = lastError && lastError.where ? lastError.where.line : 0;
  band.hidden = !line;
  if (line) band.style.top = `${PADDING + (line - 1) * LINE_HEIGHT - editor.scrollTop}px`;
  // A shade at the edge where a line goes on past what the editor shows.
  const code = $("code");
  code.style.setProperty("--scrollbar", `${editor.offsetWidth - editor.clientWidth}px`);
  code.classList.toggle("more-right", editor.scrollLeft + editor.clientWidth < editor.scrollWidth - 1);
  code.classList.toggle("more-left", editor.scrollLeft > 0);
}

function indent(outdent) {
  const { value, selectionStart: start, selectionEnd: end } = editor;
  const first = value.lastIndexOf("\n", start - 1) + 1;
  if (!outdent && start === end) return insert("    ");
  const block = value.slice(first, end);
  const lines = block.split("\n");
  const changedLines = lines.map((line) => (outdent ? line.replace(/^ {1,4}/, "") : "    " + line));
  const text = changedLines.join("\n");
  editor.value = value.slice(0, first) + text + value.slice(end);
  const shift = changedLines[0].length - lines[0].length;
  editor.selectionStart = Math.max(first, start + shift);
  editor.selectionEnd = first + text.length;
  changed();
}

editor.addEventListener("keydown", (event) => {
  if ((event.ctrlKey || event.metaKey) && event.key === "Enter") { event.preventDefault(); run(); return; }
  if (event.key === "Escape") { tabMovesFocus = true; return; }
  if (event.key === "Tab" && !tabMovesFocus) { event.preventDefault(); indent(event.shiftKey); return; }
  tabMovesFocus = false;
});
editor.addEventListener("input", () => { lastError = null; changed(); });
editor.addEventListener("scroll", scrolled);
new ResizeObserver(() => { scrolled(); listCue(); }).observe(document.body);

// -- running ----------------------------------------------------------------------------

function caret(where, dedent = 0) {
  const width = where.end_line === where.line ? Math.max(where.end_column - where.column, 1) : 1;
  return " ".repeat(Math.max(where.column - 1 - dedent, 0)) + "^".repeat(width);
}

function locationText(where) {
  return `${where.file}, line ${where.line}, in ${where.func || "<module>"}`;
}

function messageOf(error) {
  // The model's text without its position prefix, which the headline shows.
  return error.message.replace(/^[^:\n]+: <codemode>:\d+:\d+: /, "");
}

function tracebackText(error) {
  if (!error.traceback.length) return messageOf(error);
  const frames = error.traceback.map((w) => {
    const code = w.source.trimStart();
    const dedent = w.source.length - code.length;
    return `  File "${w.file}", line ${w.line}, in ${w.func || "<module>"}\n    ${code}\n    ${caret(w, dedent)}`;
  });
  return ["Traceback (most recent call last):", ...frames, messageOf(error)].join("\n");
}

function showText(element, text) {
  // Each source line with the caret line under it becomes a block that keeps its columns
  // and scrolls sideways, so the carets stay under what they point at; the rest wraps at
  // the panel's edge. The element's text stays exactly `text`.
  const lines = text.split("\n").map((line, i, all) => (i < all.length - 1 ? `${line}\n` : line));
  const nodes = [];
  let plain = "";
  for (let i = 0; i < lines.length; i++) {
    if (i + 1 < lines.length && /^ *\^+ *\n?$/.test(lines[i + 1]) && lines[i].trim()) {
      if (plain) nodes.push(document.createTextNode(plain));
      plain = "";
      const excerpt = document.createElement("span");
      excerpt.className = "excerpt";
      excerpt.textContent = lines[i] + lines[i + 1];
      nodes.push(excerpt);
      i++;
    } else plain += lines[i];
  }
  if (plain) nodes.push(document.createTextNode(plain));
  element.replaceChildren(...nodes);
}

function copyText(error) {
  return [
    `code: ${error.code}`,
    `message: ${error.message}`,
    `location: ${error.where ? locationText(error.where) : "none"}`,
    "traceback:",
    tracebackText(error),
  ].join("\n");
}

function tree(value, key) {
  const label = key === undefined ? "" : `${key}: `;
  if (value !== null && typeof value === "object") {
    const details = document.createElement("details");
    details.open = true;
    const summary = document.createElement("summary");
    const size = Array.isArray(value) ? `[${value.length}]` : `{${Object.keys(value).length}}`;
    summary.innerHTML = `<span class="key"></span>${size}`;
    summary.querySelector(".key").textContent = label;
    details.append(summary);
    for (const [k, v] of Object.entries(value)) details.append(tree(v, Array.isArray(value) ? Number(k) : k));
    return details;
  }
  const leaf = document.createElement("div");
  leaf.className = "leaf";
  leaf.innerHTML = `<span class="key"></span><span></span>`;
  leaf.firstChild.textContent = label;
  leaf.lastChild.textContent = JSON.stringify(value);
  leaf.lastChild.className = typeof value === "string" ? "string" : "number";
  return leaf;
}

function showResult(answer) {
  $("error").hidden = true;
  $("result").hidden = false;
  $("result-tree").replaceChildren(Object.assign(tree(answer.result), { className: "tree" }));
  $("result-tree").firstChild.classList.add("tree");
  $("printed").textContent = answer.printed || "(nothing printed)";
  const usage = answer.usage;
  const calls = usage.call_order.length ? `: ${usage.call_order.join(" → ")}` : "";
  $("usage").textContent = `${usage.duration_ms} ms, ${usage.call_order.length} capability calls${calls}`;
}

function showError(error, printed) {
  $("result").hidden = true;
  $("error").hidden = false;
  $("error-code").textContent = error.code;
  $("error-location").hidden = !error.where;
  $("error-source").hidden = !error.where;
  if (error.where) {
    $("error-location").textContent = locationText(error.where);
    $("error-source").textContent = `${error.where.source}\n${caret(error.where)}`;
  }
  $("error-message").textContent = messageOf(error);
  showText($("traceback"), tracebackText(error));
  $("traceback").classList.add("collapsed");
  $("toggle-traceback").setAttribute("aria-expanded", "false");
  $("toggle-traceback").textContent = "Show traceback";
  $("error-printed").textContent = printed || "(nothing printed)";
}

$("toggle-traceback").addEventListener("click", () => {
  const collapsed = $("traceback").classList.toggle("collapsed");
  $("toggle-traceback").setAttribute("aria-expanded", String(!collapsed));
  $("toggle-traceback").textContent = collapsed ? "Show traceback" : "Hide traceback";
});

$("copy-error").addEventListener("click", async () => {
  if (!lastError) return;
  await navigator.clipboard.writeText(copyText(lastError));
  $("status").textContent = "Error copied.";
});

async function run() {
  if (running) return;  // one run at a time: a double click runs once
  const source = editor.value;
  const started = performance.now();
  running = new AbortController();
  $("result").hidden = $("error").hidden = $("model-view").hidden = true;  // the last run's outcome goes
  $("run").disabled = true;
  $("cancel").hidden = false;
  $("status").classList.add("busy");
  const tick = () => { $("status").textContent = `Running… ${((performance.now() - started) / 1000).toFixed(1)} s`; };
  tick();
  const timer = setInterval(tick, 100);
  let answer;
  try {
    const body = { source, progress: true };  // its notes stream in as it runs
    if ($("keep").checked) body.session = session || "new";
    const options = { signal: running.signal, onNote: showNote };
    answer = await api("execute", body, options);
    while (answer && answer.ok && answer.approval) {  // paused until a person answers
      clearInterval(timer);
      $("status").textContent = "Waiting for your approval…";
      const answers = await approve(answer.approval.requests, answer.approval.wait);
      answer = await api("resume", { id: answer.approval.id, answers, progress: true }, options);
    }
  } catch (error) {
    answer = null;
    $("status").textContent = error.name === "AbortError" ? "Canceled."
      : error.message === "unauthorized" ? $("status").textContent
      : "The server cannot be reached: is codemode still running?";
  } finally {
    clearInterval(timer);
    showNote(null);
    running = null;
    $("run").disabled = false;
    $("cancel").hidden = true;
    $("status").classList.remove("busy");
  }
  const seconds = (performance.now() - started) / 1000;
  if (!answer) {
    if ($("status").textContent === "Canceled.") remember(source, "canceled", seconds);
    return;
  }
  lastError = answer.ok ? null : answer.error;
  if (answer.ok && answer.session) { session = answer.session; kept = answer.kept || null; }
  if (!answer.ok && answer.error.code === "session_not_found") session = kept = null;  // expired: start anew
  showSession();
  if (answer.ok) showResult(answer); else showError(answer.error, answer.printed);
  // The exact text an MCP client hands the model for this run.
  $("model-view").hidden = false;
  showText($("model-text"), answer.ok ? answer.model_text : answer.error.model_text);
  $("status").textContent = answer.ok ? "Finished." : "Failed.";
  changed();
  remember(source, answer.ok ? "ok" : answer.error.code, seconds);
  if (window.innerWidth < 1000) $("outcome").scrollIntoView({ block: "start" });
}
// How far the running program is, live: "12 calls · 3.1 s · records.lookup", or the
// program's own progress() message, with a bar when it gave a total. The message is the
// program's text: set as text, never parsed as markup. null hides it (the run ended).
function showNote(note) {
  $("progress").hidden = !note;
  $("progress-message").textContent = note ? note.message : "";
  const bar = $("progress-bar");
  bar.hidden = !note || note.total === null;
  if (!bar.hidden) { bar.max = note.total; bar.value = note.progress; }
}

// Which session the next run continues: what the last successful one left at top level.
function showSession() {
  $("session").hidden = !($("keep").checked && session);
  $("session").textContent = session
    ? `Session ${session}: the next run starts from the variables, functions and imports the last successful run left at top level.`
    : "";
  // What it holds, by name: a failed run leaves the list as it was, as it leaves the session.
  // The names are the program's own: set as text, never parsed as markup.
  $("session-state").hidden = $("session").hidden || !kept;
  const names = Object.entries(kept ? kept.names : {});
  $("session-size").textContent = kept
    ? `${names.length} ${names.length === 1 ? "name" : "names"}, ${size(kept.size)} of ${size(kept.bound)}`
    : "";
  $("session-names").replaceChildren(...names.map(([name, what]) => {
    const item = document.createElement("li");
    const code = document.createElement("code");
    code.textContent = name;
    item.append(code, `: ${what}`);
    return item;
  }));
}

// Bytes as the server's messages write them: 512 bytes, 64 KiB, 1.5 MiB.
function size(n) {
  for (const [unit, scale] of [["GiB", 1024 ** 3], ["MiB", 1024 ** 2], ["KiB", 1024]]) {
    if (n >= scale) return `${Math.round((n / scale) * 100) / 100} ${unit}`;
  }
  return `${n} bytes`;
}

$("keep").addEventListener("change", () => {
  if (!$("keep").checked) session = kept = null;  // unticked: the next run starts empty
  showSession();
});

// Ask the person about each call the authorizer sent for approval, one dialog at a time,
// each within the wait: a dialog left open past it closes (and the call times out).
async function approve(requests, wait) {
  const answers = {};
  const until = performance.now() + wait * 1000;
  for (const request of requests) {
    $("approval-message").textContent = request.message;
    $("approval-capability").textContent = request.capability;
    $("approval-arguments").textContent = request.arguments;  // as the server shows them
    const dialog = $("approval");
    const closed = new Promise((resolve) => dialog.addEventListener("close", resolve, { once: true }));
    dialog.returnValue = "";
    dialog.showModal();
    const timer = setTimeout(() => dialog.close(), Math.max(until - performance.now(), 0));
    await closed;
    clearTimeout(timer);
    answers[request.key] = dialog.returnValue === "approve";  // Escape declines
  }
  return answers;
}

$("run").addEventListener("click", run);
$("cancel").addEventListener("click", () => { if (running) running.abort(); });

// -- history ----------------------------------------------------------------------------

function loadHistory() { return JSON.parse(sessionStorage.getItem("codemode-history") || "[]"); }

function remember(source, status, seconds) {
  const entry = { source, status, seconds, time: new Date().toLocaleTimeString() };
  const runs = [entry, ...loadHistory()].slice(0, HISTORY_SIZE);
  sessionStorage.setItem("codemode-history", JSON.stringify(runs));
  drawHistory();
}

function drawHistory() {
  $("history").replaceChildren(...loadHistory().map((entry) => {
    const item = document.createElement("li");
    item.tabIndex = 0;
    item.className = entry.status === "ok" ? "ok" : "failed";
    const template = TEMPLATE.split("\n");
    const first = entry.source.split("\n").find((l, i) => l.trim() && l !== template[i]) || entry.source;
    const took = entry.seconds === undefined ? "" : ` ${entry.seconds.toFixed(2)} s`;
    item.textContent = `${entry.time} ${entry.status}${took}: ${first.trim()}`.slice(0, 90);
    item.title = entry.source;
    const restore = () => { editor.value = entry.source; lastError = null; changed(); };
    item.addEventListener("click", restore);
    item.addEventListener("keydown", (event) => { if (event.key === "Enter") restore(); });
    return item;
  }));
}

editor.value = localStorage.getItem("codemode-program") || TEMPLATE;
changed();
drawHistory();
search();
