// Experiences: a filterable, paginated table; an experience's page (question, answer, summary,
// ranked activation map, cited passages and whether they changed); expire, delete, and prune with
// a dry-run preview of what would go before it is applied.
import { del, get, post, qs } from "../api.js";
import { append, clear, field, fmtAge, fmtNum, fmtTime, h, statusOf, table } from "../dom.js";
import { attempt, showInfo } from "../messages.js";
import { badge, corpora, corpusSelect, expLink } from "./common.js";

const PAGE = 20;

function rowsOf(items, names) {
  return items.map((e) => [
    expLink(e.id, `#${e.id}`), e.query, badge(statusOf(e)), fmtNum(e.confidence), fmtAge(e.created_at),
    String(e.fusion_uses + e.scaffold_uses), names[e.corpus_id] || `#${e.corpus_id}`,
  ]);
}

const COLUMNS = ["Id", "Question", "Status", "Confidence", "Age", "Uses", "Corpus"];

function readState() {
  const p = new URLSearchParams(location.hash.split("?")[1] || "");
  return { corpus_id: p.get("corpus_id") || "", status: p.get("status") || "", min_confidence: p.get("min_confidence") || "", offset: Number(p.get("offset") || 0) };
}

export async function experiencesView() {
  const cs = await corpora();
  const names = Object.fromEntries(cs.map((c) => [c.id, c.name]));
  const state = readState();
  const [corpusField, corpus] = corpusSelect(cs, { selected: state.corpus_id, any: true });
  const [statusField, status] = field("Status", h("select", { name: "status" },
    ["", "active", "stale", "expired"].map((s) => h("option", { value: s, selected: s === state.status }, s || "Any status"))));
  const [confField, minConf] = field("Minimum confidence", h("input", { type: "number", min: 0, max: 1, step: 0.05, name: "min_confidence", value: state.min_confidence }));
  const filters = h("form.filters.card", { "aria-label": "Filter experiences" }, corpusField, statusField, confField, h("button", { type: "submit" }, "Filter"));
  const results = h("div#experience-table", { "aria-live": "polite" });

  async function load(offset) {
    const params = { corpus_id: corpus.value, status: status.value, min_confidence: minConf.value, limit: PAGE, offset };
    const page = await attempt(() => get(`/v1/experiences${qs(params)}`));
    if (!page) return;
    const nav = h("nav.pager", { "aria-label": "Pages" },
      h("button", { type: "button", disabled: offset === 0, onclick: () => load(Math.max(0, offset - PAGE)) }, "Previous page"),
      h("span", {}, page.items.length ? ` ${offset + 1}–${offset + page.items.length} ` : " none "),
      h("button", { type: "button", disabled: page.next_offset === null, onclick: () => load(page.next_offset) }, "Next page"));
    clear(results).append(
      page.items.length ? table("Experiences, newest first", COLUMNS, rowsOf(page.items, names), "experiences") : h("p", {}, "No experience matches."),
      nav);
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
  const [confField, minConf] = field("Below confidence", h("input", { type: "number", min: 0, max: 1, step: 0.05, name: "prune-min-confidence" }));
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

export async function experienceView(id) {
  const e = await get(`/v1/experiences/${id}/details`);
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
      h("dt", {}, "Confidence (GS)"), h("dd", {}, fmtNum(e.confidence)),
      h("dt", {}, "Created"), h("dd", {}, `${fmtTime(e.created_at)} (${fmtAge(e.created_at)} ago)`),
      h("dt", {}, "Expires"), h("dd", {}, fmtTime(e.expires_at)),
      h("dt", {}, "Uses"), h("dd", {}, `${e.fusion_uses} fused, ${e.scaffold_uses} as scaffold or finding; last ${fmtTime(e.last_used_at)}`),
      h("dt", {}, "Corpus"), h("dd", {}, h("a", { href: `#/corpus/${e.corpus_id}` }, `#${e.corpus_id}`), `, version ${e.corpus_version}`),
      e.stale_reason ? [h("dt", {}, "Stale because"), h("dd", {}, e.stale_reason)] : null),
    actions,
    h("h2", {}, "Summary (the scaffold text)"), h("pre.summary", {}, e.summary),
    h("h2", {}, `Activation map (${e.activation.length} entities)`), activation,
    h("h2", {}, `Cited passages (${e.cited_passages.length})`), cited,
    claims.length ? table("Claims checked at write-back", ["Claim", "Source", "g", "Passage"], claims) : null);
  return { title: `Experience #${id}`, node };
}
