// Corpus: create and pick corpora; passages (search, add, edit, delete); files uploaded (picked or
// dropped) and read as `livingrag index` reads them; background index jobs with their progress; an
// entity's neighbourhood in the graph.
import { del, get, patch, post, qs } from "../api.js";
import { clear, field, fmtNum, fmtTime, h, table } from "../dom.js";
import { neighbourhoodGraph } from "../graph.js";
import { attempt, showError, showInfo } from "../messages.js";
import { badge, corpora } from "./common.js";

const PAGE = 20;
/** The files the API reads as documents (livingrag.io.readers.DOCUMENT_SUFFIXES). */
const SUFFIXES = [".pdf", ".docx", ".html", ".htm", ".xhtml", ".md", ".markdown", ".txt", ".json", ".jsonl"];
const PASSAGE_CHARS = 200000; // PassageIn.text
const DOCUMENT_CHARS = 2000000; // DocumentIn.text

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
  const summary = h("small", {}, corpusSummary(c));
  const jobs = jobsSection(cid);
  const passages = await passagesSection(cid);
  const indexed = async () => {  // an upload's job ended: the counts, passages and jobs again
    jobs.refresh();
    passages.load(0);
    const now = await attempt(() => get(`/v1/corpora/${cid}`));
    if (now) summary.textContent = corpusSummary(now);
  };
  const node = h("section", {},
    h("h1", {}, `Corpus ${c.name} `, summary),
    picker,
    passages.node,
    uploadSection(cid, { submitted: jobs.refresh, indexed }),
    jobs.node,
    await entitySection(cid, entityId),
    createCorpusForm());
  return { title: `Corpus ${c.name}`, node };
}

function corpusSummary(c) {
  return `#${c.id}, version ${c.version}: ${c.counts.passages} passages, ${c.counts.sentences} sentences, ${c.counts.entities} entities`;
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
  const [textField, text] = field("Text", h("textarea", { name: "new-text", rows: 3, required: true, maxlength: PASSAGE_CHARS }));
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
  const node = h("section.card", { "aria-labelledby": "passages-title" }, h("h2#passages-title", {}, "Passages"), searchForm, results, add);
  return { node, load };
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
  const [titleField, title] = field("Document title", h("input", { type: "text", name: "job-title", maxlength: 1000 }));
  const [textField, text] = field("Document text (chunked when indexed)", h("textarea", { name: "job-text", rows: 4, required: true, maxlength: DOCUMENT_CHARS }));
  const list = h("div#jobs", { "aria-live": "polite" });
  let timer = null;
  async function refresh() {
    const jobs = await attempt(() => get("/v1/index-jobs"));
    if (!jobs) return;
    const mine = jobs.filter((j) => j.corpus_id === cid).slice(0, 10);
    clear(list).append(mine.length ? h("ul.jobs", {}, mine.map(jobNode)) : h("p", {}, "No index job for this corpus since the server started."));
    clearTimeout(timer);
    if (mine.some((j) => !FINISHED.has(j.state))) timer = setTimeout(refresh, 500);
  }
  const form = h("form", { "aria-label": "Index a document in the background" }, titleField, textField, h("button", { type: "submit" }, "Start index job"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const j = await attempt(() => post(`/v1/corpora/${cid}/index-jobs`, { documents: [{ title: title.value, text: text.value }] }));
    if (j) { title.value = ""; text.value = ""; refresh(); }
  });
  refresh();
  const node = h("section.card", { "aria-labelledby": "jobs-title" }, h("h2#jobs-title", {}, "Index jobs"), form, list);
  return { node, refresh };
}

const FINISHED = new Set(["succeeded", "failed"]);

/** A job's state, documents, result or error, and its progress per stage. */
function jobParts(j) {
  const stages = Object.entries(j.progress || {});
  return [
    h("p", {}, badge(j.state), ` job ${j.id.slice(0, 8)}: ${j.documents} document(s), created ${fmtTime(j.created_at)}`,
      j.result ? `; ${j.result.indexed} passage(s) indexed, ${j.result.new_entities} new entities` : "", j.error ? `; ${j.error}` : ""),
    stages.map(([name, v]) => h("div.stage", {},
      h("span.bar-label", {}, name),
      h("progress", { max: Math.max(v.total, 1), value: v.done, "aria-label": `${name}: ${v.done} of ${v.total}` }),
      h("span.bar-value", {}, `${v.done}/${v.total}`))),
  ];
}

function jobNode(j) {
  return h("li.job", { "data-job": j.id, "data-state": j.state }, jobParts(j));
}

// ---------------------------------------------------------------- uploads

export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${fmtNum(n / 1024, 1)} KiB`;
  return `${fmtNum(n / (1024 * 1024), 1)} MiB`;
}

/** Standard base64 of ``bytes`` (a Uint8Array), in slices small enough for fromCharCode. */
export function base64(bytes) {
  const parts = [];
  for (let i = 0; i < bytes.length; i += 0x8000) parts.push(String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000)));
  return btoa(parts.join(""));
}

/** The upload body of ``files``; a file the browser cannot read is named in the error. */
async function uploadBody(files) {
  const out = [];
  for (const f of files) {
    let bytes;
    try {
      bytes = new Uint8Array(await f.arrayBuffer());
    } catch (err) {
      throw new Error(`${f.name}: the browser could not read the file (${err.message || err})`);
    }
    out.push({ name: f.name, content_base64: base64(bytes) });
  }
  return { files: out };
}

/** Pick files (or drop them on the form), upload them to POST /v1/corpora/{id}/uploads, where they
 * are read as `livingrag index` reads them (every file first: one that cannot be read is named and
 * nothing is indexed), then watch the index job until it ends; ``submitted`` and ``indexed`` are
 * called when the job is queued and when it has ended. */
function uploadSection(cid, { submitted, indexed }) {
  let files = [];
  const [pickField, picker] = field("Files to upload",
    h("input", { type: "file", name: "files", multiple: true, accept: SUFFIXES.join(",") }),
    `PDF, Word (.docx), HTML, Markdown or text (${SUFFIXES.join(" ")}; a .json or .jsonl file's records one document each), read as \`livingrag index\` reads them: the title from the first heading, sections from the headings. Or drop the files on this box.`);
  const chosen = h("div.chosen", { "aria-live": "polite" });
  const status = h("div.upload-status", { "aria-live": "polite" });
  const submit = h("button", { type: "submit", disabled: true }, "Upload and index");
  const form = h("form.card.dropzone", { "aria-labelledby": "upload-title", "data-dropzone": "files" },
    h("h2#upload-title", {}, "Upload files"),
    h("p.drop-hint", {}, "Drop files here, or choose them:"), pickField, chosen, h("div.buttons", {}, submit), status);

  function choose(list) {
    files = Array.from(list || []);
    submit.disabled = !files.length;
    const total = files.reduce((a, f) => a + f.size, 0);
    clear(chosen);
    if (files.length) {
      chosen.append(h("ul.chosen-files", { "aria-label": "Files chosen" },
        files.map((f) => h("li", {}, `${f.name} (${fmtBytes(f.size)})`)),
        files.length > 1 ? h("li.total", {}, `${files.length} files, ${fmtBytes(total)} in all`) : null));
    }
  }
  picker.addEventListener("change", () => choose(picker.files));
  for (const type of ["dragenter", "dragover"]) {
    form.addEventListener(type, (ev) => {
      if (!ev.dataTransfer || !Array.from(ev.dataTransfer.types || []).includes("Files")) return;
      ev.preventDefault();
      ev.dataTransfer.dropEffect = "copy";
      form.classList.add("dragging");
    });
  }
  form.addEventListener("dragleave", (ev) => { if (!form.contains(ev.relatedTarget)) form.classList.remove("dragging"); });
  form.addEventListener("drop", (ev) => {
    ev.preventDefault();
    form.classList.remove("dragging");
    if (!ev.dataTransfer || !ev.dataTransfer.files.length) return;
    picker.value = "";
    choose(ev.dataTransfer.files);
    submit.focus();
  });

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!files.length) { picker.focus(); return; }
    const sending = files;
    const size = sending.reduce((a, f) => a + f.size, 0);
    submit.disabled = true;
    clear(status).append(h("p.loading", { role: "status" }, `Reading ${sending.length} file(s)…`));
    let job;
    try {
      const body = await uploadBody(sending);
      clear(status).append(h("p.loading", { role: "status" }, `Uploading ${sending.length} file(s), ${fmtBytes(size)}…`));
      job = await post(`/v1/corpora/${cid}/uploads`, body);
    } catch (err) {
      clear(status);
      submit.disabled = false;
      if (err.status === 413) {
        err.message = `${err.message}. The ${sending.length} file(s) are ${fmtBytes(size)} together, about a third more `
          + "once encoded for the upload: upload fewer or smaller files at a time.";
      }
      showError(err.status !== undefined ? err : { status: 0, title: "Cannot upload", message: err.message || String(err) });
      return;
    }
    picker.value = "";
    choose([]);
    submitted();
    await watchUpload(job, status);
    if (status.isConnected) indexed();
  });
  return form;
}

/** Draw the upload's job in ``status`` and poll GET /v1/index-jobs/{id} until it ends. */
async function watchUpload(first, status) {
  const read = first.files;
  let j = first;
  for (;;) {
    clear(status).append(uploadJobNode(j, read));
    if (FINISHED.has(j.state) || !status.isConnected) break;
    await new Promise((r) => setTimeout(r, 500));
    const next = await attempt(() => get(`/v1/index-jobs/${j.id}`));
    if (!next) return;
    j = next;
  }
  if (j.state === "succeeded") {
    showInfo(`${read.length} file(s) indexed: ${j.result.indexed} passage(s) new, ${j.result.skipped_existing} already present, ${j.result.new_entities} new entities`);
  } else if (j.state === "failed") {
    showError({ status: 0, title: "The index job failed", message: j.error || `job ${j.id} failed` });
  }
}

function uploadJobNode(j, read) {
  return h("div.upload-job", { "data-job": j.id, "data-state": j.state },
    jobParts(j),
    table("Files read", ["File", "Title", "Sections", "Size"], read.map((f) => [
      f.name,
      f.title_is_entity ? f.title : `${f.title} (the file's name: no heading gave a title)`,
      String(f.sections),
      fmtBytes(f.size_bytes),
    ]), "uploaded-files"));
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
