// An entity's neighbourhood drawn as a small radial graph in SVG: the entity in the middle, its
// passages on the inner ring, the entities that share them on the outer ring; linked entities are
// links (keyboard-focusable) to their own neighbourhood.
import { s } from "./dom.js";

const W = 640, H = 480, CX = W / 2, CY = H / 2;

function ring(n, radius, offset = 0) {
  return Array.from({ length: n }, (_, i) => {
    const a = offset + (2 * Math.PI * i) / Math.max(n, 1) - Math.PI / 2;
    return [CX + radius * Math.cos(a), CY + radius * Math.sin(a)];
  });
}

function short(text, n = 18) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** n: the NeighbourhoodOut JSON; hrefFor(entityId) gives a linked entity's address. */
export function neighbourhoodGraph(n, hrefFor) {
  const passages = n.passages.slice(0, 12);
  const linked = n.linked.slice(0, 18);
  const pPos = new Map(passages.map((p, i) => [p.id, ring(passages.length, 120)[i]]));
  const ePos = ring(linked.length, 205, Math.PI / Math.max(linked.length, 1));
  const edges = [];
  for (const [, [x, y]] of pPos) edges.push(s("line", { x1: CX, y1: CY, x2: x, y2: y, class: "edge" }));
  linked.forEach((e, i) => {
    for (const pid of e.passage_ids) {
      const p = pPos.get(pid);
      if (p) edges.push(s("line", { x1: p[0], y1: p[1], x2: ePos[i][0], y2: ePos[i][1], class: "edge edge-2" }));
    }
  });
  return s("svg", { viewBox: `0 0 ${W} ${H}`, class: "graph", role: "group", "aria-label": `Graph around ${n.entity.name}: ${passages.length} passages, ${linked.length} linked entities` },
    edges,
    passages.map((p) => {
      const [x, y] = pPos.get(p.id);
      return s("g", { class: "node passage-node", "data-passage": p.id },
        s("rect", { x: x - 7, y: y - 7, width: 14, height: 14 }),
        s("text", { x, y: y + 22, "text-anchor": "middle" }, short(p.title || `#${p.id}`)),
        s("title", {}, `passage #${p.id}: ${p.title}`));
    }),
    linked.map((e, i) => {
      const [x, y] = ePos[i];
      return s("a", { href: hrefFor(e.id), class: "node entity-node", "data-entity": e.id, "aria-label": `${e.name}, ${e.shared} shared passage(s)` },
        s("circle", { cx: x, cy: y, r: 6 + Math.min(6, e.shared * 2) }),
        s("text", { x, y: y - 12, "text-anchor": "middle" }, short(e.name)),
        s("title", {}, `${e.name} (${e.label || "entity"}), ${e.shared} shared passage(s)`));
    }),
    s("g", { class: "node centre-node" },
      s("circle", { cx: CX, cy: CY, r: 16 }),
      s("text", { x: CX, y: CY + 32, "text-anchor": "middle", class: "centre-label" }, short(n.entity.name, 28))));
}
