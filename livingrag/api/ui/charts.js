// Hand-drawn SVG line charts (no library): one or more series over days, with axes, a legend, a
// title and description for screen readers, and the numbers as a table beside it.
import { fmtNum, h, s, table } from "./dom.js";

const W = 560, H = 220, L = 52, R = 16, T = 16, B = 34;
const COLORS = ["#2563eb", "#d97706", "#059669", "#dc2626"];

let uid = 0;

/** rows: [{day, ...}], series: [[key, label]]; returns a <figure>. */
export function lineChart(title, rows, series, { unit = "" } = {}) {
  const id = `chart${++uid}`;
  const fig = h("figure.chart", { "aria-labelledby": `${id}-cap` }, h("figcaption", { id: `${id}-cap` }, title));
  if (!rows.length) {
    fig.append(h("p.empty", {}, "No data yet."));
    return fig;
  }
  const values = rows.flatMap((r) => series.map(([k]) => r[k]).filter((v) => v !== null && v !== undefined));
  const max = Math.max(1e-9, ...values);
  const n = rows.length;
  const x = (i) => (n === 1 ? L + (W - L - R) / 2 : L + (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${id}-t ${id}-d`, class: "chart-svg" },
    s("title", { id: `${id}-t` }, title),
    s("desc", { id: `${id}-d` }, `${series.map(([, l]) => l).join(", ")} for ${n} day(s), ${rows[0].day} to ${rows[n - 1].day}; the highest value is ${fmtNum(max)}${unit}.`),
    s("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }),
    s("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }),
    [0, 0.5, 1].map((f) => [
      s("line", { x1: L, y1: y(max * f), x2: W - R, y2: y(max * f), class: "grid" }),
      s("text", { x: L - 6, y: y(max * f) + 4, "text-anchor": "end", class: "tick" }, fmtNum(max * f, 1)),
    ]),
    [0, n - 1].filter((v, i, a) => a.indexOf(v) === i).map((i) =>
      s("text", { x: x(i), y: H - B + 18, "text-anchor": n === 1 ? "middle" : i === 0 ? "start" : "end", class: "tick" }, String(rows[i].day))),
    series.map(([k], si) => {
      const pts = rows.map((r, i) => [i, r[k]]).filter(([, v]) => v !== null && v !== undefined);
      return [
        s("polyline", { points: pts.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), fill: "none", stroke: COLORS[si % 4], "stroke-width": 2 }),
        pts.map(([i, v]) => s("circle", { cx: x(i), cy: y(v), r: 3, fill: COLORS[si % 4] }, s("title", {}, `${rows[i].day}: ${fmtNum(v)}${unit}`))),
      ];
    }));
  const legend = h("ul.legend", {}, series.map(([, label], si) =>
    h("li", {}, s("svg", { width: 12, height: 12, "aria-hidden": "true" }, s("rect", { width: 12, height: 12, fill: COLORS[si % 4] })), ` ${label}`)));
  const data = h("details", {}, h("summary", {}, "The numbers"),
    table(title, ["Day", ...series.map(([, l]) => l)], rows.map((r) => [String(r.day), ...series.map(([k]) => fmtNum(r[k]))])));
  fig.append(svg, legend, data);
  return fig;
}
