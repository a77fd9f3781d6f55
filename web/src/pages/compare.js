// Run comparison (#/compare?jobs=3,5,…): the jobs' curves overlaid per metric (rank 0 of each
// job's current attempt, one colour per job, x by step), a config diff (train_loop_config,
// scaling_config and the rest of the spec, one row per setting, the settings that differ first
// and marked), and each job's status, duration and final metrics. The jobs list's "Compare"
// opens it with the jobs ticked there.
import uPlot from 'uplot';
import { api } from '../api.js';
import { COLORS, join } from '../chart.js';
import { h, clear, fmt, badge, loading, errorBox, empty } from '../ui.js';

const BUCKETS = 600; // buckets per job and metric, as on the job page

// The spec as dotted keys → JSON text (arrays whole), without the name and secret_env.
function flatten(v, prefix, out) {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (!prefix && (k === 'name' || k === 'secret_env')) continue;
      flatten(x, prefix ? `${prefix}.${k}` : k, out);
    }
  } else if (prefix) {
    out.set(prefix, JSON.stringify(v));
  }
  return out;
}


export function render(main, { params }) {
  let alive = true;
  const ids = [...new Set((params.get('jobs') || '').split(',').map((s) => s.trim()).filter((s) => /^\d+$/.test(s)))];
  const body = h('div', { class: 'compare' }, loading());
  clear(main, h('h1', {}, 'Compare runs'), body);
  const plots = [];
  if (ids.length < 2) {
    clear(body, empty('Pick two or more jobs to compare: tick them in the Jobs list, then Compare (or open #/compare?jobs=3,5).'));
    return () => {};
  }

  async function load() {
    try {
      const jobs = await Promise.all(ids.map((id) => api('GET', `/jobs/${id}`)));
      const series = await Promise.all(jobs.map((j) => api('GET', `/jobs/${j.id}/metrics?mode=band&max_points=${BUCKETS}&rank=0&attempt=${j.attempt || 1}`)));
      if (!alive) return;
      const label = (j) => `#${j.id} ${j.name || ''}`.trim();
      const legend = h('p', { class: 'compare-legend' }, jobs.map((j, i) => h('span', { class: 'legend-job' }, h('span', { class: `swatch c${i % COLORS.length}` }), h('a', { href: `#/jobs/${j.id}` }, label(j)))));
      clear(body, legend, h('h2', {}, 'Metrics'), charts(jobs, series, label), h('h2', {}, 'Summary'), summary(jobs), h('h2', {}, 'Config'), configDiff(jobs));
    } catch (e) {
      if (alive) clear(body, errorBox(e, load));
    }
  }

  function charts(jobs, replies, label) {
    const byName = new Map(); // metric → per job {x, y}
    replies.forEach((r, i) => {
      for (const b of r.metrics) {
        if (b.step_last === null || b.step_last === undefined || b.last === null) continue;
        if (!byName.has(b.name)) byName.set(b.name, jobs.map(() => ({ x: [], y: [] })));
        const s = byName.get(b.name)[i];
        s.x.push(b.step_last);
        s.y.push(b.last);
      }
    });
    if (!byName.size) return empty('None of these jobs reported metrics.');
    const box = h('div', { class: 'charts' });
    const width = Math.max(260, Math.min(600, (main.clientWidth || 640) - 48));
    for (const name of [...byName.keys()].sort()) {
      const per = byName.get(name);
      const fig = h('figure', { class: 'chart card', dataset: { metric: name, series: jobs.filter((_, i) => per[i].x.length).map(label).join(',') } },
        h('figcaption', {}, h('span', { class: 'chart-title' }, name)));
      box.append(fig);
      const data = join(per.map((s) => [s.x, s.y]));
      const opts = {
        width, height: 220, legend: { show: true }, cursor: { drag: { x: true, y: false } }, scales: { x: { time: false } },
        axes: [{ stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.15)' } }, { stroke: 'currentColor', size: 60, grid: { stroke: 'rgba(128,128,128,0.15)' } }],
        series: [{ label: 'step' }, ...jobs.map((j, i) => ({ label: label(j), stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, points: { show: false }, value: (u, v) => fmt.num(v) }))],
      };
      plots.push(new uPlot(opts, data, fig));
    }
    return box;
  }

  function summary(jobs) {
    const names = [...new Set(jobs.flatMap((j) => Object.keys((j.result && j.result.metrics) || {})))].sort();
    const rows = [
      ['status', (j) => badge(j.status)],
      ['duration', (j) => (j.started_at ? fmt.duration(j.started_at, j.finished_at) : '—')],
      ['attempts', (j) => String(j.attempt)],
      ...names.map((n) => [`final ${n}`, (j) => fmt.num(j.result && j.result.metrics ? j.result.metrics[n] : undefined)]),
    ];
    return h('div', { class: 'table-wrap' }, h('table', { id: 'compare-summary' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, ''), jobs.map((j) => h('th', { scope: 'col' }, `#${j.id}`)))),
      h('tbody', {}, rows.map(([k, cell]) => h('tr', { dataset: { key: k } }, h('th', { scope: 'row' }, k), jobs.map((j) => h('td', {}, cell(j))))))));
  }

  function configDiff(jobs) {
    const flat = jobs.map((j) => flatten(j.spec || {}, '', new Map()));
    const keys = [...new Set(flat.flatMap((f) => [...f.keys()]))];
    const differs = (k) => new Set(flat.map((f) => f.get(k) ?? '—')).size > 1;
    keys.sort((a, b) => Number(differs(b)) - Number(differs(a)) || a.localeCompare(b));
    return h('div', { class: 'table-wrap' }, h('table', { id: 'config-diff' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'setting'), jobs.map((j) => h('th', { scope: 'col' }, `#${j.id}`)))),
      h('tbody', {}, keys.map((k) => h('tr', { class: differs(k) ? 'differs' : '', dataset: { key: k } },
        h('th', { scope: 'row' }, k), flat.map((f) => h('td', {}, f.get(k) ?? '—')))))));
  }

  load();
  return () => {
    alive = false;
    plots.forEach((p) => p.destroy());
  };
}
