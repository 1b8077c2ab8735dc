// The console's shell: sign-in (tenant key, or the admin key and a tenant), navigation and the
// hash router (#/ask, #/experiences, #/experiences/12, #/health, #/corpus/3, #/corpus/3/entities/7).
import { ApiError, get, session, setUnauthorizedHandler } from "./api.js";
import { clear, field, h } from "./dom.js";
import { attempt, clearMessages, showError } from "./messages.js";
import { askView } from "./views/ask.js";
import { corpusView } from "./views/corpus.js";
import { experienceView, experiencesView } from "./views/experiences.js";
import { healthView } from "./views/health.js";

const view = () => document.getElementById("view");

const ROUTES = [
  [/^\/ask$/, () => askView()],
  [/^\/experiences$/, () => experiencesView()],
  [/^\/experiences\/(\d+)$/, (m) => experienceView(Number(m[1]))],
  [/^\/health$/, () => healthView()],
  [/^\/corpus$/, () => corpusView(null)],
  [/^\/corpus\/(\d+)$/, (m) => corpusView(Number(m[1]))],
  [/^\/corpus\/(\d+)\/entities\/(\d+)$/, (m) => corpusView(Number(m[1]), Number(m[2]))],
];

function setTitle(text) {
  document.title = `${text} · livingrag console`;
}

function chrome() {
  const signedIn = session.ready;
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !session.key;
  document.getElementById("switch-tenant").hidden = !(session.role === "operator" && session.tenant);
  const who = document.getElementById("who");
  who.textContent = !session.key
    ? ""
    : session.role === "operator"
      ? `Operator${session.tenant ? ` acting for ${session.tenantName} (tenant ${session.tenant})` : ""}`
      : "Signed in with a tenant key";
  const path = location.hash.replace(/^#/, "");
  for (const a of document.querySelectorAll("#nav a")) {
    const here = path.startsWith(a.getAttribute("href").slice(1));
    if (here) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function route() {
  chrome();
  const root = view();
  if (!session.key) return signInView(root);
  if (!session.ready) return tenantPicker(root);
  const path = location.hash.replace(/^#/, "") || "/ask";
  for (const [re, make] of ROUTES) {
    const m = re.exec(path);
    if (m) {
      clear(root);
      root.append(h("p.loading", {}, "Loading…"));
      try {
        const { title, node } = await make(m);
        setTitle(title);
        clear(root).append(node);
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) return showError(err);
        clear(root).append(h("h1", {}, "Could not load this page"), h("p", {}, err.message || String(err)));
        setTitle("Error");
        showError(err instanceof ApiError ? err : { status: 0, message: String(err) });
      }
      root.focus();
      return;
    }
  }
  clear(root).append(h("h1", {}, "No such page"), h("p", {}, h("a", { href: "#/ask" }, "Go to Ask")));
}

function signInView(root) {
  setTitle("Sign in");
  const [keyField, key] = field(
    "API key",
    h("input", { type: "password", name: "key", autocomplete: "off", required: true, spellcheck: "false" }),
    "A tenant's key (from `livingrag tenant create`), or the admin key to act for a tenant. It stays in this tab's session storage.",
  );
  const form = h("form.card", { "aria-labelledby": "signin-title" },
    h("h1#signin-title", {}, "Sign in"), keyField, h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearMessages();
    const k = key.value.trim();
    if (!k) return;
    const role = await attempt(() => detectRole(k));
    if (!role) return;
    session.signIn(k, role);
    location.hash = "#/ask";
    route();
  });
  clear(root).append(form);
  key.focus();
}

/** operator when the key lists tenants; tenant when it lists corpora; else the API's error. */
async function detectRole(key) {
  try {
    await get("/v1/tenants", { key, asTenant: false });
    return "operator";
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 403) throw err;
  }
  await get("/v1/corpora?limit=1", { key, asTenant: false });
  return "tenant";
}

async function tenantPicker(root) {
  setTitle("Choose a tenant");
  const tenants = await attempt(() => get("/v1/tenants", { asTenant: false }));
  if (!tenants) return;
  const list = h("ul.tenant-list", {},
    tenants.map((t) =>
      h("li", {}, h("button", { type: "button", "data-tenant": t.id, onclick: () => {
        session.actFor(t.id, t.name);
        location.hash = "#/ask";
        route();
      } }, `${t.name} (tenant ${t.id}, ${t.active_keys} active key${t.active_keys === 1 ? "" : "s"})`))));
  clear(root).append(h("section.card", { "aria-labelledby": "pick-title" },
    h("h1#pick-title", {}, "Act for a tenant"),
    h("p", {}, "Signed in with the admin key. Every page then shows only this tenant's corpora and experiences."),
    tenants.length ? list : h("p", {}, "There are no tenants yet: create one with `livingrag tenant create NAME`.")));
  const first = root.querySelector("button");
  if (first) first.focus();
}

setUnauthorizedHandler(() => {
  session.signOut();
  chrome();
  // the message stays (showError is called by the caller), the form replaces the view
  signInView(view());
});

document.getElementById("sign-out").addEventListener("click", () => {
  session.signOut();
  clearMessages();
  location.hash = "";
  route();
});
document.getElementById("switch-tenant").addEventListener("click", () => {
  const key = session.key;
  session.signIn(key, "operator");
  route();
});
// a view asks to be drawn again (after a change), keeping the message it shows
window.addEventListener("livingrag:refresh", () => route());
window.addEventListener("hashchange", () => {
  clearMessages();
  route();
});
route();

// A file dropped outside the corpus view's drop zone would make the browser open it in place of the
// console (and leave the signed-in page): such drops are refused here; the drop zone handles its own.
for (const type of ["dragover", "drop"]) {
  window.addEventListener(type, (ev) => {
    const files = ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes("Files");
    if (files && !(ev.target instanceof Element && ev.target.closest("[data-dropzone], input[type=file]"))) {
      ev.preventDefault();
      if (type === "dragover") ev.dataTransfer.dropEffect = "none";
    }
  });
}
