// Live metric charts (uPlot): one chart per metric, one series per rank (rank 0 bold, the others
// toggleable), x by step or wall time, an exponential moving average drawn over the faint raw
// line, the min/max band of the server's buckets where it downsampled (mode=band), markers for
// attempts and checkpoints, hover values, and a zoom (drag) that re-fetches the range at full
// detail. Memory stays bounded while it streams: each series thins its oldest half past a cap.
// Reported values that are not numbers (strings, booleans, lists, ...) are not charted: the
// latest of each (name, rank) shows in a table above the charts.
import uPlot from 'uplot';
import { api } from './api.js';
import { h, clear, fmt, loading, errorBox, empty, table } from './ui.js';

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#4b5563', '#ea580c'];
const BUCKETS = 600; // buckets per series for the overview
const ZOOM_POINTS = 4000; // points per series inside a zoomed range
const SERIES_CAP = 2000; // live points kept per series before the oldest half is thinned
const REDRAW_MS = 250; // live points are drawn at most 4 times a second

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

// One series: parallel arrays, x ascending.
function newSeries() {
  return { x: [], y: [], min: [], max: [], t: [], banded: false, lastT: -Infinity };
}

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
    this.metrics = new Map(); // name → {series: Map(rank → series), plot, box, hidden:Set}
    this.others = new Map(); // "name\u0000rank" → {name, rank, value, step, t}: not numbers
    this.othersBox = h('div', { class: 'metric-values', hidden: true });
    this.markers = { attempts: [], checkpoints: [] };
    this.zoomed = new Map(); // name → [min, max]
    this.dirty = new Set();
    this.raf = 0;
    this.width = 600;
    this.ro = new ResizeObserver(() => this.resize());
    this.ro.observe(container);
    this.firstDrawn = false;
  }

  destroy() {
    cancelAnimationFrame(this.raf);
    clearTimeout(this.wait);
    this.ro.disconnect();
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
    const fresh = new Map(); // "name\u0000rank" → series
    for (const b of rows) {
      if (b.last !== null && typeof b.last !== 'number') {
        this.noteOther(b.name, b.rank, b.last, b.step_last, Date.parse(b.end));
        continue;
      }
      const key = `${b.name}\u0000${b.rank}`;
      if (!fresh.has(key)) fresh.set(key, { name: b.name, rank: b.rank, s: newSeries() });
      this.addBucket(fresh.get(key).s, b);
    }
    const names = new Set();
    for (const { name, rank, s } of fresh.values()) {
      const m = this.metricOf(name);
      const old = m.series.get(rank);
      if (old) {
        for (let i = 0; i < old.x.length; i++) {
          if (old.t[i] <= s.lastT) continue;
          for (const k of ['x', 'y', 'min', 'max', 't']) s[k].push(old[k][i]);
          s.lastT = old.t[i];
        }
      } else if (m.plot) {
        m.rebuild = true;
      }
      m.series.set(rank, s);
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

  seriesOf(m, rank) {
    let s = m.series.get(rank);
    if (!s) {
      s = newSeries();
      m.series.set(rank, s);
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
      const s = this.seriesOf(m, d.rank);
      if (t <= s.lastT) continue; // already read from the REST reply
      s.lastT = t;
      if (s.x.length && x < s.x[s.x.length - 1]) continue; // out of order (a restart): wait for a reload
      s.x.push(x);
      s.y.push(v);
      s.min.push(null);
      s.max.push(null);
      s.t.push(t);
      if (s.x.length > SERIES_CAP) thin(s);
      if (!this.zoomed.has(name)) this.dirty.add(name);
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
        this.lastDraw = performance.now();
        for (const name of this.dirty) this.update(this.metrics.get(name));
        this.dirty.clear();
        if (this.othersDirty) {
          if (!this.othersBox.isConnected) this.el.prepend(this.othersBox);
          this.drawOthers();
        }
      });
    }, Math.max(0, REDRAW_MS - since));
  }

  // The chart's aligned data. Ranks go last to first, so that rank 0 (bold) is drawn on top.
  data(m) {
    const ranks = [...m.series.keys()].sort((a, b) => b - a);
    const tables = ranks.map((r) => {
      const s = m.series.get(r);
      return [s.x, s.y, ema(s.y, this.smooth), s.min, s.max];
    });
    if (!tables.length) return { ranks, data: [[]] };
    return { ranks, data: tables.length === 1 ? tables[0] : uPlot.join(tables) };
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
      m.box = h('figure', { class: 'chart card', dataset: { metric: m.name } },
        h('figcaption', {}, h('span', { class: 'chart-title' }, m.name), m.toggles,
          h('button', { type: 'button', class: 'link reset-zoom', hidden: true, onclick: () => this.resetZoom(m) }, 'Reset zoom')),
        m.plotBox, m.legend);
    }
    if (!m.box.isConnected) this.el.append(m.box);
    m.box.dataset.x = this.xMode;
    const { ranks, data } = this.data(m);
    m.ranks = ranks;
    const series = [{ label: this.xMode === 'time' ? 'time' : 'step' }];
    const bands = [];
    ranks.forEach((r) => {
      const base = series.length;
      const show = !m.hidden.has(r);
      series.push({ label: `rank ${r} raw`, stroke: color(r, 0.3), width: 1, show, spanGaps: true, points: { show: false } });
      series.push({ label: `rank ${r}`, stroke: color(r), width: r === 0 ? 3 : 1.25, show, spanGaps: true, points: { show: false } });
      series.push({ label: `rank ${r} min`, stroke: 'transparent', show, points: { show: false } });
      series.push({ label: `rank ${r} max`, stroke: 'transparent', show, points: { show: false } });
      if (m.series.get(r).banded) bands.push({ series: [base + 3, base + 2], fill: color(r, 0.14) });
    });
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
    this.count(m);
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
        const base = 1 + m.ranks.indexOf(r) * 4;
        for (let i = 0; i < 4; i++) m.plot.setSeries(base + i, { show: cb.checked });
      } });
      return h('label', { for: id, class: 'rank-toggle', style: undefined }, cb, h('span', { class: `swatch c${r % COLORS.length}` }), `rank ${r}`);
    }));
  }

  update(m) {
    if (!m) return;
    if (!m.plot || m.rebuild || this.emptyShown) {
      if (this.emptyShown) this.drawAll();
      else this.create(m);
      return;
    }
    m.plot.setData(this.data(m).data);
    this.count(m);
    if (!this.firstDrawn) {
      this.firstDrawn = true;
      document.body.dataset.firstChart = String(performance.now());
    }
  }

  hover(m, u) {
    const i = u.cursor.idx;
    if (i === null || i === undefined) {
      clear(m.legend);
      return;
    }
    const x = u.data[0][i];
    const xs = this.xMode === 'time' ? new Date(x * 1000).toLocaleTimeString() : `step ${x}`;
    clear(m.legend, h('span', { class: 'hover-x' }, xs), [...m.ranks].sort((a, b) => a - b).map((r) => {
      const k = m.ranks.indexOf(r);
      const raw = u.data[1 + k * 4 + 0][i];
      const sm = u.data[1 + k * 4 + 1][i];
      if (raw === null || raw === undefined) return null;
      return h('span', { class: 'hover-v' }, h('span', { class: `swatch c${r % COLORS.length}` }), `rank ${r}: ${fmt.num(sm)} (raw ${fmt.num(raw)})`);
    }));
  }

  // Draws the attempt and checkpoint markers inside the x range; the labels drawn are also listed
  // in the figure's data-markers (for tests and tools that cannot read a canvas).
  drawMarkers(m, u) {
    const ctx = u.ctx;
    const { top, height } = u.bbox;
    const marks = [];
    const drawn = [];
    for (const a of this.markers.attempts) marks.push({ x: this.xMode === 'time' ? a.t / 1000 : a.step, label: `attempt ${a.attempt}`, color: '#dc2626' });
    for (const c of this.markers.checkpoints) marks.push({ x: this.xMode === 'time' ? c.t / 1000 : c.step, label: `ckpt ${c.index}`, color: '#16a34a' });
    ctx.save();
    ctx.font = `${Math.round(10 * devicePixelRatio)}px sans-serif`;
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
      ctx.fillText(mk.label, px + 3, top + 12 * devicePixelRatio);
      drawn.push(mk.label);
    }
    ctx.restore();
    const list = drawn.join(',');
    if (m.box.dataset.markers !== list) m.box.dataset.markers = list;
  }

  // A drag zoom: re-fetch the range at full detail, by step (step_min/step_max) or by wall time
  // (time_min/time_max, epoch seconds).
  async onZoom(m, u) {
    if (this.loadingZoom) return;
    const { min, max } = u.scales.x;
    const all = u.data[0];
    if (!all.length) return;
    const full = min <= all[0] && max >= all[all.length - 1];
    m.box.querySelector('.reset-zoom').hidden = full;
    if (full) {
      this.zoomed.delete(m.name);
      return;
    }
    this.zoomed.set(m.name, [min, max]);
    const range = this.xMode === 'time'
      ? { time_min: (Math.floor(min * 1000) / 1000).toFixed(3), time_max: (Math.ceil(max * 1000) / 1000).toFixed(3) }
      : { step_min: String(Math.floor(min)), step_max: String(Math.ceil(max)) };
    const q = new URLSearchParams({ name: m.name, mode: 'band', max_points: String(ZOOM_POINTS), ...range });
    try {
      const r = await api('GET', `/jobs/${this.job}/metrics?${q}`);
      const tmp = new Map();
      for (const b of r.metrics) {
        if (!tmp.has(b.rank)) tmp.set(b.rank, newSeries());
        this.addBucket(tmp.get(b.rank), b);
      }
      const ranks = m.ranks;
      const tables = ranks.map((rk) => {
        const s = tmp.get(rk) || newSeries();
        return [s.x, s.y, ema(s.y, this.smooth), s.min, s.max];
      });
      this.loadingZoom = true;
      u.setData(tables.length === 1 ? tables[0] : uPlot.join(tables), false);
      u.setScale('x', { min, max });
      this.loadingZoom = false;
      m.box.dataset.zoomPoints = String(r.metrics.length);
    } catch {
      this.loadingZoom = false;
    }
  }

  resetZoom(m) {
    this.zoomed.delete(m.name);
    m.box.querySelector('.reset-zoom').hidden = true;
    m.plot.setData(this.data(m).data, true);
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
