// Messages for the user: API errors (401: sign in again; 403/404/409/422/429/503: the API's own
// message) and confirmations, in the page's alert region.
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

export function showError(err) {
  const status = err && err.status !== undefined ? err.status : 0;
  const title = TITLES[status] || `Error ${status}`;
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
