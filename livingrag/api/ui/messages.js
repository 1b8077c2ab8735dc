// Messages for the user: API errors (401: sign in again; 403/404/409/413/422/429/503: the API's
// own message) and confirmations, in the page's alert region.
//
// An error belongs to the request that failed: it is cleared when the user starts another one (a
// form sent, a button pressed: see the listeners at the end; a new page clears every message, and
// api.js clears it when a write request starts), so an old error never stays on screen next to a
// new answer. Confirmations stay until the next message or page.
import { h, clear } from "./dom.js";

const box = () => document.getElementById("messages");

const TITLES = {
  0: "Network error",
  401: "Please sign in again",
  403: "Not allowed",
  404: "Not found",
  409: "Conflict",
  413: "Too large",
  422: "Invalid input",
  429: "Busy, try again shortly",
  502: "Upstream error",
  503: "Unavailable, try again later",
  504: "Timed out",
};

/** Show an API error (``{status, message}``); ``title`` overrides the status's title. */
export function showError(err) {
  const status = err && err.status !== undefined ? err.status : 0;
  const title = (err && err.title) || TITLES[status] || `Error ${status}`;
  const text = status === 401 ? `${err.message}. Your key was not accepted; sign in again.` : err.message;
  show("error", `${title}${status ? ` (${status})` : ""}`, text);
}

export function showInfo(text) {
  show("info", "Done", text);
}

function show(kind, title, text) {
  const b = clear(box());
  b.append(
    h(`div.msg.${kind}`, { "data-kind": kind },
      h("strong", {}, title + ": "), h("span.msg-text", {}, text),
      h("button.close", { type: "button", "aria-label": "Dismiss message", onclick: () => clear(box()) }, "×")),
  );
}

export function clearMessages() {
  clear(box());
}

/** Take an error message off the page (a confirmation stays): a new request is starting. */
export function clearError() {
  const b = box();
  if (b) for (const m of b.querySelectorAll(".msg.error")) m.remove();
}

/** Run an async action and show its error, if any; returns its result or undefined. */
export async function attempt(fn) {
  try {
    return await fn();
  } catch (err) {
    if (err && err.status !== undefined) showError(err);
    else showError({ status: 0, message: String(err) });
    return undefined;
  }
}

// The user starts a new request by sending a form or pressing a button (Ask, Search, Right, a
// pager button, ...): the previous request's error goes first. Listened to on the document in the
// capture phase, so it runs before the view's own handler shows what the new request brings.
// Polls of a job or a write-back are no new request of the user's and leave it.
document.addEventListener("submit", () => clearError(), true);
document.addEventListener("click", (ev) => {
  const button = ev.target instanceof Element ? ev.target.closest("button") : null;
  if (button && !button.closest("#messages")) clearError();
}, true);
