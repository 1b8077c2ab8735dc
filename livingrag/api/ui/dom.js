// Small DOM helpers: build elements without innerHTML (no markup from data ever reaches the page).

/** h("tag.class#id", {attr: value, onclick: fn}, ...children) */
export function h(spec, attrs = {}, ...children) {
  const m = /^([a-z0-9]+)?((?:[.#][\w-]+)*)$/i.exec(spec);
  const el = document.createElement((m && m[1]) || "div");
  for (const part of ((m && m[2]) || "").match(/[.#][\w-]+/g) || []) {
    if (part[0] === ".") el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes (no style attributes: the CSP forbids them). */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

let uid = 0;
/** A labelled form field: returns [wrapper, control]. */
export function field(label, control, hint) {
  control.id = control.id || `f${++uid}`;
  const parts = [h("label", { for: control.id }, label), control];
  if (hint) {
    const hid = `${control.id}-hint`;
    control.setAttribute("aria-describedby", hid);
    parts.push(h("small.hint", { id: hid }, hint));
  }
  return [h("div.field", {}, ...parts), control];
}

export function fmtNum(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return Number(x).toLocaleString("en", { maximumFractionDigits: digits });
}

export function fmtAge(iso) {
  if (!iso) return "–";
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

export function fmtTime(iso) {
  return iso ? new Date(iso).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "–";
}

/** The status of an experience row: active, retracted (by a person), stale or expired. */
export function statusOf(e) {
  if (e.trust === "retracted") return "retracted";
  if (e.stale) return "stale";
  if (e.expires_at && new Date(e.expires_at).getTime() <= Date.now()) return "expired";
  return "active";
}

/** A table with a caption, column headers and rows of cells (nodes or text). */
export function table(caption, headers, rows, cls = "") {
  return h(
    `table${cls ? "." + cls : ""}`,
    {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))),
  );
}
