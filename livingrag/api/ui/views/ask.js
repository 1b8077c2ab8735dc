// Ask: a question over one corpus in the linear or living mode; the answer and its explanation,
// the passages with the sentences that ground the answer highlighted, the fused experiences (with
// weights) and the scaffold, tokens, cost, the latency breakdown, then the write-back decision.
import { get, post } from "../api.js";
import { append, clear, field, fmtNum, h, table } from "../dom.js";
import { attempt } from "../messages.js";
import { badge, corpora, corpusSelect, expLink } from "./common.js";

const STOP = new Set("the a an of in on at to and or is was were by for with as from that this its it his her their be been who what which when where whom".split(" "));

function words(text) {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) || []).filter((w) => w.length > 2 && !STOP.has(w));
}

export function splitSentences(text) {
  return text.match(/[^.!?]+(?:[.!?]+|$)\s*/g) || [text];
}

/** Whether a passage sentence grounds the answer: it contains the answer, or most of its content
 * words occur in the answer's explanation. */
export function grounds(sentence, answer, explanation) {
  const low = sentence.toLowerCase();
  const ans = answer.trim().toLowerCase();
  if (ans.length > 2 && ans !== "unknown" && low.includes(ans)) return true;
  const ws = words(sentence);
  if (ws.length < 3) return false;
  const ex = new Set(words(explanation));
  return ws.filter((w) => ex.has(w)).length / ws.length >= 0.6;
}

/** Whether a passage sentence is the evidence a verified claim was checked against. */
export function isEvidence(sentence, evidence) {
  const s = sentence.trim();
  return s.length > 0 && (evidence || []).some((e) => e && (e.includes(s) || s.includes(e.trim())));
}

function passageNode(p, i, answer, explanation, claimed) {
  const evidence = claimed.get(p.id);
  const sentences = splitSentences(p.text).map((t) => {
    if (evidence && isEvidence(t, evidence)) return h("mark.evidence", { title: "evidence of a verified claim" }, t);
    return grounds(t, answer, explanation) ? h("mark", { title: "grounds the answer" }, t) : t;
  });
  return h("li.passage", { "data-passage": p.id },
    h("h4", {}, `[${i + 1}] ${p.title || "(untitled)"} `, h("small", {}, `passage #${p.id}, score ${fmtNum(p.score)}`),
      claimed.has(p.id) ? badge("cited by a verified claim", "claim") : null),
    h("p", {}, sentences));
}

function latencyBars(lat) {
  const total = lat.total || Object.values(lat).reduce((a, b) => a + b, 0) || 1;
  const stages = Object.entries(lat).filter(([k]) => k !== "total" && k !== "overhead");
  return h("div", {},
    h("h3", {}, `Latency: ${fmtNum(lat.total, 1)} ms in all`),
    h("ul.bars", { "aria-label": "Latency by stage" },
      stages.map(([k, v]) => h("li", {},
        h("span.bar-label", {}, k),
        h("meter", { min: 0, max: total, value: v, "aria-label": `${k}: ${fmtNum(v, 1)} ms` }),
        h("span.bar-value", {}, `${fmtNum(v, 1)} ms`)))));
}

function writebackNode(wb) {
  if (wb.decision === "pending") return h("p", {}, "Write-back: pending (the worker has not decided yet)…");
  if (wb.decision === "none") return h("p", {}, "Write-back: none (the linear mode, or an answer given again, writes nothing back).");
  const label = {
    stored: "stored",
    rejected_novelty: "rejected by novelty",
    rejected_grounding: "rejected by grounding",
    error: "error",
    dropped: "dropped (queue full)",
  }[wb.decision] || wb.decision;
  const rows = (wb.claims || []).map((c) => [c.claim, c.source || "–", fmtNum(c.g), c.passage_id ? `#${c.passage_id}` : "–",
    c.g !== null && c.g >= wb.tau_nli ? badge("supported", "ok") : badge("not supported", "bad")]);
  return h("div", {},
    h("p", {}, "Write-back: ", badge(label, wb.decision),
      wb.experience_id ? [" as ", expLink(wb.experience_id)] : null),
    h("p", {}, `NS (novelty) ${fmtNum(wb.novelty)} against τ_novel ${wb.tau_novel}; GS (grounding) ${fmtNum(wb.grounding)} against τ_GS ${wb.tau_gs}`,
      wb.stage ? `; stage: ${wb.stage}` : "", wb.reason ? `; ${wb.reason}` : ""),
    rows.length ? table(`Each claim's verdict (supported when g ≥ τ_NLI ${wb.tau_nli})`, ["Claim", "Source", "g", "Passage", "Verdict"], rows) : null);
}

async function pollWriteback(queryLogId, slot, onClaims) {
  for (let i = 0; i < 60; i++) {
    const wb = await attempt(() => get(`/v1/queries/${queryLogId}/writeback`));
    if (!wb) return;
    clear(slot).append(writebackNode(wb));
    if (wb.decision !== "pending") {
      const claimed = new Map();
      for (const c of (wb.claims || []).filter((c) => c.g >= wb.tau_nli && c.passage_id)) {
        claimed.set(c.passage_id, [...(claimed.get(c.passage_id) || []), c.evidence]);
      }
      onClaims(claimed);
      return;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

function resultNode(q, a) {
  const passages = h("ol.passages", { "aria-label": "Retrieved passages" });
  const draw = (claimed) => append(clear(passages), a.passages.map((p, i) => passageNode(p, i, a.answer, a.explanation, claimed)));
  draw(new Map());
  const wbSlot = h("div#writeback", { "aria-live": "polite" });
  const fused = a.fused_experiences.length
    ? table("Fused experiences", ["Experience", "Earlier question", "Weight", "Score"],
      a.fused_experiences.map((x) => [expLink(x.id, `#${x.id}`), x.query, fmtNum(x.weight), fmtNum(x.score)]), "fused")
    : h("p", {}, a.system === "linear" ? "No experiences are used in the linear mode." : "No experience was fused for this question.");
  const node = h("section.result", { "aria-labelledby": "answer-title" },
    h("h2#answer-title", {}, "Answer"),
    h("p.answer", {}, a.answer),
    a.reused_from ? h("p", {}, "Given again from ", expLink(a.reused_from), " (a repeated question: no LLM call).") : null,
    h("h3", {}, "Explanation"), h("p.explanation", {}, a.explanation || "–"),
    h("h3", {}, "Experiences"), fused,
    h("p", {}, "Scaffold: ", a.scaffold ? [expLink(a.scaffold.experience_id), ` (score ${fmtNum(a.scaffold.score)}, template similarity ${fmtNum(a.scaffold.template_similarity)})`] : "none"),
    a.finding_experience_ids.length ? h("p", {}, "Findings: ", a.finding_experience_ids.map((id) => [expLink(id), " "])) : null,
    h("h3", {}, "Cost"),
    h("p.tokens", {}, `${a.prompt_tokens} prompt + ${a.completion_tokens} completion tokens; cost $${fmtNum(a.cost_usd, 6)}; system ${a.system}`),
    latencyBars(a.latency_ms),
    h("h3", {}, "Write-back decision"), wbSlot,
    h("h3", {}, `Retrieved passages (${a.passages.length})`),
    h("p.hint", {}, "Highlighted: the sentences that ground the answer (they contain it, or most of their words are in the explanation); once the write-back is decided, the evidence sentences of its verified claims (outlined)."),
    passages);
  if (a.query_log_id) pollWriteback(a.query_log_id, wbSlot, draw);
  else wbSlot.append(h("p", {}, "Write-back: none."));
  return node;
}

export async function askView() {
  const items = await corpora();
  if (!items.length) {
    return { title: "Ask", node: h("section", {}, h("h1", {}, "Ask"),
      h("p", {}, "This tenant has no corpus yet. ", h("a", { href: "#/corpus" }, "Create one and add passages"), " first.")) };
  }
  const [corpusField, corpus] = corpusSelect(items);
  const [qField, question] = field("Question", h("textarea", { name: "question", rows: 2, required: true, maxlength: 4000 }));
  const modes = h("fieldset.modes", {}, h("legend", {}, "Mode"),
    ["living", "linear"].map((m) => h("label", {}, h("input", { type: "radio", name: "mode", value: m, checked: m === "living" }), ` ${m}`)));
  const out = h("div#ask-result");
  const submit = h("button", { type: "submit" }, "Ask");
  const form = h("form.card", { "aria-label": "Ask a question" }, corpusField, qField, modes, submit);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const mode = form.querySelector("input[name=mode]:checked").value;
    submit.disabled = true;
    clear(out).append(h("p.loading", { role: "status" }, "Answering…"));
    const a = await attempt(() => post("/v1/ask", { question: question.value, corpus: Number(corpus.value), mode }));
    submit.disabled = false;
    clear(out);
    if (a) out.append(resultNode(question.value, a));
  });
  return { title: "Ask", node: h("section", {}, h("h1", {}, "Ask"), form, out) };
}
