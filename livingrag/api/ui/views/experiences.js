// Experiences: a filterable, paginated table; an experience's page (question, answer, who vouches
// for it, summary, ranked activation map, cited passages and whether they changed, its history);
// verify, retract, expire, delete, and prune with a dry-run preview of what would go before it is
// applied. The gate's score (GS) is shown as what it is: a heuristic, not a probability.
import { del, get, post, qs } from "../api.js";
import { append, clear, field, fmtAge, fmtNum, fmtTime, h, statusOf, table } from "../dom.js";
import { attempt, showInfo } from "../messages.js";
import { badge, corpora, corpusSelect, expLink, originText, trustNode } from "./common.js";

const PAGE = 20;

function rowsOf(items, names) {
  return items.map((e) => [
    expLink(e.id, `#${e.id}`), e.query, badge(statusOf(e)), badge(e.trust, e.trust), e.origin, fmtNum(e.confidence), fmtAge(e.created_at),
    String(e.fusion_uses + e.scaffold_uses + (e.answer_uses || 0)), names[e.corpus_id] || `#${e.corpus_id}`,
  ]);
}

const COLUMNS = ["Id", "Question", "Status", "Trust", "Origin", "Gate score", "Age", "Uses", "Corpus"];
const GS_HINT = "The gate's grounding score GS: the share of the answer's claims the verifier found supported by the passages. A heuristic, not a probability of being right.";

function readState() {
  const p = new URLSearchParams(location.hash.split("?")[1] || "");
  return {
    corpus_id: p.get("corpus_id") || "", status: p.get("status") || "", trust: p.get("trust") || "",
    min_confidence: p.get("min_confidence") || "", offset: Number(p.get("offset") || 0),
  };
}

export async function experiencesView() {
  const cs = await corpora();
  const names = Object.fromEntries(cs.map((c) => [c.id, c.name]));
  const state = readState();
  const [corpusField, corpus] = corpusSelect(cs, { selected: state.corpus_id, any: true });
  const [statusField, status] = field("Status", h("select", { name: "status" },
    ["", "active", "stale", "expired", "retracted"].map((s) => h("option", { value: s, selected: s === state.status }, s || "Any status"))));
  const [trustField, trust] = field("Trust", h("select", { name: "trust" },
    ["", "unverified", "verified", "retracted"].map((s) => h("option", { value: s, selected: s === state.trust }, s || "Any trust"))));
  const [confField, minConf] = field("Minimum gate score", h("input", { type: "number", min: 0, max: 1, step: 0.05, name: "min_confidence", value: state.min_confidence }));
  const filters = h("form.filters.card", { "aria-label": "Filter experiences" }, corpusField, statusField, trustField, confField, h("button", { type: "submit" }, "Filter"));
  const results = h("div#experience-table", { "aria-live": "polite" });

  async function load(offset) {
    const params = { corpus_id: corpus.value, status: status.value, trust: trust.value, min_confidence: minConf.value, limit: PAGE, offset };
    const page = await attempt(() => get(`/v1/experiences${qs(params)}`));
    if (!page) return;
    const nav = h("nav.pager", { "aria-label": "Pages" },
      h("button", { type: "button", disabled: offset === 0, onclick: () => load(Math.max(0, offset - PAGE)) }, "Previous page"),
      h("span", {}, page.items.length ? ` ${offset + 1}–${offset + page.items.length} ` : " none "),
      h("button", { type: "button", disabled: page.next_offset === null, onclick: () => load(page.next_offset) }, "Next page"));
    clear(results).append(
      page.items.length ? table("Experiences, newest first", COLUMNS, rowsOf(page.items, names), "experiences") : h("p", {}, "No experience matches."),
      nav, h("p.hint", {}, `Gate score: ${GS_HINT}`));
  }
  filters.addEventListener("submit", (ev) => { ev.preventDefault(); load(0); });
  await load(state.offset);
  return {
    title: "Experiences",
    node: h("section", {}, h("h1", {}, "Experiences"), filters, results, pruneForm(cs, names, () => load(0))),
  };
}

function pruneForm(cs, names, reload) {
  const [corpusField, corpus] = corpusSelect(cs, { any: true, label: "Prune in corpus", name: "prune-corpus" });
  const check = (name, text) => {
    const box = h("input", { type: "checkbox", name });
    return [h("label.check", {}, box, ` ${text}`), box];
  };
  const [staleL, stale] = check("stale", "stale experiences");
  const [expiredL, expired] = check("expired", "expired experiences");
  const [confField, minConf] = field("Below gate score", h("input", { type: "number", min: 0, max: 1, step: 0.05, name: "prune-min-confidence" }),
    "Verified experiences are kept whatever their score.");
  const [unusedField, unused] = field("Unused for", h("input", { type: "text", name: "unused-for", placeholder: "e.g. 90d", size: 8 }));
  const [keepField, keep] = field("Keep only the most used", h("input", { type: "number", min: 0, step: 1, name: "keep" }));
  const preview = h("div#prune-preview", { "aria-live": "polite" });
  const apply = h("button.danger", { type: "button", disabled: true }, "Apply prune");
  let previewed = null;
  const body = () => {
    const b = { stale: stale.checked, expired: expired.checked };
    if (corpus.value) b.corpus_id = Number(corpus.value);
    if (minConf.value !== "") b.min_confidence = Number(minConf.value);
    if (unused.value.trim()) b.unused_for = unused.value.trim();
    if (keep.value !== "") b.keep = Number(keep.value);
    return b;
  };
  const form = h("form.card.prune", { "aria-labelledby": "prune-title" },
    h("h2#prune-title", {}, "Prune"),
    h("p.hint", {}, "Pick criteria (each adds experiences), preview what would go, then apply."),
    h("fieldset", {}, h("legend", {}, "Delete"), staleL, expiredL), confField, unusedField, keepField,
    h("div.buttons", {}, h("button", { type: "submit" }, "Preview (dry run)"), apply), preview);
  form.addEventListener("input", () => { apply.disabled = true; previewed = null; });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const b = body();
    const r = await attempt(() => post("/v1/experiences/prune", { ...b, dry_run: true }));
    if (!r) return;
    previewed = b;
    apply.disabled = r.counts.total === 0;
    append(clear(preview), [
      h("p.prune-total", {}, `Dry run: ${r.counts.total} experience(s) would be deleted`,
        ` (${Object.entries(r.counts).filter(([k]) => k !== "total").map(([k, v]) => `${k}: ${v}`).join(", ")}).`),
      r.items.length ? table("Would be deleted", COLUMNS, rowsOf(r.items, names), "prune-items") : null]);
  });
  apply.addEventListener("click", async () => {
    if (!previewed) return;
    const r = await attempt(() => post("/v1/experiences/prune", { ...previewed, dry_run: false }));
    if (!r) return;
    apply.disabled = true;
    previewed = null;
    clear(preview).append(h("p.prune-total", {}, `Deleted ${r.counts.total} experience(s).`));
    showInfo(`pruned ${r.counts.total} experience(s)`);
    reload();
  });
  return form;
}

const EVENTS = {
  created: "created",
  used_fusion: "fused into a question's retrieval",
  used_scaffold: "shown as a scaffold",
  used_finding: "stated as a finding",
  used_answer: "its answer given again",
  verified: "verified",
  retracted: "retracted",
  corrected: "corrected",
  unretracted: "no longer retracted",
  stale: "marked stale",
  expired: "expired",
  deleted: "deleted",
};
const EVENT_KIND = { verified: "ok", created: "ok", retracted: "bad", deleted: "bad", expired: "bad", stale: "stale", corrected: "bad" };

/** The experience's history as a timeline, oldest first. */
function timelineNode(events) {
  if (!events.length) return h("p", {}, "No events.");
  return h("ol.timeline", { "aria-label": "History, oldest first" }, events.map((ev) => h("li", { "data-event": ev.event },
    h("time", { datetime: ev.created_at }, fmtTime(ev.created_at)), " ",
    badge(EVENTS[ev.event] || ev.event, EVENT_KIND[ev.event] || (ev.event.startsWith("used_") ? "use" : "other")),
    h("span.actor", {}, ` by ${ev.actor}`),
    ev.query_log_id ? h("small", {}, ` (question #${ev.query_log_id})`) : null,
    ev.reason ? h("span.reason", {}, `: ${ev.reason}`) : null,
    ev.details && ev.details.corrected_by ? [" → ", expLink(ev.details.corrected_by)] : null)));
}

/** Verify / Retract with an optional reason. */
function trustForm(e, id) {
  const [reasonField, reason] = field("Reason (optional)", h("input", { type: "text", name: "trust-reason", maxlength: 2000, autocomplete: "off" }));
  const act = (action, done) => async () => {
    const body = reason.value.trim() ? { reason: reason.value.trim() } : {};
    const r = await attempt(() => post(`/v1/experiences/${id}/${action}`, body));
    if (!r) return;
    window.dispatchEvent(new Event("livingrag:refresh"));
    showInfo(r.changed ? `experience #${id} ${done}` : `experience #${id} was ${done} already`);
  };
  return h("form.card.trust-form", { "aria-labelledby": "trust-title", onsubmit: (ev) => ev.preventDefault() },
    h("h2#trust-title", {}, "Is this answer right?"),
    h("p.hint", {}, "Verify it if a person checked it (a verified experience may answer its question again from memory); retract it if it is wrong (it is never served for its question again)."),
    reasonField,
    h("div.buttons", {},
      h("button.ok", { type: "button", disabled: e.trust === "verified", onclick: act("verify", "verified") }, "Verify"),
      h("button.danger", { type: "button", disabled: e.trust === "retracted", onclick: act("retract", "retracted") }, "Retract")));
}

export async function experienceView(id) {
  const e = await get(`/v1/experiences/${id}/details`);
  const history = h("div#history", { "aria-live": "polite" }, h("p.loading", {}, "Loading the history…"));
  get(`/v1/experiences/${id}/history`).then(
    (hist) => clear(history).append(timelineNode(hist.events)),
    (err) => clear(history).append(h("p", {}, `The history could not be read: ${err.message}`)));
  const st = statusOf(e);
  const maxW = Math.max(...e.activation.map((a) => a.weight), 1e-9);
  const activation = h("ol.activation", { "aria-label": "Activation map, strongest entity first" },
    e.activation.map((a) => h("li", {},
      h("span.ent", {}, a.name || `(entity #${a.entity_id}, gone)`, a.label ? h("small", {}, ` ${a.label}`) : null),
      h("meter", { min: 0, max: maxW, value: a.weight, "aria-label": `weight ${fmtNum(a.weight)}` }),
      h("span.bar-value", {}, fmtNum(a.weight)),
      a.name ? h("a", { href: `#/corpus/${e.corpus_id}/entities/${a.entity_id}`, "aria-label": `${a.name} in the graph` }, "graph") : null)));
  const cited = h("ul.cited", {}, e.cited_passages.map((p) => h("li", { "data-passage": p.id },
    h("strong", {}, `#${p.id} ${p.title || ""} `),
    !p.exists ? badge("deleted since", "bad") : p.changed ? badge("changed since", "bad") : badge("unchanged", "ok"),
    p.text ? h("p", {}, p.text) : null)));
  const claims = (e.grounding.claims || []).map((c) => [c.claim, c.source || "–", fmtNum(c.g), c.passage_id ? `#${c.passage_id}` : "–"]);
  const actions = h("div.buttons", {},
    h("button", { type: "button", disabled: st === "expired", onclick: async () => {
      const r = await attempt(() => post(`/v1/experiences/${id}/expire`));
      if (r) { window.dispatchEvent(new Event("livingrag:refresh")); showInfo(`experience #${id} expired`); }
    } }, "Expire now"),
    h("button.danger", { type: "button", onclick: async () => {
      if (!window.confirm(`Delete experience #${id}? This cannot be undone.`)) return;
      const r = await attempt(() => del(`/v1/experiences/${id}`).then(() => true));
      if (r) { showInfo(`experience #${id} deleted`); location.hash = "#/experiences"; }
    } }, "Delete"));
  const node = h("article.experience", { "aria-labelledby": "exp-title" },
    h("h1#exp-title", {}, `Experience #${e.id} `, badge(st)),
    h("dl.facts", {},
      h("dt", {}, "Question"), h("dd.question", {}, e.query),
      h("dt", {}, "Answer"), h("dd.answer", {}, e.answer),
      h("dt", {}, "Vouched by"), h("dd.vouched", {}, `${originText(e)} · `, trustNode(e)),
      e.trust_reason ? [h("dt", {}, "Why"), h("dd", {}, e.trust_reason, e.trust_at ? h("small", {}, ` (${fmtTime(e.trust_at)})`) : null)] : null,
      h("dt", {}, "Gate score (heuristic)"), h("dd.gate-score", {}, fmtNum(e.confidence), " ", h("small.hint", {}, GS_HINT)),
      h("dt", {}, "Created"), h("dd", {}, `${fmtTime(e.created_at)} (${fmtAge(e.created_at)} ago)`),
      h("dt", {}, "Expires"), h("dd", {}, fmtTime(e.expires_at)),
      h("dt", {}, "Uses"), h("dd", {}, `${e.fusion_uses} fused, ${e.scaffold_uses} as scaffold or finding, ${e.answer_uses} as the answer given again; last ${fmtTime(e.last_used_at)}`),
      h("dt", {}, "Corpus"), h("dd", {}, h("a", { href: `#/corpus/${e.corpus_id}` }, `#${e.corpus_id}`), `, version ${e.corpus_version}`),
      e.stale_reason ? [h("dt", {}, "Stale because"), h("dd", {}, e.stale_reason)] : null),
    actions,
    trustForm(e, id),
    h("h2", {}, "Summary (the scaffold text)"), h("pre.summary", {}, e.summary),
    h("h2", {}, `Activation map (${e.activation.length} entities)`), activation,
    h("h2", {}, `Cited passages (${e.cited_passages.length})`), cited,
    claims.length ? table("Claims checked at write-back", ["Claim", "Source", "g", "Passage"], claims) : null,
    h("h2", {}, "History"), history);
  return { title: `Experience #${id}`, node };
}
