// Live metric charts (uPlot): one chart per metric, one series per rank and attempt (rank 0 bold,
// the other ranks toggleable, the attempts before the latest faded: a restart is a new line, not a
// jump in the old one), x by step or wall time, an exponential moving average drawn over the faint raw
// line (off by default where it would mislead: short series and step-like ones such as a learning
// rate schedule; a per-chart checkbox overrides), the latest raw values in the legend, the min/max band of the server's buckets where it downsampled (mode=band), markers for
// attempts and checkpoints, hover values, and a zoom (drag) that re-fetches the range at full
// detail. Memory stays bounded while it streams: each series thins its oldest half past a cap.
// Reported values that are not numbers (strings, booleans, lists, ...) are not charted: the
// latest of each (name, rank) shows in a table above the charts.
import uPlot from 'uplot';
import { api } from './api.js';
import { h, clear, fmt, loading, errorBox, empty, table } from './ui.js';

export const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#4b5563', '#ea580c'];
const BUCKETS = 600; // buckets per series for the overview
const ZOOM_POINTS = 4000; // points per series inside a zoomed range
const SERIES_CAP = 2000; // live points kept per series before the oldest half is thinned
const REDRAW_MS = 250; // live points are drawn at most 4 times a second
const SMOOTH_MIN_POINTS = 50; // shorter series are drawn raw unless smoothing is asked for
const SMOOTH_MIN_CHANGES = 0.5; // fewer changes between neighbours than this: step-like, raw

function color(rank, alpha) {
  const c = COLORS[rank % COLORS.length];
  if (alpha === undefined) return c;
  const n = parseInt(c.slice(1), 16);
  return `rgba(${n >> 16},${(n >> 8) & 255},${n & 255},${alpha})`;
}

function ema(ys, w) {
  const out = new Array(ys.length);
  let acc = null;
  let debias = 0;
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (y === null || y === undefined || !Number.isFinite(y)) {
      out[i] = null;
      continue;
    }
    if (w <= 0) {
      out[i] = y;
      continue;
    }
    acc = acc === null ? 0 : acc;
    acc = acc * w + (1 - w) * y;
    debias = debias * w + (1 - w);
    out[i] = acc / debias; // TensorBoard's debiased EMA: no pull towards 0 at the start
  }
  return out;
}

// uPlot.join for tables whose x each ascend strictly (every series here, but for odd steps): one
// merge of the sorted x columns instead of a Set, a sort and a Map over every x, the most of a
// live redraw of 8 ranks. Same result: missing values undefined, nulls kept.
export function join(tables) {
  const k = tables.length;
  if (k === 1) return tables[0];
  for (const t of tables) {
    const x = t[0];
    for (let i = 1; i < x.length; i++) if (!(x[i] > x[i - 1])) return uPlot.join(tables);
  }
  const xs = [];
  const at = tables.map((t) => new Int32Array(t[0].length)); // each x's index in xs
  const head = new Int32Array(k);
  for (;;) {
    let min = null;
    for (let t = 0; t < k; t++) {
      const x = tables[t][0];
      if (head[t] < x.length && (min === null || x[head[t]] < min)) min = x[head[t]];
    }
    if (min === null) break;
    const j = xs.push(min) - 1;
    for (let t = 0; t < k; t++) {
      const x = tables[t][0];
      if (head[t] < x.length && x[head[t]] === min) at[t][head[t]++] = j;
    }
  }
  const data = [xs];
  tables.forEach((t, ti) => {
    const idx = at[ti];
    for (let c = 1; c < t.length; c++) {
      const ys = t[c];
      const out = new Array(xs.length).fill(undefined);
      for (let i = 0; i < ys.length; i++) out[idx[i]] = ys[i];
      data.push(out);
    }
  });
  return data;
}

// One series (one rank of one attempt): parallel arrays, x ascending.
function newSeries(rank, attempt) {
  return { rank, attempt, x: [], y: [], min: [], max: [], t: [], banded: false, lastT: -Infinity };
}
const keyOf = (rank, attempt) => `${rank}/${attempt ?? 1}`;

function thin(s) {
  const half = s.x.length >> 1;
  for (const k of ['x', 'y', 'min', 'max', 't']) {
    const a = s[k];
    const kept = [];
    for (let i = 0; i < half; i += 2) kept.push(a[i]);
    s[k] = kept.concat(a.slice(half));
  }
}

export class MetricCharts {
  constructor(container, jobId) {
    this.el = container;
    this.job = jobId;
    this.xMode = 'step';
    this.smooth = 0.6;
    this.metrics = new Map(); // name → {series: Map(rank/attempt → series), plot, box, hidden:Set of ranks}
    this.others = new Map(); // "name\u0000rank" → {name, rank, value, step, t}: not numbers
    this.othersBox = h('div', { class: 'metric-values', hidden: true });
    this.markers = { attempts: [], checkpoints: [] };
    this.zoomed = new Map(); // name → [min, max]
    this.dirty = new Set();
    this.raf = 0;
    this.width = 600;
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(container);
    // The end of a drag (uPlot's own mouseup, on the document, has already applied the zoom):
    // the live points held back meanwhile are drawn now, unless the chart is zoomed.
    this.onMouseUp = () => {
      for (const m of this.metrics.values()) {
        if (!m.dragging) continue;
        m.dragging = false;
        if (m.stale && !this.zoomed.has(m.name)) this.dirty.add(m.name);
      }
      this.schedule();
    };
    window.addEventListener('mouseup', this.onMouseUp);
    this.firstDrawn = false;
  }

  destroy() {
    cancelAnimationFrame(this.raf);
    clearTimeout(this.wait);
    this.ro.disconnect();
    window.removeEventListener('mouseup', this.onMouseUp);
    for (const m of this.metrics.values()) if (m.plot) m.plot.destroy();
    this.metrics.clear();
  }

  xOf(step, k, timeMs) {
    if (this.xMode === 'time') return timeMs / 1000;
    return step !== null && step !== undefined ? step : k;
  }

  // Loads every series (each cut by the server into BUCKETS min/max buckets) and draws the
  // charts. With several ranks, rank 0 (the bold series) comes first and is drawn at once; the
  // other ranks follow in parallel requests (at most 4 at a time) and join the charts as they come.
  async load(worldSize = 1) {
    this.worldSize = worldSize;
    const gen = (this.gen = (this.gen || 0) + 1);
    clear(this.el, loading('Loading metrics…'));
    for (const m of this.metrics.values()) if (m.plot) m.plot.destroy();
    this.metrics.clear();
    this.others.clear();
    this.zoomed.clear();
    const get = async (rank) => {
      const q = rank === null ? '' : `&rank=${rank}`;
      const r = await api('GET', `/jobs/${this.job}/metrics?mode=band&max_points=${BUCKETS}${q}`);
      return r.metrics;
    };
    try {
      if (worldSize <= 1) {
        const rows = await get(null);
        if (gen !== this.gen) return;
        this.merge(rows);
        this.drawAll();
      } else {
        const rows = await get(0);
        if (gen !== this.gen) return;
        this.merge(rows);
        this.drawAll();
        const rest = [];
        for (let r = 1; r < worldSize; r++) rest.push(r);
        const next = async () => {
          while (rest.length) {
            const r = rest.shift();
            const more = await get(r);
            if (gen !== this.gen) return;
            for (const name of this.merge(more)) this.dirty.add(name);
            this.schedule();
          }
        };
        await Promise.all([next(), next(), next(), next()]);
      }
      if (gen === this.gen) document.body.dataset.allRanks = String(performance.now());
    } catch (e) {
      if (gen === this.gen) clear(this.el, errorBox(e, () => this.load(worldSize)));
    }
  }

  // Merges buckets from the server (any names and ranks) under the live points already held:
  // those older than the buckets' last one are in the buckets and go. Returns the names touched.
  merge(rows) {
    const fresh = new Map(); // "name\u0000rank/attempt" → series
    for (const b of rows) {
      if (b.last !== null && typeof b.last !== 'number') {
        this.noteOther(b.name, b.rank, b.last, b.step_last, Date.parse(b.end));
        continue;
      }
      const key = `${b.name}\u0000${keyOf(b.rank, b.attempt)}`;
      if (!fresh.has(key)) fresh.set(key, { name: b.name, s: newSeries(b.rank, b.attempt ?? 1) });
      this.addBucket(fresh.get(key).s, b);
    }
    const names = new Set();
    for (const { name, s } of fresh.values()) {
      const m = this.metricOf(name);
      const key = keyOf(s.rank, s.attempt);
      const old = m.series.get(key);
      if (old) {
        for (let i = 0; i < old.x.length; i++) {
          if (old.t[i] <= s.lastT) continue;
          for (const k of ['x', 'y', 'min', 'max', 't']) s[k].push(old[k][i]);
          s.lastT = old.t[i];
        }
      } else if (m.plot) {
        m.rebuild = true;
      }
      m.series.set(key, s);
      names.add(name);
    }
    return names;
  }

  // A value that is not a number: the table keeps the latest of its (name, rank).
  noteOther(name, rank, value, step, t) {
    const key = `${name}\u0000${rank}`;
    const old = this.others.get(key);
    if (old && old.t > t) return;
    this.others.set(key, { name, rank, value, step, t });
    this.othersDirty = true;
  }

  drawOthers() {
    this.othersDirty = false;
    const rows = [...this.others.values()].sort((a, b) => a.name.localeCompare(b.name) || a.rank - b.rank);
    this.othersBox.hidden = rows.length === 0;
    clear(this.othersBox, rows.length ? table([
      { title: 'Name', cell: (r) => r.name },
      { title: 'Rank', cell: (r) => String(r.rank) },
      { title: 'Step', cell: (r) => fmt.num(r.step) },
      { title: 'Value', cell: (r) => fmt.value(r.value) },
    ], rows, { caption: 'Latest reported values that are not numbers' }) : null);
  }

  metricOf(name) {
    let m = this.metrics.get(name);
    if (!m) {
      m = { name, series: new Map(), plot: null, box: null, hidden: new Set(), legend: null };
      this.metrics.set(name, m);
    }
    return m;
  }

  seriesOf(m, rank, attempt) {
    const key = keyOf(rank, attempt);
    let s = m.series.get(key);
    if (!s) {
      s = newSeries(rank, attempt ?? 1);
      m.series.set(key, s);
      if (m.plot) m.rebuild = true;
    }
    return s;
  }

  addBucket(s, b) {
    const t = Date.parse(b.end);
    const x = this.xMode === 'time' ? t / 1000 : b.step_last;
    if (x === null || x === undefined || b.last === null) return;
    s.x.push(x);
    s.y.push(b.last);
    const banded = b.count > 1 && b.min !== b.max;
    s.min.push(banded ? b.min : null);
    s.max.push(banded ? b.max : null);
    s.t.push(t);
    if (banded) s.banded = true;
    s.lastT = Math.max(s.lastT, t);
  }

  // A live `report` event of the job stream.
  addReport(d) {
    const t = Date.parse(d.time);
    const x = this.xOf(d.step, d.k, t);
    for (const [name, v] of Object.entries(d.metrics || {})) {
      if (typeof v !== 'number') {
        if (v !== null) this.noteOther(name, d.rank, v, d.step, t);
        continue;
      }
      const m = this.metricOf(name);
      const s = this.seriesOf(m, d.rank, d.attempt);
      if (t <= s.lastT) continue; // already read from the REST reply
      s.lastT = t;
      if (s.x.length && x < s.x[s.x.length - 1]) continue; // out of order: wait for a reload
      s.x.push(x);
      s.y.push(v);
      s.min.push(null);
      s.max.push(null);
      s.t.push(t);
      if (s.x.length > SERIES_CAP) thin(s);
      this.dirty.add(name);
    }
    this.schedule();
  }

  setMarkers(attempts, checkpoints) {
    this.markers = { attempts, checkpoints };
    for (const m of this.metrics.values()) if (m.plot) m.plot.redraw(false, false);
  }

  // Redraws the charts with new points on the next frame, at most every REDRAW_MS: rebuilding a
  // chart's aligned data costs the same for one new point as for forty.
  schedule() {
    if (this.raf || this.wait) return;
    const since = performance.now() - (this.lastDraw || 0);
    this.wait = setTimeout(() => {
      this.wait = 0;
      this.raf = requestAnimationFrame(() => {
        this.raf = 0;
        const t0 = (this.lastDraw = performance.now());
        for (const name of this.dirty) this.update(this.metrics.get(name));
        this.dirty.clear();
        if (this.othersDirty) {
          if (!this.othersBox.isConnected) this.el.prepend(this.othersBox);
          this.drawOthers();
        }
        // Each live redraw's time, the last 5000 (bench/dashboard.mjs reads them).
        const times = (window.tyRedrawMs ||= []);
        if (times.push(performance.now() - t0) > 5000) times.shift();
      });
    }, Math.max(0, REDRAW_MS - since));
  }

  // The chart's series keys in drawing order: older attempts first (under the latest), and in
  // each attempt the ranks last to first, so that the latest attempt's rank 0 (bold) is on top.
  keys(m) {
    return [...m.series.values()].sort((a, b) => a.attempt - b.attempt || b.rank - a.rank).map((s) => keyOf(s.rank, s.attempt));
  }

  // The latest attempt with points in the chart.
  lastAttempt(m) {
    let a = 1;
    for (const s of m.series.values()) a = Math.max(a, s.attempt);
    return a;
  }

  // Whether smoothing suits the chart: its longest series of the latest attempt is long enough
  // and changes between most neighbouring points (not a step schedule). Smoothing a short or
  // step-like series only moves its values (a final accuracy, an lr step turned into a ramp).
  smoothAuto(m) {
    const last = this.lastAttempt(m);
    let longest = null;
    for (const s of m.series.values()) if (s.attempt === last && (!longest || s.y.length > longest.y.length)) longest = s;
    if (!longest || longest.y.length < SMOOTH_MIN_POINTS) return false;
    let changes = 0;
    for (let i = 1; i < longest.y.length; i++) if (longest.y[i] !== longest.y[i - 1]) changes++;
    return changes / (longest.y.length - 1) >= SMOOTH_MIN_CHANGES;
  }

  // The smoothing weight of the chart: the slider's where smoothing is on, else 0 (raw).
  weight(m) {
    const on = m.smoothUser ?? this.smoothAuto(m);
    if (m.smoothCb) m.smoothCb.checked = on;
    if (m.box && m.box.dataset.smoothed !== String(on)) m.box.dataset.smoothed = String(on);
    return on ? this.smooth : 0;
  }

  // The chart's aligned data, series in keys() order.
  data(m) {
    const keys = this.keys(m);
    const w = this.weight(m);
    const tables = keys.map((k) => {
      const s = m.series.get(k);
      return [s.x, s.y, ema(s.y, w), s.min, s.max];
    });
    if (!tables.length) return { keys, data: [[]] };
    return { keys, data: join(tables) };
  }

  drawAll() {
    clear(this.el, this.othersBox);
    this.drawOthers();
    if (this.metrics.size === 0 && this.others.size === 0) {
      this.el.append(empty('No metrics reported yet. Charts appear with the first report.'));
      this.emptyShown = true;
      return;
    }
    this.emptyShown = false;
    for (const m of [...this.metrics.values()].sort((a, b) => a.name.localeCompare(b.name))) this.create(m);
  }

  create(m) {
    if (m.plot) m.plot.destroy();
    if (!m.box) {
      m.legend = h('div', { class: 'chart-legend' });
      m.toggles = h('div', { class: 'chart-toggles' });
      m.plotBox = h('div', { class: 'chart-plot' });
      const sid = `s-${m.name}`.replace(/[^A-Za-z0-9_-]/g, '_');
      m.smoothCb = h('input', { type: 'checkbox', id: sid, onchange: () => {
        m.smoothUser = m.smoothCb.checked;
        if (m.plot && !this.zoomed.has(m.name)) m.plot.setData(this.data(m).data, false);
      } });
      m.box = h('figure', { class: 'chart card', dataset: { metric: m.name } },
        h('figcaption', {}, h('span', { class: 'chart-title' }, m.name), m.toggles,
          h('label', { for: sid, class: 'smooth-toggle', title: 'an exponential moving average over the raw line (the slider sets its weight)' }, m.smoothCb, 'smooth'),
          h('button', { type: 'button', class: 'link reset-zoom', hidden: true, onclick: () => this.resetZoom(m) }, 'Reset zoom')),
        m.plotBox, m.legend);
    }
    if (!m.box.isConnected) this.el.append(m.box);
    m.box.dataset.x = this.xMode;
    const { keys, data } = this.data(m);
    m.keys = keys;
    m.ranks = [...new Set(keys.map((k) => m.series.get(k).rank))];
    const last = this.lastAttempt(m);
    const series = [{ label: this.xMode === 'time' ? 'time' : 'step' }];
    const bands = [];
    const labels = [];
    keys.forEach((k) => {
      const { rank: r, attempt: a, banded } = m.series.get(k);
      const base = series.length;
      const show = !m.hidden.has(r);
      const old = a < last; // an earlier attempt: faded, thin
      const label = `rank ${r} attempt ${a}`;
      labels.push(label);
      series.push({ label: `${label} raw`, stroke: color(r, old ? 0.12 : 0.3), width: 1, show, spanGaps: true, points: { show: false } });
      series.push({ label, stroke: old ? color(r, 0.4) : color(r), width: r === 0 && !old ? 3 : 1.25, dash: old ? [5, 3] : undefined, show, spanGaps: true, points: { show: false } });
      series.push({ label: `${label} min`, stroke: 'transparent', show, points: { show: false } });
      series.push({ label: `${label} max`, stroke: 'transparent', show, points: { show: false } });
      if (banded) bands.push({ series: [base + 3, base + 2], fill: color(r, old ? 0.06 : 0.14) });
    });
    // The series drawn (for the browser tests: data-series on the figure).
    m.box.dataset.series = labels.join(',');
    const self = this;
    const opts = {
      width: this.chartWidth(),
      height: 220,
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: true } },
      scales: { x: { time: this.xMode === 'time' } },
      axes: [{ stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.15)' } }, { stroke: 'currentColor', size: 60, grid: { stroke: 'rgba(128,128,128,0.15)' } }],
      series,
      bands,
      hooks: {
        setCursor: [(u) => self.hover(m, u)],
        setScale: [(u, key) => { if (key === 'x') self.onZoom(m, u); }],
        draw: [(u) => self.drawMarkers(m, u)],
      },
    };
    m.plot = new uPlot(opts, data, m.plotBox);
    m.tip = h('div', { class: 'marker-tip', hidden: true });
    m.plot.over.append(m.tip);
    m.plot.over.addEventListener('mousedown', () => { m.dragging = true; });
    this.count(m);
    this.latest(m);
    m.rebuild = false;
    this.renderToggles(m);
    if (!this.firstDrawn && data[0].length) {
      this.firstDrawn = true;
      performance.mark('ty-first-chart');
      document.body.dataset.firstChart = String(performance.now());
    }
  }

  // The points held (for the browser tests and the benchmark: data-points on the figure).
  count(m) {
    let n = 0;
    for (const s of m.series.values()) n += s.x.length;
    m.box.dataset.points = String(n);
  }

  renderToggles(m) {
    clear(m.toggles, [...m.ranks].sort((a, b) => a - b).map((r) => {
      const id = `t-${m.name}-${r}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const cb = h('input', { type: 'checkbox', id, checked: !m.hidden.has(r), onchange: () => {
        if (cb.checked) m.hidden.delete(r); else m.hidden.add(r);
        m.keys.forEach((k, j) => {
          if (m.series.get(k).rank !== r) return;
          for (let i = 0; i < 4; i++) m.plot.setSeries(1 + j * 4 + i, { show: cb.checked });
        });
      } });
      return h('label', { for: id, class: 'rank-toggle', style: undefined }, cb, h('span', { class: `swatch c${r % COLORS.length}` }), `rank ${r}`);
    }));
  }

  update(m) {
    if (!m) return;
    // A zoomed chart keeps its zoom (and the zoom's full-detail points) while points arrive, and
    // a drag in progress is not disturbed: a redraw then would reset the x scale under the drag.
    // The points are held and drawn when the zoom is reset or the drag ends.
    if (m.plot && (this.zoomed.has(m.name) || m.dragging)) {
      m.stale = true;
      return;
    }
    m.stale = false;
    if (!m.plot || m.rebuild || this.emptyShown) {
      if (this.emptyShown) this.drawAll();
      else this.create(m);
      return;
    }
    m.plot.setData(this.data(m).data);
    this.count(m);
    this.latest(m);
    if (!this.firstDrawn) {
      this.firstDrawn = true;
      document.body.dataset.firstChart = String(performance.now());
    }
  }

  // The legend while the cursor is off the chart: each rank's latest raw value (of the latest
  // attempt), the true last number whatever the smoothing draws.
  latest(m) {
    if (m.hovering) return;
    const last = this.lastAttempt(m);
    const now = [...m.series.values()].filter((s) => s.attempt === last && s.y.length).sort((a, b) => a.rank - b.rank);
    clear(m.legend, now.length ? h('span', { class: 'hover-x' }, 'latest') : null, now.map((s) =>
      h('span', { class: 'latest-v', dataset: { rank: s.rank } }, h('span', { class: `swatch c${s.rank % COLORS.length}` }), `rank ${s.rank}: ${fmt.num(s.y[s.y.length - 1])}`)));
  }

  // The label of the marker within 6 px of the cursor, if any, above the plot.
  markerTip(m, u) {
    if (!m.tip) return;
    const left = u.cursor.left;
    let near = null;
    if (left !== undefined && left >= 0) {
      for (const p of m.markerPos || []) if (Math.abs(p.left - left) <= 6 && (!near || Math.abs(p.left - left) < Math.abs(near.left - left))) near = p;
    }
    m.tip.hidden = !near;
    if (near) {
      m.tip.textContent = near.label;
      m.tip.style.left = `${Math.round(near.left) + 6}px`;
    }
  }

  hover(m, u) {
    this.markerTip(m, u);
    const i = u.cursor.idx;
    if (i === null || i === undefined) {
      m.hovering = false;
      this.latest(m);
      return;
    }
    m.hovering = true;
    const x = u.data[0][i];
    const xs = this.xMode === 'time' ? new Date(x * 1000).toLocaleTimeString() : `step ${x}`;
    const several = new Set(m.keys.map((k) => m.series.get(k).attempt)).size > 1;
    const order = m.keys.map((k, j) => ({ s: m.series.get(k), j })).sort((a, b) => b.s.attempt - a.s.attempt || a.s.rank - b.s.rank);
    clear(m.legend, h('span', { class: 'hover-x' }, xs), order.map(({ s, j }) => {
      const raw = u.data[1 + j * 4 + 0][i];
      const sm = u.data[1 + j * 4 + 1][i];
      if (raw === null || raw === undefined) return null;
      const who = several ? `rank ${s.rank} (attempt ${s.attempt})` : `rank ${s.rank}`;
      return h('span', { class: 'hover-v' }, h('span', { class: `swatch c${s.rank % COLORS.length}` }), `${who}: ${fmt.num(sm)} (raw ${fmt.num(raw)})`);
    }));
  }

  // Draws the attempt and checkpoint markers inside the x range, each a dashed line with a flag,
  // its label shown when the cursor is near it (markerTip). The markers drawn are also listed in
  // the figure's data-markers, with their x in data-marker-at and their pixel offsets in
  // data-marker-pos (for tests and tools that cannot read a canvas).
  drawMarkers(m, u) {
    const ctx = u.ctx;
    const { top, height } = u.bbox;
    const marks = [];
    const drawn = [];
    const at = []; // "label@x" (data-marker-at)
    for (const a of this.markers.attempts) marks.push({ x: this.xMode === 'time' ? a.t / 1000 : this.attemptStep(m, a.attempt), label: `attempt ${a.attempt}`, color: '#dc2626' });
    for (const c of this.markers.checkpoints) marks.push({ x: this.xMode === 'time' ? c.t / 1000 : c.step, label: c.label, color: '#16a34a' });
    const pos = []; // {label, left}: CSS pixels from the plot area's left edge (the hover label)
    ctx.save();
    for (const mk of marks) {
      if (mk.x === null || mk.x === undefined) continue;
      const px = u.valToPos(mk.x, 'x', true);
      if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) continue;
      ctx.strokeStyle = mk.color;
      ctx.fillStyle = mk.color;
      ctx.setLineDash([4, 4]);
      ctx.beginPath();
      ctx.moveTo(px, top);
      ctx.lineTo(px, top + height);
      ctx.stroke();
      // A small flag on top; the label shows on hover (labels side by side smear over the ticks).
      const f = 5 * devicePixelRatio;
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.moveTo(px - f, top);
      ctx.lineTo(px + f, top);
      ctx.lineTo(px, top + f * 1.5);
      ctx.closePath();
      ctx.fill();
      drawn.push(mk.label);
      pos.push({ label: mk.label, left: (px - u.bbox.left) / devicePixelRatio });
      at.push(`${mk.label}@${mk.x}`);
    }
    ctx.restore();
    m.markerPos = pos;
    const posJson = JSON.stringify(pos.map((p) => ({ label: p.label, left: Math.round(p.left) })));
    if (m.box.dataset.markerPos !== posJson) m.box.dataset.markerPos = posJson;
    const list = drawn.join(',');
    if (m.box.dataset.markers !== list) m.box.dataset.markers = list;
    if (m.box.dataset.markerAt !== at.join(',')) m.box.dataset.markerAt = at.join(',');
  }

  // Where attempt `a` begins on the step axis: the first step any rank of it reported (not where
  // the attempt before it ended). Null while it has no point in this chart.
  attemptStep(m, a) {
    let x = null;
    for (const s of m.series.values()) if (s.attempt === a && s.x.length && (x === null || s.x[0] < x)) x = s.x[0];
    return x;
  }

  // A drag zoom: re-fetch the range at full detail, by step (step_min/step_max) or by wall time
  // (time_min/time_max, epoch seconds).
  // A zoom's reply older than the chart's latest zoom (or reset) is dropped.
  async onZoom(m, u) {
    if (this.loadingZoom) return;
    const { min, max } = u.scales.x;
    const all = u.data[0];
    if (!all.length) return;
    const full = min <= all[0] && max >= all[all.length - 1];
    if (full) {
      // uPlot's double-click reset: back to the overview's points, with those held meanwhile.
      if (this.zoomed.has(m.name)) this.resetZoom(m);
      return;
    }
    m.box.querySelector('.reset-zoom').hidden = false;
    this.zoomed.set(m.name, [min, max]);
    m.box.dataset.zoomed = 'true';
    const gen = (m.zoomGen = (m.zoomGen || 0) + 1);
    const range = this.xMode === 'time'
      ? { time_min: (Math.floor(min * 1000) / 1000).toFixed(3), time_max: (Math.ceil(max * 1000) / 1000).toFixed(3) }
      : { step_min: String(Math.floor(min)), step_max: String(Math.ceil(max)) };
    const q = new URLSearchParams({ name: m.name, mode: 'band', max_points: String(ZOOM_POINTS), ...range });
    try {
      const r = await api('GET', `/jobs/${this.job}/metrics?${q}`);
      if (gen !== m.zoomGen || !this.zoomed.has(m.name) || u !== m.plot) return;
      const tmp = new Map();
      for (const b of r.metrics) {
        const k = keyOf(b.rank, b.attempt);
        if (!tmp.has(k)) tmp.set(k, newSeries(b.rank, b.attempt));
        this.addBucket(tmp.get(k), b);
      }
      const w = this.weight(m);
      const tables = m.keys.map((k) => {
        const s = tmp.get(k) || newSeries();
        return [s.x, s.y, ema(s.y, w), s.min, s.max];
      });
      this.loadingZoom = true;
      u.setData(join(tables), false);
      u.setScale('x', { min, max });
      this.loadingZoom = false;
      m.box.dataset.zoomPoints = String(r.metrics.length);
    } catch {
      this.loadingZoom = false;
    }
  }

  resetZoom(m) {
    this.zoomed.delete(m.name);
    m.zoomGen = (m.zoomGen || 0) + 1;
    m.box.querySelector('.reset-zoom').hidden = true;
    m.box.dataset.zoomed = 'false';
    if (m.rebuild) {
      this.create(m);
      return;
    }
    this.loadingZoom = true;
    m.plot.setData(this.data(m).data, true);
    this.loadingZoom = false;
    this.count(m);
    this.latest(m);
  }

  setSmoothing(w) {
    this.smooth = w;
    for (const m of this.metrics.values()) if (m.plot && !this.zoomed.has(m.name)) m.plot.setData(this.data(m).data, false);
  }

  async setXMode(mode) {
    this.xMode = mode;
    await this.load(this.worldSize);
  }

  chartWidth() {
    const w = this.el.clientWidth || 600;
    return Math.max(260, w >= 1100 ? Math.floor((w - 16) / 2) - 24 : w - 24);
  }

  resize() {
    const w = this.chartWidth();
    if (w === this.width) return;
    this.width = w;
    for (const m of this.metrics.values()) if (m.plot) m.plot.setSize({ width: w, height: 220 });
  }
}
