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
/** A labelled form field: returns [wrapper, control]. A control with ``maxlength`` says when its
 * text is over the limit instead of being cut silently (see :func:`sayLimit`). */
export function field(label, control, hint) {
  control.id = control.id || `f${++uid}`;
  const parts = [h("label", { for: control.id }, label), control];
  const described = [];
  if (hint) {
    described.push(`${control.id}-hint`);
    parts.push(h("small.hint", { id: `${control.id}-hint` }, hint));
  }
  if (control.hasAttribute("maxlength")) {
    const notice = h("p.limit-notice", { id: `${control.id}-limit`, "aria-live": "polite", hidden: true });
    described.push(notice.id);
    parts.push(notice);
    sayLimit(control, notice);
  }
  if (described.length) control.setAttribute("aria-describedby", described.join(" "));
  return [h("div.field", {}, ...parts), control];
}

/** Characters as the API counts them (code points: an emoji is one, not two). */
export function charCount(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** The first ``max`` characters (code points) of ``text``. */
export function cutTo(text, max) {
  return Array.from(text).slice(0, max).join("");
}

/** Say a text control's length limit rather than cut a paste at it: a browser's ``maxlength``
 * drops whatever goes past it without a word (a pasted question of 5,000 characters became its
 * first 4,000). The attribute is taken off; once the text is over the limit ``notice`` says how
 * long it is, that nothing was cut, and offers to cut it, and the control is invalid (its form
 * does not send) until it fits. Returns the function that checks it again (after a value is set
 * from a script). */
export function sayLimit(control, notice) {
  const max = Number(control.getAttribute("maxlength"));
  control.removeAttribute("maxlength");
  control.dataset.maxChars = String(max);
  const cut = h("button.cut", { type: "button" }, `Cut it to the first ${fmtNum(max, 0)} characters`);
  function check() {
    const n = control.value.length > max ? charCount(control.value) : control.value.length;
    if (n <= max) {
      control.setCustomValidity("");
      control.removeAttribute("aria-invalid");
      clear(notice).hidden = true;
      return;
    }
    const text = `This text is ${fmtNum(n, 0)} characters long, ${fmtNum(n - max, 0)} over the limit of ${fmtNum(max, 0)}. Nothing was cut: shorten it, or cut it here.`;
    control.setCustomValidity(`${fmtNum(n, 0)} characters; the limit is ${fmtNum(max, 0)}`);
    control.setAttribute("aria-invalid", "true");
    clear(notice).append(h("span", {}, text), " ", cut);
    notice.hidden = false;
  }
  cut.addEventListener("click", () => {
    control.value = cutTo(control.value, max);
    check();
    control.focus();
  });
  control.addEventListener("input", check);
  return check;
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
