// Resource-use charts (uPlot) from GET /jobs/{id}/usage and /nodes/{id}/usage: the samples the
// agents take of each worker's cgroup, about one per worker every 10 s. A job gets a CPU % chart
// and a memory chart with one line per rank (its current attempt), read once and then grown by
// the job stream's `usage` rows (each the same object the API returns); a node one small chart of
// its workers together, re-read every 10 s while shown.
import uPlot from 'uplot';
import { api } from './api.js';
import { h, clear, fmt, errorBox, empty } from './ui.js';
import { COLORS } from './chart.js';

export const USAGE_REFRESH_MS = 10000;
const AXES = [{ stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.15)' } }, { stroke: 'currentColor', size: 70, grid: { stroke: 'rgba(128,128,128,0.15)' } }];

function plot(fig, title, ranks, xs, ys, value, height) {
  const width = Math.max(280, fig.parentElement ? fig.parentElement.clientWidth - 24 : 600);
  clear(fig, h('figcaption', {}, title));
  return new uPlot({
    width, height, legend: { show: true }, scales: { x: { time: true } }, axes: AXES,
    series: [{ label: 'time' }, ...ranks.map((r, i) => ({ label: typeof r === 'number' ? `rank ${r}` : r, stroke: COLORS[i % COLORS.length], width: i === 0 ? 2 : 1, spanGaps: true, points: { show: false }, value: (u, v) => (v == null ? '—' : value(v)) }))],
  }, [xs, ...ys], fig);
}

// uPlot keeps window listeners until destroyed: each redraw of a box destroys its old plots.
const plots = new WeakMap();
function reset(box, ...children) {
  for (const u of plots.get(box) || []) u.destroy();
  plots.set(box, []);
  clear(box, ...children);
}
function keep(box, u) {
  plots.get(box).push(u);
}

// Aligns per-series samples on one x array (uPlot's format): null where a series has no sample.
function align(series) {
  const xs = [...new Set(series.flatMap((s) => s.map((p) => p.t)))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  return [xs, (key) => series.map((s) => {
    const ys = new Array(xs.length).fill(null);
    for (const p of s) ys[at.get(p.t)] = p[key];
    return ys;
  })];
}

// The system charts of job `job` in `box`: per rank of its latest attempt, CPU % and memory. The
// samples are read once (load) and then added as the stream brings them (add); rows arriving
// before the read are merged in, each (attempt, rank, time) once.
export class JobUsage {
  constructor(box, job) {
    this.box = box;
    this.job = job;
    this.rows = null; // null until read
    this.pending = [];
    this.seen = new Set();
    this.stale = false;
  }

  async load() {
    let r;
    try {
      r = await api('GET', `/jobs/${this.job}/usage`);
    } catch (e) {
      reset(this.box, errorBox(e, () => this.load()));
      return;
    }
    this.rows = [];
    this.seen.clear();
    for (const u of [...(r.usage || []), ...this.pending]) this.keep(u);
    this.pending = [];
    this.draw();
  }

  keep(u) {
    const key = `${u.attempt}/${u.rank}/${u.time}`;
    if (this.seen.has(key)) return false;
    this.seen.add(key);
    this.rows.push(u);
    return true;
  }

  // A live `usage` row's data: drawn at once while the box is shown, else at the next show().
  add(u) {
    if (!this.rows) {
      this.pending.push(u);
      return;
    }
    if (!this.keep(u)) return;
    this.rows.sort((a, b) => Date.parse(a.time) - Date.parse(b.time));
    if (this.box.hidden) this.stale = true;
    else this.draw();
  }

  // The tab is shown: the first time reads the samples, later ones draw what arrived meanwhile.
  show() {
    if (!this.rows) this.load();
    else if (this.stale) this.draw();
  }

  draw() {
    this.stale = false;
    drawJobUsage(this.box, this.rows);
  }
}

function drawJobUsage(box, rows) {
  if (!rows.length) {
    reset(box, empty('No resource samples yet: the agent samples workers that run in a cgroup of their own, about every 10 s.'));
    return;
  }
  const attempt = Math.max(...rows.map((u) => u.attempt));
  const byRank = new Map();
  for (const u of rows) {
    if (u.attempt !== attempt) continue;
    if (!byRank.has(u.rank)) byRank.set(u.rank, []);
    byRank.get(u.rank).push({ t: Date.parse(u.time) / 1000, cpu: u.cpu_percent, mem: u.memory_bytes / 1048576 });
  }
  const ranks = [...byRank.keys()].sort((a, b) => a - b);
  const [xs, ys] = align(ranks.map((k) => byRank.get(k)));
  const cpu = h('figure', { class: 'chart usage-chart', id: 'usage-cpu', dataset: { points: String(xs.length) } });
  const mem = h('figure', { class: 'chart usage-chart', id: 'usage-memory', dataset: { points: String(xs.length) } });
  reset(box, h('p', { class: 'meta' }, `attempt ${attempt}: CPU in % of one CPU, memory its cgroup holds (page cache included)`), cpu, mem);
  keep(box, plot(cpu, 'CPU %', ranks, xs, ys('cpu'), (v) => `${v.toFixed(1)} %`, 200));
  keep(box, plot(mem, 'Memory (MiB)', ranks, xs, ys('mem'), (v) => fmt.bytes(v * 1048576), 200));
}

// Destroys the plots drawn in box (the page is leaving).
export function dropUsage(box) {
  for (const u of plots.get(box) || []) u.destroy();
  plots.delete(box);
}

// A node card's chart: the node's workers together over the last hour.
export async function renderNodeUsage(box, node) {
  let r;
  try {
    r = await api('GET', `/nodes/${encodeURIComponent(node)}/usage`);
  } catch (e) {
    reset(box, errorBox(e, () => renderNodeUsage(box, node)));
    return;
  }
  const rows = r.usage || [];
  if (!rows.length) {
    reset(box, h('p', { class: 'meta' }, 'No worker resource samples in the last hour.'));
    return;
  }
  const pts = rows.map((u) => ({ t: Date.parse(u.time) / 1000, cpu: u.cpu_percent, mem: u.memory_bytes / 1048576 }));
  const fig = h('figure', { class: 'chart usage-chart node-usage', dataset: { points: String(pts.length), node } });
  reset(box, fig);
  keep(box, plot(fig, 'Workers\' CPU % and memory (MiB), last hour', ['CPU %', 'memory MiB'], pts.map((p) => p.t), [pts.map((p) => p.cpu), pts.map((p) => p.mem)], (v) => v.toFixed(1), 140));
}
