// Jobs: filter by status, project, owner, name and tag (the list endpoint's own filters), newest first,
// cursor paging; statuses change live from the cluster stream without a reload. The project
// select offers the projects the caller may see (GET /projects). Ticking two or more jobs and
// Compare opens the comparison page (#/compare?jobs=…). "Metric" adds a column with each job's
// final value of that metric (rank 0's last report: the job's result.metrics).
import { JOB_STATUSES, JOB_PENDING } from 'vocab';
import { api } from '../api.js';
import { stream } from '../stream.js';
import { h, clear, fmt, badge, loading, errorBox, empty } from '../ui.js';

const PAGE = 50;

export function render(main, { params }) {
  let alive = true;
  const filters = {
    status: params.get('status') || '',
    project: params.get('project') || '',
    owner: params.get('owner') || '',
    name: params.get('name') || '',
    tag: params.get('tag') || '',
  };
  const cursors = [null]; // cursor of each page shown so far
  let page = 0;
  let rows = new Map(); // id → tr, for live updates
  let shown = []; // the jobs of the page shown
  const metric = h('input', { id: 'f-metric', name: 'metric', value: params.get('metric') || '', placeholder: 'e.g. loss', autocomplete: 'off', onchange: () => { keepUrl(); show(shown); } });

  const status = h('select', { id: 'f-status', name: 'status' }, h('option', { value: '' }, 'any status'), JOB_STATUSES.map((s) => h('option', { value: s }, s)));
  status.value = filters.status;
  const project = h('select', { id: 'f-project', name: 'project' }, h('option', { value: '' }, 'any project'));
  if (filters.project) project.append(h('option', { value: filters.project }, filters.project));
  project.value = filters.project;
  const owner = h('input', { id: 'f-owner', name: 'owner', value: filters.owner, placeholder: 'owner', autocomplete: 'off' });
  const name = h('input', { id: 'f-name', name: 'name', value: filters.name, placeholder: 'name contains', autocomplete: 'off' });
  const tag = h('input', { id: 'f-tag', name: 'tag', value: filters.tag, placeholder: 'tag', autocomplete: 'off' });
  const form = h(
    'form',
    { class: 'filters', role: 'search', onsubmit: (e) => { e.preventDefault(); apply(); } },
    h('span', { class: 'filter' }, h('label', { for: 'f-status' }, 'Status'), status),
    h('span', { class: 'filter' }, h('label', { for: 'f-project' }, 'Project'), project),
    h('span', { class: 'filter' }, h('label', { for: 'f-owner' }, 'Owner'), owner),
    h('span', { class: 'filter' }, h('label', { for: 'f-name' }, 'Name'), name),
    h('span', { class: 'filter' }, h('label', { for: 'f-tag' }, 'Tag'), tag),
    h('span', { class: 'filter' }, h('label', { for: 'f-metric' }, 'Metric'), metric),
    h('button', { type: 'submit' }, 'Filter'),
  );
  status.addEventListener('change', apply);
  project.addEventListener('change', apply);
  api('GET', '/projects').then((r) => {
    if (!alive) return;
    clear(project, h('option', { value: '' }, 'any project'), r.projects.map((p) => h('option', { value: p.name }, p.name)));
    project.value = filters.project;
  }, () => {}); // the select keeps 'any project' (and the filter from the URL)
  const list = h('div', { id: 'jobs-list' }, loading());
  const prev = h('button', { type: 'button', onclick: () => go(page - 1) }, '← Newer');
  const next = h('button', { type: 'button', onclick: () => go(page + 1) }, 'Older →');
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' }, prev, h('span', { class: 'page-no' }), next);
  const picked = new Set(); // job ids ticked for Compare (kept across pages)
  const compareBtn = h('button', { type: 'button', id: 'compare', disabled: true, onclick: () => { location.hash = `#/compare?jobs=${[...picked].join(',')}`; } }, 'Compare');
  const pickInfo = h('span', { class: 'hint', role: 'status' }, 'Tick jobs to compare them.');
  function pickedChanged() {
    compareBtn.disabled = picked.size < 2;
    pickInfo.textContent = picked.size ? `${picked.size} job${picked.size === 1 ? '' : 's'} ticked` : 'Tick jobs to compare them.';
  }
  clear(main, h('h1', {}, 'Jobs'), form, h('div', { class: 'compare-bar' }, compareBtn, pickInfo), list, pager);

  function apply() {
    filters.status = status.value;
    filters.project = project.value;
    filters.owner = owner.value.trim();
    filters.name = name.value.trim();
    filters.tag = tag.value.trim();
    keepUrl();
    cursors.length = 1;
    go(0);
  }

  function keepUrl() {
    const q = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
    if (metric.value.trim()) q.set('metric', metric.value.trim());
    history.replaceState(null, '', `#/jobs${q.toString() ? `?${q}` : ''}`);
  }

  async function go(n) {
    if (n < 0 || n >= cursors.length) return;
    page = n;
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    if (cursors[n]) q.set('cursor', cursors[n]);
    clear(list, loading());
    try {
      const r = await api('GET', `/jobs?${q}`);
      if (!alive) return;
      if (r.next_cursor && cursors.length === n + 1) cursors.push(r.next_cursor);
      prev.disabled = n === 0;
      next.disabled = !r.next_cursor;
      pager.querySelector('.page-no').textContent = `page ${n + 1}`;
      show(r.jobs);
    } catch (e) {
      if (alive) clear(list, errorBox(e, () => go(n)));
    }
  }

  function show(jobs) {
    shown = jobs;
    rows = new Map();
    const m = metric.value.trim();
    const final = (j) => (j.result && j.result.metrics ? j.result.metrics[m] : undefined);
    if (!jobs.length) {
      clear(list, empty(Object.values(filters).some(Boolean) ? 'No job matches these filters.' : 'No jobs yet.'));
      return;
    }
    const tbody = h('tbody', {});
    for (const j of jobs) {
      const pick = h('input', { type: 'checkbox', class: 'pick', 'aria-label': `compare job ${j.id}`, checked: picked.has(String(j.id)), onchange: () => {
        if (pick.checked) picked.add(String(j.id)); else picked.delete(String(j.id));
        pickedChanged();
      } });
      const tr = h(
        'tr',
        { dataset: { id: j.id } },
        h('td', { 'data-label': 'Compare' }, pick),
        h('td', { 'data-label': 'Id' }, h('a', { href: `#/jobs/${j.id}` }, `#${j.id}`)),
        h('td', { 'data-label': 'Name' }, h('a', { href: `#/jobs/${j.id}` }, j.name || '(unnamed)'),
          (j.tags || []).map((t) => h('span', { class: 'tag' }, t))),
        h('td', { 'data-label': 'Status', class: 'status-cell' }, badge(j.status)),
        h('td', { 'data-label': 'Owner' }, j.owner),
        h('td', { 'data-label': 'Attempt' }, j.attempt),
        h('td', { 'data-label': 'Created' }, fmt.time(j.created_at)),
        h('td', { 'data-label': 'Duration' }, j.started_at ? fmt.duration(j.started_at, j.finished_at) : '—'),
        m ? h('td', { 'data-label': m, class: 'metric' }, fmt.num(final(j))) : null,
        h('td', { 'data-label': 'Message', class: 'msg' }, j.status_message || ''),
      );
      rows.set(String(j.id), tr);
      tbody.append(tr);
    }
    clear(list, h('div', { class: 'table-wrap' }, h('table', { class: 'jobs' },
      h('thead', {}, h('tr', {}, ['', 'Id', 'Name', 'Status', 'Owner', 'Attempt', 'Created', 'Duration', m ? `${m} (final)` : null, 'Message'].filter((t) => t !== null).map((t) => h('th', { scope: 'col' }, t)))),
      tbody)));
  }

  function onEvent(m) {
    if (m.kind !== 'job') return;
    const d = m.data || {};
    const tr = rows.get(String(d.id));
    if (tr) {
      if (d.deleted) {
        tr.classList.add('gone');
        return;
      }
      clear(tr.querySelector('.status-cell'), badge(d.status));
      if (d.message !== undefined) tr.querySelector('.msg').textContent = d.message || '';
    } else if (page === 0 && !d.deleted && d.status === JOB_PENDING && !filters.owner && !filters.name && !filters.project && !filters.tag && (!filters.status || filters.status === JOB_PENDING)) {
      go(0); // a new job: it belongs at the top of the first page
    }
  }

  go(0);
  const unsub = stream.subscribe('cluster', { onEvent });
  return () => {
    alive = false;
    unsub();
  };
}
