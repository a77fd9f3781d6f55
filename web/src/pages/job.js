// Job detail: spec, status timeline with attempts, workers, live metric charts, live logs,
// checkpoints, and Stop / Resubmit (confirmed; disabled for viewers). Everything after the first
// load comes from the job's stream.
import { TERMINAL_JOB_STATUSES, JOB_STOPPING } from 'vocab';
import { api, can, session } from '../api.js';
import { stream } from '../stream.js';
import { MetricCharts } from '../chart.js';
import { LogViewer } from '../logs.js';
import { JobUsage, dropUsage } from '../usage.js';
import { h, clear, fmt, badge, workerBadge, loading, errorBox, empty, table, confirmDialog, toast } from '../ui.js';

const TABS = ['metrics', 'system', 'logs', 'workers', 'timeline', 'checkpoints', 'spec'];

// Where an attempt's startup went (GET /jobs/{id}/attempts `startup`): one segment per phase,
// widths in proportion, the seconds on hover and in the text after it.
const PHASES = [['queue_s', 'queue'], ['placement_s', 'placement'], ['code_fetch_s', 'code fetch'], ['checkpoint_fetch_s', 'checkpoint fetch'],
  ['process_start_s', 'process start'], ['framework_init_s', 'framework init'], ['first_report_s', 'first report']];

function startupBar(a) {
  const s = a.startup || {};
  const parts = PHASES.filter(([k]) => typeof s[k] === 'number');
  const total = parts.reduce((n, [k]) => n + s[k], 0);
  if (!parts.length) return '—';
  const words = parts.map(([k, name]) => `${name} ${fmt.seconds(s[k])}`).join(' · ');
  return h('div', { class: 'startup', title: words },
    h('div', { class: 'startup-bar', role: 'img', 'aria-label': `startup: ${words}` },
      parts.map(([k, name]) => {
        const seg = h('span', { class: `seg seg-${k.replace('_s', '')}`, title: `${name} ${fmt.seconds(s[k])}` });
        seg.style.flexGrow = String(total > 0 ? s[k] / total : 0); // CSSOM: the CSP forbids style attributes
        return seg;
      })),
    h('span', { class: 'startup-total' }, fmt.seconds(total)));
}

export function render(main, { id, params }) {
  let alive = true;
  let job = null;
  const timers = {};
  const head = h('div', { class: 'job-head' }, loading());
  const tabBar = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Job sections' });
  const panels = {};
  for (const t of TABS) panels[t] = h('section', { class: 'panel', id: `panel-${t}`, role: 'tabpanel', 'aria-labelledby': `tab-${t}`, hidden: true });
  let current = TABS.includes(params.get('tab')) ? params.get('tab') : 'metrics';
  for (const t of TABS) {
    tabBar.append(h('button', { type: 'button', role: 'tab', id: `tab-${t}`, 'aria-controls': `panel-${t}`, onclick: () => select(t), onkeydown: tabKeys }, t[0].toUpperCase() + t.slice(1)));
  }
  clear(main, head, tabBar, ...Object.values(panels));

  const chartBox = h('div', { class: 'charts' });
  const smoothIn = h('input', { id: 'smooth', type: 'range', min: '0', max: '0.99', step: '0.01', value: '0.6', oninput: () => { charts.setSmoothing(Number(smoothIn.value)); smoothOut.textContent = smoothIn.value; } });
  const smoothOut = h('output', { for: 'smooth' }, '0.6');
  const xSel = h('select', { id: 'xaxis', onchange: () => charts.setXMode(xSel.value).then(refreshMarkers) }, h('option', { value: 'step' }, 'step'), h('option', { value: 'time' }, 'wall time'));
  clear(panels.metrics, h('div', { class: 'chart-controls' },
    h('label', { for: 'xaxis' }, 'X axis'), xSel,
    h('label', { for: 'smooth' }, 'Smoothing'), smoothIn, smoothOut,
    h('span', { class: 'hint' }, 'Drag to zoom (re-fetched at full detail); double-click to reset.')), chartBox);
  const charts = new MetricCharts(chartBox, id);
  const logBox = h('div', { class: 'logs' });
  panels.logs.append(logBox);
  const logs = new LogViewer(logBox, id);
  const usage = new JobUsage(panels.system, id);
  let attempts = [];
  let checkpoints = [];

  function select(t) {
    current = t;
    for (const k of TABS) {
      panels[k].hidden = k !== t;
      const b = tabBar.querySelector(`#tab-${k}`);
      b.setAttribute('aria-selected', String(k === t));
      b.tabIndex = k === t ? 0 : -1;
    }
    history.replaceState(null, '', `#/jobs/${id}${t === 'metrics' ? '' : `?tab=${t}`}`);
    if (t === 'metrics') charts.resize();
    if (t === 'system') loadSystem();
  }
  function tabKeys(ev) {
    const i = TABS.indexOf(current);
    let n = null;
    if (ev.key === 'ArrowRight') n = (i + 1) % TABS.length;
    if (ev.key === 'ArrowLeft') n = (i + TABS.length - 1) % TABS.length;
    if (n === null) return;
    ev.preventDefault();
    select(TABS[n]);
    tabBar.querySelector(`#tab-${TABS[n]}`).focus();
  }
  select(current);

  function renderHead() {
    const error = job.result && job.result.error;
    const stopBtn = h('button', { type: 'button', class: 'danger', id: 'stop', disabled: !can.stop() || TERMINAL_JOB_STATUSES.includes(job.status) || job.status === JOB_STOPPING, title: can.stop() ? '' : 'viewers cannot stop jobs', onclick: onStop }, 'Stop');
    const resubmit = h('button', { type: 'button', id: 'resubmit', disabled: !can.submit(), title: can.submit() ? '' : 'viewers cannot submit jobs', onclick: () => { location.hash = `#/submit?from=${id}`; } }, 'Resubmit');
    clear(head,
      h('div', { class: 'title-row' },
        h('h1', {}, `#${job.id} ${job.name || ''}`), h('span', { id: 'job-status' }, badge(job.status)),
        h('div', { class: 'actions' }, resubmit, stopBtn)),
      h('p', { class: 'meta' },
        `owner ${job.owner} · attempt ${job.attempt} · priority ${job.priority} · created ${fmt.time(job.created_at)}`,
        job.started_at ? ` · started ${fmt.time(job.started_at)}` : '',
        job.finished_at ? ` · finished ${fmt.time(job.finished_at)}` : ''),
      // A failed job's status message is its error: said once, as the error.
      job.status_message && job.status_message !== error ? h('p', { class: 'status-message' }, job.status_message) : null,
      error ? h('p', { class: 'state error', id: 'job-error' }, error) : null,
      renderLabels(),
      renderGoodput());
  }

  // Tags and notes (PATCH /jobs/{id}); the owner and admins may edit them, the server decides.
  function renderLabels() {
    const box = h('div', { class: 'job-labels', id: 'job-labels' });
    const show = () => clear(box,
      h('span', { class: 'tags', id: 'job-tags' }, (job.tags || []).map((t) => h('a', { class: 'tag', href: `#/jobs?tag=${encodeURIComponent(t)}` }, t))),
      job.notes ? h('p', { class: 'notes', id: 'job-notes' }, job.notes) : null,
      h('button', { type: 'button', id: 'edit-labels', disabled: !can.stop(), title: can.stop() ? '' : 'viewers cannot change jobs', onclick: edit }, 'Edit tags and notes'));
    function edit() {
      const tagsIn = h('input', { id: 'tags-input', value: (job.tags || []).join(' '), 'aria-label': 'Tags, separated by spaces' });
      const notesIn = h('textarea', { id: 'notes-input', rows: '3', 'aria-label': 'Notes' }, job.notes || '');
      const save = async (ev) => {
        ev.preventDefault();
        try {
          job = await api('PATCH', `/jobs/${id}`, { tags: tagsIn.value.split(/[\s,]+/).filter(Boolean), notes: notesIn.value });
          renderHead();
        } catch (e) {
          toast(e.message, 'error');
        }
      };
      clear(box, h('form', { class: 'label-form', onsubmit: save }, tagsIn, notesIn,
        h('button', { type: 'submit', id: 'save-labels' }, 'Save'), h('button', { type: 'button', onclick: show }, 'Cancel')));
      tagsIn.focus();
    }
    show();
    return box;
  }

  function renderGoodput() {
    const g = job.goodput;
    if (!g || g.ratio === null || g.ratio === undefined) return null;
    return h('p', { class: 'meta', id: 'job-goodput', title: 'useful training time / wall time over all attempts; work after the last checkpoint of a failed attempt is lost' },
      `goodput ${Math.round(g.ratio * 1000) / 10}% · useful ${fmt.seconds(g.useful_s)} of ${fmt.seconds(g.wall_s)}`,
      g.lost_s > 0 ? ` · lost to restarts ${fmt.seconds(g.lost_s)}` : '');
  }

  async function onStop() {
    if (!(await confirmDialog(`Stop job #${id}? Its workers get SIGTERM, then SIGKILL.`, 'Stop job'))) return;
    try {
      await api('POST', `/jobs/${id}/stop`, {});
      toast(`Stopping job #${id}`);
    } catch (e) {
      toast(e.message, 'error');
    }
  }

  async function loadJob() {
    try {
      job = await api('GET', `/jobs/${id}`);
      if (!alive) return;
      renderHead();
      renderSpec();
      logs.setRanks(worldSize());
      logs.setAttempts(job.attempt || 0);
    } catch (e) {
      if (alive) clear(head, errorBox(e, loadJob));
    }
  }

  function worldSize() {
    const n = job && job.spec && job.spec.scaling_config && job.spec.scaling_config.num_workers;
    return typeof n === 'number' ? n : (n && (n.max || n.min)) || 1;
  }

  function renderSpec() {
    const s = job.spec || {};
    clear(panels.spec,
      h('div', { class: 'spec-grid' },
        h('div', { class: 'card' }, h('h3', {}, 'Scaling'), h('pre', {}, JSON.stringify(s.scaling_config || {}, null, 2))),
        h('div', { class: 'card' }, h('h3', {}, 'Run config'), h('pre', {}, JSON.stringify(s.run_config || {}, null, 2))),
        h('div', { class: 'card' }, h('h3', {}, 'train_loop_config'), h('pre', {}, JSON.stringify(s.train_loop_config ?? null, null, 2)))),
      h('h3', {}, 'Whole spec'), h('pre', { class: 'card' }, JSON.stringify(s, null, 2)));
  }

  async function loadTimeline() {
    try {
      const [ev, at] = await Promise.all([api('GET', `/jobs/${id}/events`), api('GET', `/jobs/${id}/attempts`)]);
      if (!alive) return;
      const events = ev.events || ev;
      attempts = at.attempts || at;
      clear(panels.timeline,
        h('h2', {}, 'Attempts'),
        attempts.length ? table([
          { title: 'Attempt', cell: (a) => a.attempt },
          { title: 'Status', cell: (a) => badge(a.status) },
          { title: 'Workers', cell: (a) => a.world_size },
          { title: 'Started', cell: (a) => fmt.time(a.created_at) },
          { title: 'Finished', cell: (a) => fmt.time(a.finished_at) },
          { title: 'Startup', cell: startupBar },
          // --slurm: the Slurm job the attempt ran in (a column only when one did)
          ...(attempts.some((a) => a.slurm_job_id) ? [{ title: 'Slurm job', cell: (a) => a.slurm_job_id ?? '—' }] : []),
          { title: 'Error', cell: (a) => a.error || '—' },
        ], attempts) : empty('Not placed yet.'),
        h('h2', {}, 'Status timeline'),
        h('ol', { class: 'timeline' }, events.map((e) => h('li', { class: 'tl' },
          h('time', {}, fmt.time(e.at)), ' ', badge(e.status), e.attempt ? ` attempt ${e.attempt}` : '', e.message ? h('span', { class: 'tl-msg' }, ` — ${e.message}`) : null))));
      refreshMarkers();
    } catch (e) {
      if (alive) clear(panels.timeline, errorBox(e, loadTimeline));
    }
  }

  async function loadWorkers() {
    try {
      const r = await api('GET', `/jobs/${id}/workers`);
      if (!alive) return;
      const ws = (r.workers || r).slice().sort((a, b) => b.attempt - a.attempt || a.rank - b.rank);
      clear(panels.workers, ws.length ? table([
        { title: 'Attempt', cell: (w) => w.attempt },
        { title: 'Rank', cell: (w) => w.rank },
        { title: 'Node', cell: (w) => w.node_id },
        { title: 'GPUs', cell: (w) => (w.gpus && w.gpus.length ? w.gpus.join(',') : '—') },
        { title: 'PID', cell: (w) => w.pid ?? '—' },
        { title: 'State', cell: (w) => workerBadge(w) },
        { title: 'Exit', cell: (w) => (w.signal ? `signal ${w.signal}${w.signal === 9 ? ' (SIGKILL)' : w.signal === 15 ? ' (SIGTERM)' : ''}` : w.exit_code ?? '—') },
      ], ws) : empty('No workers yet: the job is waiting for room.'));
    } catch (e) {
      if (alive) clear(panels.workers, errorBox(e, loadWorkers));
    }
  }

  // The list and its best/latest marks from one read: the job (whose result names the best and
  // latest checkpoints) and its checkpoints fetched together and drawn once both are in, so the
  // marks never depend on which reply came first.
  async function loadCheckpoints() {
    try {
      const [j, r] = await Promise.all([api('GET', `/jobs/${id}`), api('GET', `/jobs/${id}/checkpoints`)]);
      if (!alive) return;
      checkpoints = r.checkpoints || r;
      const best = j.result && j.result.best_checkpoint && j.result.best_checkpoint.id;
      const latest = j.result && j.result.latest_checkpoint && j.result.latest_checkpoint.id;
      clear(panels.checkpoints, checkpoints.length ? table([
        { title: 'Checkpoint', cell: (c) => `checkpoint ${c.id}` },
        { title: 'Attempt', cell: (c) => c.attempt },
        { title: 'Step', cell: (c) => c.step ?? '—' },
        { title: 'Metrics', cell: (c) => Object.entries(c.metrics || {}).map(([k, v]) => `${k}=${fmt.value(v)}`).join(' ') || '—' },
        { title: 'Size', cell: (c) => fmt.bytes(c.size_bytes) },
        { title: 'Marks', cell: (c) => [c.id === best ? h('span', { class: 'mark best' }, 'best') : null, c.id === latest ? h('span', { class: 'mark latest' }, 'latest') : null] },
        { title: 'Created', cell: (c) => fmt.time(c.created_at) },
        { title: 'Download', cell: (c) => (c.artifact && c.artifact.state === 'complete'
          ? h('button', { type: 'button', class: 'link', onclick: () => download(c) }, 'archive (.tar)')
          : (c.artifact && c.artifact.state) || 'not uploaded') },
      ], checkpoints) : empty('No checkpoints yet.'));
      refreshMarkers();
    } catch (e) {
      if (alive) clear(panels.checkpoints, errorBox(e, loadCheckpoints));
    }
  }

  // The archive needs the token in a header, never in a URL: fetch it and save it as a blob.
  async function download(c) {
    try {
      const r = await fetch(`/api/v1/checkpoints/${c.id}/archive`, { headers: session.token ? { Authorization: `Bearer ${session.token}` } : {} });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      const url = URL.createObjectURL(await r.blob());
      const a = h('a', { href: url, download: `job-${id}-checkpoint-${c.id}.tar` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      toast(`download failed: ${e.message}`, 'error');
    }
  }

  function refreshMarkers() {
    // An attempt's marker sits where its first point is (step axis: the chart finds it) or when
    // it began (time).
    const att = attempts.filter((a) => a.attempt > 1).map((a) => ({ attempt: a.attempt, t: Date.parse(a.created_at) }));
    // Only the checkpoints kept: retention's deleted ones cannot be resumed from or downloaded.
    const ck = checkpoints.filter((c) => !(c.artifact && c.artifact.state === 'deleted')).map((c) => ({ label: `checkpoint ${c.id}`, step: c.step, t: Date.parse(c.created_at) }));
    charts.setMarkers(att, ck);
  }

  function soon(name, fn, ms = 300) {
    clearTimeout(timers[name]);
    timers[name] = setTimeout(fn, ms);
  }

  // The System tab: each rank's CPU and memory (usage.js), read when first shown and then grown
  // by the stream's `usage` rows.
  function loadSystem() {
    if (alive && current === 'system') usage.show();
  }

  function onEvent(m) {
    const d = m.data || {};
    if (m.kind === 'report') charts.addReport(d);
    else if (m.kind === 'log') logs.addChunk(d, m.at);
    else if (m.kind === 'usage') usage.add(d);
    else if (m.kind === 'worker') soon('workers', loadWorkers);
    else if (m.kind === 'checkpoint') soon('checkpoints', loadCheckpoints);
    else if (m.kind === 'event') {
      if (job && d.status) {
        job.status = d.status;
        if (d.attempt) job.attempt = d.attempt;
        if (d.message !== undefined) job.status_message = d.message;
        clear(head.querySelector('#job-status'), badge(d.status));
        renderHead();
      }
      soon('job', loadJob);
      soon('timeline', loadTimeline);
    }
  }

  // Subscribe first (from now on), then read the history: rows arriving meanwhile are merged
  // without duplicates (charts by report time, logs by chunk offset).
  const unsub = stream.subscribe(id, {
    onEvent,
    onSubscribed: () => {
      if (alive) loadAll();
    },
  });
  let loadedOnce = false;
  function loadAll() {
    loadedOnce = true;
    loadJob().then(() => charts.load(worldSize())).then(refreshMarkers);
    loadTimeline();
    loadWorkers();
    loadCheckpoints();
    logs.load();
  }
  // Without a live stream (the websocket port unreachable) the page still loads, once.
  const fallback = setTimeout(() => {
    if (alive && !loadedOnce) loadAll();
  }, 2000);
  timers.fallback = fallback;
  return () => {
    alive = false;
    Object.values(timers).forEach(clearTimeout);
    unsub();
    charts.destroy();
    dropUsage(panels.system);
  };
}
