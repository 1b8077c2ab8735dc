// What several views share: the caller's corpora and a corpus picker.
import { get } from "../api.js";
import { field, h } from "../dom.js";

export async function corpora() {
  const page = await get("/v1/corpora?limit=500");
  return page.items;
}

/** A labelled <select> of corpora (``any``: an "All corpora" option first). */
export function corpusSelect(items, { label = "Corpus", selected = null, any = false, name = "corpus" } = {}) {
  const sel = h("select", { name },
    any ? h("option", { value: "" }, "All corpora") : null,
    items.map((c) => h("option", { value: c.id, selected: String(c.id) === String(selected) }, `${c.name} (#${c.id})`)));
  return field(label, sel);
}

export function expLink(id, text) {
  return h("a", { href: `#/experiences/${id}` }, text || `experience #${id}`);
}

export function badge(text, kind = text) {
  return h(`span.badge.b-${kind}`, {}, text);
}

/** Who put an experience in memory, in words: "gate (offline verifier)", "person (key 3)", ... */
export function originText(e) {
  const d = e.origin_detail;
  switch (e.origin) {
    case "gate": return `gate (${d || "its"} verifier)`;
    case "judge": return `LLM judge (${d || "the answer model"})`;
    case "person": return `person (${d || "unknown"})`;
    case "ungated": return "nobody: stored with the gates off";
    default: return e.origin || "unknown";
  }
}

/** An experience's trust: a badge, and who set it ("verified by key 3", "unverified: no person checked it"). */
export function trustNode(e) {
  const who = e.trust === "unverified" ? ": no person checked it" : e.trust_actor ? ` by ${e.trust_actor}` : "";
  return h("span.trust", {}, badge(e.trust, e.trust), who);
}
