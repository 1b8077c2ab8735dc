// Health of the store: per-corpus totals (experience_health, experience_reuse_coverage) and charts
// of store growth (experience_store_growth), gate pass rates per day (the write-back log), and the
// query log (latency percentiles, tokens per question); the learned gate (GET /v1/gate): labels from
// people's verdicts, each calibrator's time-ordered held-out AUC and precision, thresholds, weights.
import { get, qs } from "../api.js";
import { fmtNum, h, table } from "../dom.js";
import { lineChart } from "../charts.js";
import { corpora, corpusSelect } from "./common.js";

export async function healthView() {
  const cs = await corpora();
  const names = Object.fromEntries(cs.map((c) => [c.id, c.name]));
  const selected = new URLSearchParams(location.hash.split("?")[1] || "").get("corpus_id") || "";
  const [corpusField, corpus] = corpusSelect(cs, { any: true, selected });
  const form = h("form.filters.card", { "aria-label": "Choose a corpus" }, corpusField, h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = `#/health${qs({ corpus_id: corpus.value })}`;
  });
  const hd = await get(`/v1/store/health${qs({ corpus_id: selected })}`);
  const totals = hd.corpora.length
    ? table("Experiences per corpus", ["Corpus", "Experiences", "Active", "Stale", "Expired", "Mean confidence", "Fusion coverage %", "Scaffold coverage %"],
      hd.corpora.map((c) => [names[c.corpus_id] || `#${c.corpus_id}`, String(c.experiences), String(c.active), String(c.stale),
        String(c.expired), fmtNum(c.avg_confidence), fmtNum(c.fusion_coverage_pct), fmtNum(c.scaffold_coverage_pct)]), "totals")
    : h("p", {}, "No experiences stored yet.");
  const gate = gatePanel(await get("/v1/gate?history=5"), names);
  const node = h("section", {}, h("h1", {}, "Store health"), form, totals, gate,
    h("div.charts", {},
      lineChart("Store growth: experiences stored (cumulative)", hd.growth, [["cumulative_stored", "stored, cumulative"], ["candidates", "candidates that day"], ["written", "written that day"]]),
      lineChart("Gate pass rates per day (%)", hd.gates, [["ns_pass_pct", "novelty (NS) pass %"], ["gs_pass_pct", "grounding (GS) pass %"]], { unit: "%" }),
      lineChart("Latency percentiles per day (ms)", hd.queries, [["p50_ms", "p50"], ["p90_ms", "p90"], ["p99_ms", "p99"]], { unit: " ms" }),
      lineChart("Tokens per question per day", hd.queries, [["prompt_tokens", "prompt tokens"], ["completion_tokens", "completion tokens"]])));
  return { title: "Store health", node };
}

function pct(x) {
  return x === null || x === undefined ? "–" : `${fmtNum(100 * x, 1)} %`;
}

/** The learned gate: whether a calibrator decides, what it was validated on, its thresholds and weights. */
function gatePanel(g, names) {
  const s = g.settings;
  const intro = h("p", {},
    `${g.labels.total} label(s) from verdicts (${g.labels.right} right). A calibrator is fitted once a tenant or corpus has `
    + `${s.learn_min_labels} labels and decides the write gate only when its time-ordered held-out AUC reaches ${s.learn_min_auc}; `
    + `it serves answers without a person's verdict (auto-verified) only where held-out precision reaches ${s.serve_min_precision}. `
    + `${g.auto_verified_experiences} experience(s) are auto-verified.`);
  const models = g.models.length
    ? table("Calibrators", ["Scope", "Version", "Labels", "Decides", "Held-out AUC", "Store at p ≥ (precision)", "Serve at p ≥ (precision)", "Fitted", "Why"],
      g.models.map((m) => [m.scope === "tenant" ? "all corpora" : (names[m.corpus_id] || `#${m.corpus_id}`), `v${m.version}`, String(m.labels),
        m.deciding ? "yes" : "no: the fixed gate decides", fmtNum(m.held_out.auc), m.store_threshold === null ? "–" : `${fmtNum(m.store_threshold)} (${pct(m.held_out.store_precision)})`,
        m.serve_threshold === null ? "–" : `${fmtNum(m.serve_threshold)} (${pct(m.held_out.serve_precision)})`, m.fitted_at.slice(0, 19), m.held_out.why || ""]), "gate-models")
    : h("p", {}, "No calibrator yet: the fixed gate decides (novelty, the answer form, GS ≥ τ_gs).");
  const current = g.models.find((m) => m.deciding) || g.models[0];
  const weights = current && current.weights
    ? table(`Feature weights (${current.scope} v${current.version}, standardised features)`, ["Feature", "Weight"],
      Object.entries(current.weights).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1])).map(([f, w]) => [f, fmtNum(w)]), "gate-weights")
    : null;
  return h("section.card.gate", { "aria-label": "Learned gate" }, h("h2", {}, "Learned gate"), intro, models, weights);
}
