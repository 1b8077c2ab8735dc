// Ask: a question over one corpus in the linear or living mode; the answer and its explanation,
// whether it was served from memory (and whether a person verified that experience), the passages
// with the sentences that ground the answer highlighted, the fused experiences (with weights) and
// the scaffold, tokens, cost, the latency breakdown, then the write-back decision; and a person's
// verdict on the answer: Right, Wrong, or the right answer (POST /v1/queries/{id}/feedback).
// The answer is streamed (POST /v1/ask with "stream": true): the model's text shows as it is made.
import { ApiError, get, post, requestHeaders, responseError } from "../api.js";
import { append, clear, field, fmtNum, h, table } from "../dom.js";
import { attempt, clearError, showError } from "../messages.js";
import { badge, corpora, corpusSelect, expLink, trustNode } from "./common.js";

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

const PENDING_TRIES = 30;

/** Send a verdict; while the question's write-back is still pending (409 writeback_pending) wait
 * for Retry-After and send it again, saying so in ``status``. */
async function sendVerdict(queryId, body, status) {
  for (let i = 0; ; i++) {
    try {
      return await post(`/v1/queries/${queryId}/feedback`, body);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 409 && err.code === "writeback_pending" && i < PENDING_TRIES)) throw err;
      clear(status).append(h("p.loading", { role: "status" }, "The write-back of this answer is still being decided; sending the verdict again in a moment…"));
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

function outcomeNode(o) {
  const ids = (label, list) => (list.length ? h("li", {}, `${label}: `, list.map((id, i) => [i ? ", " : "", expLink(id, `#${id}`)])) : null);
  const check = o.check
    ? h("p.check", {}, `Your answer was checked against the passages by the ${o.check.verifier} verifier: `,
      o.check.grounded ? badge("supported by the passages", "ok") : badge("no passage supports it", "bad"),
      o.check.gs === null ? "" : ` (GS ${fmtNum(o.check.gs)})`,
      o.check.grounded ? "" : "; it is kept as your word, never shown as grounded.")
    : null;
  return h("div.outcome", { "data-verdict": o.verdict },
    h("p", {}, o.repeated ? "You gave this verdict before: " : "Thank you: ", badge(o.verdict === "right" ? "marked right" : "marked wrong", o.verdict === "right" ? "ok" : "bad"),
      o.answer ? [" with the answer ", h("strong", {}, o.answer)] : null),
    h("ul.messages-list", { "aria-label": "What the verdict did" }, o.messages.map((m) => h("li", {}, m))),
    h("ul.ids", {},
      ids("Verified", o.verified_ids), ids("Retracted", o.retracted_ids),
      o.stored_experience_id ? h("li", {}, "Stored: ", expLink(o.stored_experience_id)) : null),
    check);
}

/** Right / Wrong and "Correct it" for the answer of question ``queryId``. */
function feedbackNode(queryId, answer) {
  const status = h("div.feedback-outcome", { "aria-live": "polite" });
  const buttons = [];
  const send = async (body) => {
    for (const b of buttons) b.disabled = true;
    clear(status).append(h("p.loading", { role: "status" }, "Sending your verdict…"));
    try {
      const o = await sendVerdict(queryId, body, status);
      clear(status).append(outcomeNode(o));
      return o;
    } catch (err) {
      clear(status);
      showError(err instanceof ApiError ? err : { status: 0, message: String(err) });
      return null;
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  };
  const right = h("button.ok", { type: "button", onclick: () => send({ verdict: "right" }) }, "Right");
  const wrong = h("button.danger", { type: "button", onclick: () => send({ verdict: "wrong" }) }, "Wrong");
  const [corrField, correction] = field("Correct it", h("input", { type: "text", name: "correction", maxlength: 2000, autocomplete: "off" }),
    "The right answer: it replaces this one in memory (verified), checked against the passages.");
  const submit = h("button", { type: "submit" }, "Send correction");
  buttons.push(right, wrong, submit);
  const form = h("form.correct", { "aria-label": "Correct the answer" }, corrField, submit);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = correction.value.trim();
    if (!text) { correction.focus(); return; }
    const o = await send({ verdict: "wrong", answer: text });
    if (o) correction.value = "";
  });
  return h("section.card.feedback", { "aria-labelledby": "feedback-title" },
    h("h3#feedback-title", {}, "Was this answer right?"),
    h("p.hint", {}, `Your verdict on “${answer}” decides what memory keeps and serves: right verifies it, wrong retracts it so it is never served for this question again.`),
    h("div.buttons", { role: "group", "aria-label": "Verdict" }, right, wrong), form, status);
}

/** Where the answer came from: given again from an experience (with its trust), or the LLM. */
function servedNode(a) {
  if (!a.reused_from) return null;
  const trust = h("span.served-trust", {}, "…");
  const node = h("p.served", {}, "Served from memory: the answer of ", expLink(a.reused_from),
    ", given again without an LLM call; ", trust, ".");
  get(`/v1/experiences/${a.reused_from}`).then((e) => clear(trust).append(trustNode(e)), () => clear(trust).append("its trust could not be read"));
  return node;
}

function modelTextNode(text) {
  if (!text) return null;
  return h("details.model-text", {}, h("summary", {}, "The model's text, as it was written"), h("pre", {}, text));
}

function resultNode(q, a, modelText) {
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
    servedNode(a),
    h("h3", {}, "Explanation"), h("p.explanation", {}, a.explanation || "–"),
    modelTextNode(modelText),
    a.query_log_id ? feedbackNode(a.query_log_id, a.answer) : null,
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

/** Server-sent events of a streamed ``POST /v1/ask``: calls ``onEvent(kind, data)`` for each
 * ``token`` and ``restart``, and returns the ``answer`` event's data; an ``error`` event, or an
 * error status before the stream began, is thrown as an ApiError. */
export async function askStreamed(body, onEvent) {
  const headers = requestHeaders({ accept: "text/event-stream", json: true });
  clearError();
  let res;
  try {
    res = await fetch("/v1/ask", { method: "POST", headers, body: JSON.stringify({ ...body, stream: true }) });
  } catch (exc) {
    throw new ApiError(0, "network", `the server did not answer (${exc.message})`);
  }
  if (!res.ok) throw await responseError(res);
  if (!(res.headers.get("content-type") || "").startsWith("text/event-stream")) {
    throw new ApiError(res.status, "error", `the server answered ${res.headers.get("content-type")}, not a stream`);
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      const payload = data ? JSON.parse(data) : null;
      if (kind === "answer") return payload;
      if (kind === "error") {
        const err = (payload && payload.error) || {};
        throw new ApiError(payload.status || 500, err.code || "error", err.message || "the answer failed");
      }
      onEvent(kind, payload);
    }
  }
  throw new ApiError(0, "network", "the answer's stream ended before the answer");
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
    const status = h("p.loading", { role: "status" }, "Answering…");
    const text = h("pre.stream", { "aria-label": "The model's text as it is written" });
    clear(out).append(status, text);
    let written = "";
    const onEvent = (kind, data) => {
      if (kind === "token") {
        written += data.text;
        text.textContent = written;
        status.textContent = "The model is writing…";
      } else if (kind === "restart") {
        written = "";
        text.textContent = "";
        status.textContent = `Asked again: ${data.reason}`;
      }
    };
    const q = question.value;
    const a = await attempt(() => askStreamed({ question: q, corpus: Number(corpus.value), mode }, onEvent));
    submit.disabled = false;
    clear(out);
    if (a) out.append(resultNode(q, a, written));
  });
  return { title: "Ask", node: h("section", {}, h("h1", {}, "Ask"), form, out) };
}
