// Health of the store: per-corpus totals (experience_health, experience_reuse_coverage) and charts
// of store growth (experience_store_growth), gate pass rates per day (the write-back log), and the
// query log (latency percentiles, tokens per question).
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
  const node = h("section", {}, h("h1", {}, "Store health"), form, totals,
    h("div.charts", {},
      lineChart("Store growth: experiences stored (cumulative)", hd.growth, [["cumulative_stored", "stored, cumulative"], ["candidates", "candidates that day"], ["written", "written that day"]]),
      lineChart("Gate pass rates per day (%)", hd.gates, [["ns_pass_pct", "novelty (NS) pass %"], ["gs_pass_pct", "grounding (GS) pass %"]], { unit: "%" }),
      lineChart("Latency percentiles per day (ms)", hd.queries, [["p50_ms", "p50"], ["p90_ms", "p90"], ["p99_ms", "p99"]], { unit: " ms" }),
      lineChart("Tokens per question per day", hd.queries, [["prompt_tokens", "prompt tokens"], ["completion_tokens", "completion tokens"]])));
  return { title: "Store health", node };
}
