// Corpus: create and pick corpora; passages (search, add, edit, delete); background index jobs
// with their progress; an entity's neighbourhood in the graph.
import { del, get, patch, post, qs } from "../api.js";
import { clear, field, fmtTime, h, table } from "../dom.js";
import { neighbourhoodGraph } from "../graph.js";
import { attempt, showInfo } from "../messages.js";
import { badge, corpora } from "./common.js";

const PAGE = 20;

function createCorpusForm() {
  const [nameField, name] = field("New corpus name", h("input", { type: "text", name: "corpus-name", required: true, maxlength: 200 }));
  const form = h("form.card.inline", { "aria-label": "Create a corpus" }, nameField, h("button", { type: "submit" }, "Create corpus"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const c = await attempt(() => post("/v1/corpora", { name: name.value.trim() }));
    if (c) { showInfo(`corpus ${c.name} created`); location.hash = `#/corpus/${c.id}`; }
  });
  return form;
}

export async function corpusView(cid, entityId = null) {
  const cs = await corpora();
  const picker = h("nav.corpora", { "aria-label": "Corpora" }, h("ul", {}, cs.map((c) =>
    h("li", {}, h("a", { href: `#/corpus/${c.id}`, "aria-current": c.id === cid ? "page" : null }, `${c.name} (#${c.id})`)))));
  if (cid === null) {
    return { title: "Corpus", node: h("section", {}, h("h1", {}, "Corpora"),
      cs.length ? picker : h("p", {}, "No corpus yet."), createCorpusForm()) };
  }
  const c = await get(`/v1/corpora/${cid}`);
  const node = h("section", {},
    h("h1", {}, `Corpus ${c.name} `, h("small", {}, `#${c.id}, version ${c.version}: ${c.counts.passages} passages, ${c.counts.sentences} sentences, ${c.counts.entities} entities`)),
    picker,
    await passagesSection(cid),
    jobsSection(cid),
    await entitySection(cid, entityId),
    createCorpusForm());
  return { title: `Corpus ${c.name}`, node };
}

async function passagesSection(cid) {
  const [searchField, search] = field("Search passages", h("input", { type: "search", name: "passage-search" }));
  const results = h("div#passages", { "aria-live": "polite" });
  async function load(offset = 0) {
    const page = await attempt(() => get(`/v1/corpora/${cid}/passages${qs({ q: search.value.trim(), limit: PAGE, offset })}`));
    if (!page) return;
    const rows = page.items.map((p) => passageRow(cid, p, () => load(offset)));
    clear(results).append(
      page.items.length ? h("table.passages-table", {}, h("caption", {}, "Passages"),
        h("thead", {}, h("tr", {}, ["Id", "Title", "Text", "Actions"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, rows)) : h("p", {}, "No passage matches."),
      h("nav.pager", { "aria-label": "Passage pages" },
        h("button", { type: "button", disabled: offset === 0, onclick: () => load(Math.max(0, offset - PAGE)) }, "Previous page"),
        h("button", { type: "button", disabled: page.next_offset === null, onclick: () => load(page.next_offset) }, "Next page")));
  }
  const searchForm = h("form.filters", { "aria-label": "Search passages", role: "search" }, searchField, h("button", { type: "submit" }, "Search"));
  searchForm.addEventListener("submit", (ev) => { ev.preventDefault(); load(0); });
  const [titleField, title] = field("Title", h("input", { type: "text", name: "new-title", maxlength: 1000 }));
  const [textField, text] = field("Text", h("textarea", { name: "new-text", rows: 3, required: true }));
  const add = h("form.card", { "aria-labelledby": "add-title" }, h("h3#add-title", {}, "Add a passage (indexed now)"), titleField, textField, h("button", { type: "submit" }, "Add passage"));
  add.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const r = await attempt(() => post(`/v1/corpora/${cid}/passages`, { passages: [{ title: title.value, text: text.value }] }));
    if (r) {
      showInfo(`${r.indexed} passage(s) indexed, ${r.skipped_existing} already present`);
      title.value = ""; text.value = "";
      load(0);
    }
  });
  await load(0);
  return h("section.card", { "aria-labelledby": "passages-title" }, h("h2#passages-title", {}, "Passages"), searchForm, results, add);
}

function passageRow(cid, p, reload) {
  const tr = h("tr", { "data-passage": p.id });
  const show = () => clear(tr).append(
    h("td", {}, `#${p.id}`), h("td", {}, p.title), h("td.text", {}, p.text),
    h("td", {}, h("div.buttons", {},
      h("button", { type: "button", "aria-label": `Edit passage ${p.id}`, onclick: edit }, "Edit"),
      h("button.danger", { type: "button", "aria-label": `Delete passage ${p.id}`, onclick: remove }, "Delete"))));
  function edit() {
    const [tf, t] = field("Title", h("input", { type: "text", value: p.title, name: "edit-title" }));
    const [xf, x] = field("Text", h("textarea", { rows: 4, name: "edit-text" }));
    x.value = p.text;
    const form = h("form.edit", { "aria-label": `Edit passage ${p.id}` }, tf, xf,
      h("div.buttons", {}, h("button", { type: "submit" }, "Save"), h("button", { type: "button", onclick: show }, "Cancel")));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = {};
      if (t.value !== p.title) body.title = t.value;
      if (x.value !== p.text) body.text = x.value;
      if (!Object.keys(body).length) return show();
      const r = await attempt(() => patch(`/v1/corpora/${cid}/passages/${p.id}`, body));
      if (r) { showInfo(`passage #${p.id} saved (re-indexed; experiences citing it are now stale)`); reload(); }
    });
    clear(tr).append(h("td", { colspan: 4 }, form));
    t.focus();
  }
  async function remove() {
    if (!window.confirm(`Delete passage #${p.id}?`)) return;
    const r = await attempt(() => del(`/v1/corpora/${cid}/passages/${p.id}`));
    if (r) { showInfo(`passage #${p.id} deleted`); reload(); }
  }
  show();
  return tr;
}

function jobsSection(cid) {
  const [titleField, title] = field("Document title", h("input", { type: "text", name: "job-title" }));
  const [textField, text] = field("Document text (chunked when indexed)", h("textarea", { name: "job-text", rows: 4, required: true }));
  const list = h("div#jobs", { "aria-live": "polite" });
  let timer = null;
  async function refresh() {
    const jobs = await attempt(() => get("/v1/index-jobs"));
    if (!jobs) return;
    const mine = jobs.filter((j) => j.corpus_id === cid).slice(0, 10);
    clear(list).append(mine.length ? h("ul.jobs", {}, mine.map(jobNode)) : h("p", {}, "No index job for this corpus since the server started."));
    clearTimeout(timer);
    if (mine.some((j) => j.state === "queued" || j.state === "running")) timer = setTimeout(refresh, 500);
  }
  const form = h("form", { "aria-label": "Index a document in the background" }, titleField, textField, h("button", { type: "submit" }, "Start index job"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const j = await attempt(() => post(`/v1/corpora/${cid}/index-jobs`, { documents: [{ title: title.value, text: text.value }] }));
    if (j) { title.value = ""; text.value = ""; refresh(); }
  });
  refresh();
  return h("section.card", { "aria-labelledby": "jobs-title" }, h("h2#jobs-title", {}, "Index jobs"), form, list);
}

function jobNode(j) {
  const stages = Object.entries(j.progress || {});
  return h("li.job", { "data-job": j.id, "data-state": j.state },
    h("p", {}, badge(j.state), ` job ${j.id.slice(0, 8)}: ${j.documents} document(s), created ${fmtTime(j.created_at)}`,
      j.result ? `; ${j.result.indexed} passage(s) indexed, ${j.result.new_entities} new entities` : "", j.error ? `; ${j.error}` : ""),
    stages.map(([name, v]) => h("div.stage", {},
      h("span.bar-label", {}, name),
      h("progress", { max: Math.max(v.total, 1), value: v.done, "aria-label": `${name}: ${v.done} of ${v.total}` }),
      h("span.bar-value", {}, `${v.done}/${v.total}`))));
}

async function entitySection(cid, entityId) {
  const [searchField, search] = field("Find an entity", h("input", { type: "search", name: "entity-search" }));
  const found = h("div#entities", { "aria-live": "polite" });
  async function find() {
    const es = await attempt(() => get(`/v1/corpora/${cid}/entities${qs({ q: search.value.trim(), limit: 15 })}`));
    if (!es) return;
    clear(found).append(es.length ? h("ul.entity-list", {}, es.map((e) =>
      h("li", {}, h("a", { href: `#/corpus/${cid}/entities/${e.id}` }, e.name), ` ${e.label || ""} (${e.passages} passages)`)))
      : h("p", {}, "No entity matches."));
  }
  const form = h("form.filters", { role: "search", "aria-label": "Find an entity" }, searchField, h("button", { type: "submit" }, "Find"));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); find(); });
  const section = h("section.card", { "aria-labelledby": "graph-title" }, h("h2#graph-title", {}, "Entity graph"), form, found);
  if (entityId === null) {
    await find();
    return section;
  }
  const n = await get(`/v1/corpora/${cid}/entities/${entityId}`);
  section.append(
    h("h3#neighbourhood", {}, `Neighbourhood of ${n.entity.name}`, n.entity.label ? ` (${n.entity.label})` : ""),
    neighbourhoodGraph(n, (id) => `#/corpus/${cid}/entities/${id}`),
    table(`Passages mentioning ${n.entity.name}`, ["Passage", "Mentions", "Text"],
      n.passages.map((p) => [`#${p.id} ${p.title}`, String(p.mentions), p.text]), "entity-passages"),
    table(`Entities linked to ${n.entity.name}`, ["Entity", "Shared passages"],
      n.linked.map((e) => [h("a", { href: `#/corpus/${cid}/entities/${e.id}` }, e.name), String(e.shared)]), "linked"));
  return section;
}
