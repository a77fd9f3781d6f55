// Sweeps (issue 25, docs/sweeps.md). #/sweeps lists them, newest first; #/sweeps/{id} shows
// one: its trials in a table sortable by any column (the metric's by default, best first), a
// parallel-coordinates plot of the hyperparameters against the metric (SVG, one line per trial),
// the trials' curves of the metric overlaid (rank 0, x the report number or the time attribute)
// with ASHA's rungs drawn as vertical lines, and the best trial marked in all three. The sweep's
// events (a metric no trial reports) are shown under its summary.
import uPlot from 'uplot';
import { JOB_RUNNING } from 'vocab';
import { api } from '../api.js';
import { COLORS } from '../chart.js';
import { h, clear, fmt, badge, loading, errorBox, empty, table } from '../ui.js';

const CURVES = 40; // the best trials whose curves are drawn
const REFRESH_MS = 3000; // while the sweep runs

export function render(main, r) {
  return r.id ? one(main, r.id) : list(main);
}

function list(main) {
  let alive = true;
  const body = h('div', { id: 'sweeps-list' }, loading());
  clear(main, h('h1', {}, 'Sweeps'), body);
  async function load() {
    try {
      const { sweeps } = await api('GET', '/sweeps');
      if (!alive) return;
      if (!sweeps.length) {
        clear(body, empty('No sweeps yet: trainyard sweep submit, or tune.Tuner(...).fit().'));
        return;
      }
      clear(body, table([
        { title: 'Sweep', cell: (s) => h('a', { href: `#/sweeps/${s.id}` }, `#${s.id} ${s.name}`) },
        { title: 'Status', cell: (s) => badge(s.status) },
        { title: 'Trials', cell: (s) => String(s.num_trials) },
        { title: 'Metric', cell: (s) => (s.metric ? `${s.metric} (${s.mode})` : '—') },
        { title: 'Best', cell: (s) => (s.best_trial ? `trial ${s.best_trial.index}: ${fmt.num(s.best_trial.best_metric)}` : '—') },
        { title: 'Owner', cell: (s) => s.owner },
        { title: 'Submitted', cell: (s) => fmt.ago(s.created_at) },
      ], sweeps, { rowAttrs: (s) => ({ dataset: { id: s.id } }) }));
    } catch (e) {
      if (alive) clear(body, errorBox(e, load));
    }
  }
  load();
  return () => {
    alive = false;
  };
}

// ASHA's rungs: grace_period * rf^k up to max_t (tune/tune.h, tune_asha_rungs), else none.
export function rungs(tc) {
  const s = (tc && tc.scheduler) || {};
  if (s.type !== 'asha') return [];
  const g = s.grace_period ?? 1;
  const rf = s.reduction_factor ?? 4;
  const max = s.max_t ?? 100;
  const out = [];
  for (let m = g; m <= max * (1 + 1e-9) && rf > 1 && out.length < 64; m *= rf) out.push(m);
  return out;
}

// A config as dotted keys → value (nested dicts flattened, as the search space nests them).
function flatten(v, prefix, out) {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out[prefix] = v;
  }
  return out;
}

function one(main, id) {
  let alive = true;
  let timer = null;
  let plot = null;
  let sortKey = 'best_metric';
  let sortDir = null; // 1 / -1: ascending / descending; null: the metric's best first
  const head = h('div', { id: 'sweep-head' }, loading());
  const trialsBox = h('div', { id: 'sweep-trials' });
  const parBox = h('div', { id: 'sweep-parallel' });
  const curvesBox = h('div', { id: 'sweep-curves' });
  clear(main, h('h1', {}, `Sweep #${id}`), head, h('h2', {}, 'Trials'), trialsBox,
    h('h2', {}, 'Hyperparameters against the metric'), parBox, h('h2', {}, 'Curves'), curvesBox);
  let sweep = null;

  async function load() {
    try {
      const s = await api('GET', `/sweeps/${id}`);
      if (!alive) return;
      sweep = s;
      showHead(s);
      showTrials(s);
      showParallel(s);
      await showCurves(s);
      if (alive && s.status === JOB_RUNNING) timer = setTimeout(load, REFRESH_MS);
    } catch (e) {
      if (alive) clear(head, errorBox(e, load));
    }
  }

  function better(a, b) {
    // Whether metric value a is better than b in the sweep's mode.
    return sweep.mode === 'min' ? a < b : a > b;
  }

  function showHead(s) {
    const best = s.best_trial;
    clear(head,
      h('p', { class: 'sweep-summary' }, badge(s.status), ' ', `${s.name}: ${s.num_trials} trials`,
        s.metric ? `, ${s.mode} ${s.metric}` : '',
        best ? h('span', { id: 'sweep-best' }, `, best trial ${best.index} (${s.metric} ${fmt.num(best.best_metric)})`) : null),
      s.status_message ? h('p', { class: 'status-message' }, s.status_message) : null,
      (s.events || []).map((e) => h('p', { class: 'sweep-event', role: 'note' }, e.message)));
  }

  function sortedTrials(s) {
    const key = sortKey;
    const t = [...s.trials];
    const val = (x) => (key.startsWith('config.') ? flatten(x.config, '', {})[key.slice(7)] : x[key]);
    t.sort((a, b) => {
      const va = val(a);
      const vb = val(b);
      if (va === vb) return a.index - b.index;
      if (va === null || va === undefined) return 1;
      if (vb === null || vb === undefined) return -1;
      const c = typeof va === 'number' && typeof vb === 'number' ? va - vb : String(va).localeCompare(String(vb));
      return sortDir * c;
    });
    return t;
  }

  function showTrials(s) {
    if (sortDir === null) sortDir = s.mode === 'min' ? 1 : -1;
    const keys = [...new Set(s.trials.flatMap((t) => Object.keys(flatten(t.config, '', {}))))].sort();
    const bestIdx = s.best_trial ? s.best_trial.index : -1;
    const cols = [
      ['index', 'Trial', (t) => h('a', { href: t.job_id ? `#/jobs/${t.job_id}` : undefined }, t.index === bestIdx ? `★ ${t.index}` : String(t.index))],
      ['status', 'Status', (t) => badge(t.status)],
      ['best_metric', `Best ${s.metric || 'metric'}`, (t) => fmt.num(t.best_metric)],
      ['last_metric', `Last ${s.metric || 'metric'}`, (t) => fmt.num(t.last_metric)],
      ['last_t', 't', (t) => fmt.num(t.last_t)],
      ...keys.map((k) => [`config.${k}`, k, (t) => fmt.value(flatten(t.config, '', {})[k])]),
      ['stopped_by', 'Stopped by', (t) => t.stopped_by || '—'],
    ];
    const th = ([key, title]) => {
      const on = key === sortKey;
      const sort = on ? (sortDir === -1 ? 'descending' : 'ascending') : 'none';
      return h('th', { scope: 'col', 'aria-sort': sort, dataset: { key } },
        h('button', { type: 'button', class: 'link sort', onclick: () => {
          if (sortKey === key) sortDir = sortDir === 1 ? -1 : 1;
          else {
            sortKey = key;
            sortDir = key.endsWith('_metric') && s.mode !== 'min' ? -1 : 1;
          }
          showTrials(sweep);
        } }, title, on ? (sortDir === -1 ? ' ↓' : ' ↑') : ''));
    };
    clear(trialsBox, h('div', { class: 'table-wrap' }, h('table', { id: 'trials-table', class: 'trials' },
      h('thead', {}, h('tr', {}, cols.map(th))),
      h('tbody', {}, sortedTrials(s).map((t) => h('tr', { class: t.index === bestIdx ? 'best' : '', dataset: { index: t.index } },
        cols.map(([, title, cell]) => h('td', { 'data-label': title }, cell(t)))))))));
  }

  // One vertical axis per hyperparameter (numbers on a linear scale, anything else by category)
  // and one for the metric, last; a polyline per trial with a metric, the best drawn on top.
  function showParallel(s) {
    const NS = 'http://www.w3.org/2000/svg';
    const svg = (tag, attrs, ...kids) => {
      const el = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
      kids.forEach((k) => el.append(k));
      return el;
    };
    const trials = s.trials.map((t) => ({ t, c: flatten(t.config, '', {}) })).filter((x) => typeof x.t.best_metric === 'number');
    const keys = [...new Set(s.trials.flatMap((t) => Object.keys(flatten(t.config, '', {}))))].sort();
    if (!trials.length || !s.metric) {
      clear(parBox, empty('No trial has reported the metric yet.'));
      return;
    }
    const axes = [...keys.map((k) => ({ name: k, get: (x) => x.c[k] })), { name: s.metric, get: (x) => x.t.best_metric }];
    for (const a of axes) {
      const vals = trials.map(a.get);
      if (vals.every((v) => typeof v === 'number')) {
        const lo = Math.min(...vals);
        const hi = Math.max(...vals);
        a.pos = (v) => (hi === lo ? 0.5 : (v - lo) / (hi - lo));
        a.ticks = hi === lo ? [lo] : [lo, hi];
      } else {
        const cats = [...new Set(vals.map((v) => JSON.stringify(v)))].sort();
        a.pos = (v) => (cats.length < 2 ? 0.5 : cats.indexOf(JSON.stringify(v)) / (cats.length - 1));
        a.ticks = cats.map((c) => JSON.parse(c));
      }
    }
    const W = Math.max(320, Math.min(900, (main.clientWidth || 800) - 32));
    const H = 260;
    const top = 28;
    const bottom = 24;
    const x = (i) => 40 + (i * (W - 80)) / Math.max(1, axes.length - 1);
    const y = (p) => top + (1 - p) * (H - top - bottom);
    const root = svg('svg', { id: 'parallel', class: 'parallel card', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
      'aria-label': `Parallel coordinates of ${keys.join(', ')} against ${s.metric}` });
    const metricAxis = axes[axes.length - 1];
    const bestIdx = s.best_trial ? s.best_trial.index : -1;
    const ordered = [...trials].sort((a, b) => (a.t.index === bestIdx) - (b.t.index === bestIdx));
    for (const tr of ordered) {
      const isBest = tr.t.index === bestIdx;
      const shade = metricAxis.pos(tr.t.best_metric);
      const good = sweep.mode === 'min' ? 1 - shade : shade;
      const pts = axes.map((a, i) => `${x(i)},${y(a.pos(a.get(tr)))}`).join(' ');
      root.append(svg('polyline', {
        points: pts, fill: 'none', class: isBest ? 'trial best' : 'trial',
        stroke: isBest ? '#dc2626' : `hsl(${Math.round(220 - 100 * good)}, 70%, ${Math.round(60 - 15 * good)}%)`,
        'stroke-width': isBest ? 3 : 1.2, 'stroke-opacity': isBest ? 1 : 0.7, 'data-trial': tr.t.index,
      }, svg('title', {}, document.createTextNode(`trial ${tr.t.index}: ${s.metric} ${fmt.num(tr.t.best_metric)}`))));
    }
    axes.forEach((a, i) => {
      root.append(svg('line', { x1: x(i), x2: x(i), y1: top, y2: H - bottom, stroke: 'currentColor', 'stroke-width': 1, class: 'axis' }));
      root.append(svg('text', { x: x(i), y: 14, 'text-anchor': 'middle', 'font-size': 12, fill: 'currentColor', class: 'axis-name' }, document.createTextNode(a.name)));
      for (const v of a.ticks.slice(0, 12)) {
        root.append(svg('text', { x: x(i) + 4, y: y(a.pos(v)) + 4, 'font-size': 10, fill: 'currentColor', class: 'tick' }, document.createTextNode(fmt.value(v))));
      }
    });
    clear(parBox, root);
  }

  async function showCurves(s) {
    const withJob = s.trials.filter((t) => t.job_id && typeof t.best_metric === 'number');
    if (!s.metric || !withJob.length) {
      if (plot) plot.destroy();
      plot = null;
      clear(curvesBox, empty('No curves yet.'));
      return;
    }
    const best = s.best_trial ? s.best_trial.index : -1;
    withJob.sort((a, b) => (a.index === best ? -1 : b.index === best ? 1 : better(a.best_metric, b.best_metric) ? -1 : 1));
    const drawn = withJob.slice(0, CURVES);
    const byIter = !s.tune_config || !s.tune_config.scheduler || !s.tune_config.scheduler.time_attr ||
      s.tune_config.scheduler.time_attr === 'training_iteration';
    const replies = await Promise.all(drawn.map((t) =>
      api('GET', `/jobs/${t.job_id}/metrics?mode=points&rank=0&max_points=1000&name=${encodeURIComponent(s.metric)}`)));
    if (!alive) return;
    const series = replies.map((r) => {
      const pts = (r.metrics || []).filter((p) => !p.superseded && typeof p.value === 'number');
      return [pts.map((p, i) => (byIter || p.step === null || p.step === undefined ? i + 1 : p.step)), pts.map((p) => p.value)];
    });
    const marks = rungs(s.tune_config);
    const width = Math.max(300, Math.min(900, (main.clientWidth || 800) - 32));
    const fig = h('figure', { class: 'chart card', id: 'sweep-chart', dataset: { metric: s.metric, trials: drawn.map((t) => t.index).join(','), rungs: marks.join(','), best: best } },
      h('figcaption', {}, h('span', { class: 'chart-title' }, `${s.metric} per trial`),
        marks.length ? h('span', { class: 'hint' }, ` (dashed: ASHA rungs at ${marks.map(fmt.num).join(', ')})`) : null,
        drawn.length < withJob.length ? h('span', { class: 'hint' }, ` (the ${CURVES} best trials)`) : null));
    const opts = {
      width, height: 280, legend: { show: true }, scales: { x: { time: false } },
      axes: [{ stroke: 'currentColor', label: byIter ? 'training_iteration' : s.tune_config.scheduler.time_attr, grid: { stroke: 'rgba(128,128,128,0.15)' } },
        { stroke: 'currentColor', size: 60, grid: { stroke: 'rgba(128,128,128,0.15)' } }],
      series: [{ label: 'x' }, ...drawn.map((t, i) => ({
        label: t.index === best ? `★ trial ${t.index}` : `trial ${t.index}`,
        stroke: t.index === best ? '#dc2626' : COLORS[(i % (COLORS.length - 1)) + 1],
        width: t.index === best ? 3 : 1.5, spanGaps: true, points: { show: false }, value: (u, v) => fmt.num(v),
      }))],
      hooks: { draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = 'rgba(128,128,128,0.8)';
        ctx.setLineDash([4, 4]);
        ctx.lineWidth = 1;
        for (const m of marks) {
          const px = Math.round(u.valToPos(m, 'x', true));
          if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) continue;
          ctx.beginPath();
          ctx.moveTo(px, u.bbox.top);
          ctx.lineTo(px, u.bbox.top + u.bbox.height);
          ctx.stroke();
        }
        ctx.restore();
      }] },
    };
    if (plot) plot.destroy();
    clear(curvesBox, fig);
    plot = new uPlot(opts, uPlot.join(series), fig);
  }

  load();
  return () => {
    alive = false;
    clearTimeout(timer);
    if (plot) plot.destroy();
  };
}
