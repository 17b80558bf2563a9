// Shared helpers of the dashboard pages. Every string from a study reaches the page as a text node (`h` below) or as
// Plotly data (which escapes text it renders); no page ever assigns study data to innerHTML.
"use strict";

const HPO = (window.HPO = window.HPO || {});

HPO.STATE_COLORS = {
  COMPLETE: "#1f77b4", PRUNED: "#ff7f0e", FAIL: "#d62728", RUNNING: "#2ca02c", WAITING: "#7f7f7f", REQUEUED: "#9467bd",
};
// REQUEUED: a failed attempt (interrupted, crashed, out of GPU memory beside others) whose retry was queued; the server
// reports it apart from FAIL (dashboards/serialize.py).
HPO.STATES = ["COMPLETE", "PRUNED", "FAIL", "REQUEUED", "RUNNING", "WAITING"];

// The static report embeds every API answer it needs; the live pages fetch them.
HPO.report = window.HPO_REPORT || null;

HPO.h = function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "className") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  HPO.append(node, children);
  return node;
};

HPO.append = function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
};

HPO.clear = function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
};

HPO.query = function query(params) {
  const search = new URLSearchParams();
  for (const key of Object.keys(params || {}).sort()) {
    if (params[key] !== undefined && params[key] !== null) search.set(key, String(params[key]));
  }
  return search.toString();
};

HPO.api = async function api(path, params) {
  const key = path + "?" + HPO.query(params);
  if (HPO.report) return HPO.reportAnswer(path, params, key);
  const prefetched = window.HPO_PREFETCH && window.HPO_PREFETCH[key];
  if (prefetched) {
    delete window.HPO_PREFETCH[key]; // once: later polls must see fresh data
    const answer = await prefetched;
    if (!answer.ok) throw new Error(answer.body.error || answer.status);
    return answer.body;
  }
  const response = await fetch(key, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
};

// The report holds [params, answer] pairs per endpoint; match the params by value, as strings.
HPO.reportAnswer = function reportAnswer(path, params, key) {
  const wanted = new URLSearchParams(HPO.query(params)).toString();
  for (const [recorded, answer] of HPO.report.api[path] || []) {
    if (new URLSearchParams(HPO.query(recorded)).toString() === wanted) return answer;
  }
  throw new Error("not in this report: " + key);
};

// A link to another page; in the static report there are no other pages, so the link is plain text.
HPO.link = function link(page, params, ...children) {
  if (HPO.report) return HPO.h("span", {}, ...children);
  return HPO.h("a", { href: page + "?" + HPO.query(params) }, ...children);
};

HPO.params = function params() {
  return Object.fromEntries(new URLSearchParams(window.location.search));
};

HPO.fmt = function fmt(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    const magnitude = Math.abs(value);
    if (magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e5)) return value.toExponential(3);
    return String(Number(value.toPrecision(5)));
  }
  if (Array.isArray(value) && value.every((item) => item === null || typeof item !== "object")) return value.map(HPO.fmt).join(", ");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
};

HPO.fmtTime = function fmtTime(unix) {
  if (unix === null || unix === undefined) return "";
  const date = new Date(unix * 1000);
  return date.toISOString().replace("T", " ").slice(0, 19);
};

HPO.fmtDuration = function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(2) + " h";
};

HPO.stateChip = function stateChip(state, count) {
  return HPO.h("span", { className: "chip " + state }, state.toLowerCase() + (count === undefined ? "" : " " + count));
};

HPO.setStatus = function setStatus(text, isError) {
  const node = document.getElementById("status");
  if (!node) return;
  node.textContent = text;
  node.classList.toggle("error", Boolean(isError));
};

HPO.showError = function showError(error) {
  console.error(error);
  HPO.setStatus("error: " + (error && error.message ? error.message : String(error)), true);
};

// Poll `refresh` every `ms` while the tab is visible; a live page updates in place, without reload. `refresh` may
// return a longer delay for the next poll (a big study that took long to redraw).
HPO.poll = function poll(refresh, ms) {
  if (HPO.report) return;
  const interval = Number(HPO.params().poll_ms || ms || 2000);
  const tick = async () => {
    let delay = interval;
    if (!document.hidden) {
      try {
        delay = Math.max(interval, Number(await refresh()) || 0);
        HPO.setStatus("live · updated " + new Date().toLocaleTimeString());
      } catch (error) {
        HPO.showError(error);
      }
    }
    setTimeout(tick, delay);
  };
  setTimeout(tick, interval);
};

HPO.card = function card(title, body, opts) {
  const options = opts || {};
  return HPO.h(
    "section",
    { className: "card" + (options.wide ? " wide" : ""), id: options.id },
    HPO.h("div", { className: "card-head" }, HPO.h("h2", {}, title), options.note ? HPO.h("span", { className: "note" }, options.note) : null),
    body
  );
};

HPO.keyValues = function keyValues(object) {
  const entries = Object.entries(object || {});
  if (!entries.length) return HPO.h("p", { className: "muted" }, "none");
  return HPO.h("dl", { className: "kv" }, entries.map(([key, value]) => [HPO.h("dt", {}, key), HPO.h("dd", {}, HPO.fmt(value))]));
};

HPO.commandBox = function commandBox(command) {
  const code = HPO.h("code", {}, command);
  const copy = HPO.h("button", { type: "button", title: "copy to clipboard" }, "copy");
  copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(command));
  return HPO.h("div", { className: "command" }, code, copy);
};

// Pages call this once their first full render is done; the paint benchmark and the browser tests wait for it.
HPO.markPainted = function markPainted() {
  if (document.body.dataset.painted) return;
  performance.mark("hpo-painted");
  window.hpoPaintedMs = performance.now();
  document.body.dataset.painted = "1";
};

// Plotly's bundle, loaded once, by a script element added when first needed, so no page blocks on 4.8 MB of JavaScript:
// the study page draws its first screen (summary, trial table) before its first plot asks for it, the overview never
// does, the run and comparison pages (plots first) ask at once, beside their API request. The report inlines it. The
// URL carries the bundle's version, so a browser that has it takes it (compiled) from its cache.
HPO.loadPlotly = function loadPlotly() {
  if (!HPO.plotlyLoaded) {
    HPO.plotlyLoaded = window.Plotly ? Promise.resolve(window.Plotly) : new Promise((resolve, reject) => {
      const meta = document.querySelector('meta[name="hpo-plotly"]');
      const script = document.createElement("script");
      script.src = meta ? meta.content : "/static/plotly.min.js";
      script.async = true;
      script.addEventListener("load", () => { performance.mark("hpo-plotly-loaded"); resolve(window.Plotly); });
      script.addEventListener("error", () => reject(new Error("could not load Plotly's bundle from the server")));
      document.head.appendChild(script);
    });
  }
  return HPO.plotlyLoaded;
};

HPO.start = function start(main) {
  const app = document.getElementById("app");
  Promise.resolve()
    .then(() => main(app))
    .then(() => HPO.setStatus(HPO.report ? "static report" : "live · updated " + new Date().toLocaleTimeString()))
    .catch((error) => {
      HPO.clear(app).appendChild(HPO.h("p", { className: "muted" }, "Could not load: " + (error.message || error)));
      HPO.showError(error);
      HPO.markPainted();
    });
};
