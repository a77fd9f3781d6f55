// Overview: nodes (alive, lost, drained), CPUs and GPUs in use / total (the server's figures: each
// node's `allocated`), jobs by status, the queue in order with each pending job's reason, recent
// jobs and failures, goodput over the last day (cluster and per user). Refreshed from the cluster
// stream.
import { JOB_STATUSES, TERMINAL_JOB_STATUSES, JOB_PENDING, JOB_RUNNING, JOB_FAILED, NODE_ALIVE, NODE_LOST } from 'vocab';
import { api } from '../api.js';
import { stream } from '../stream.js';
import { h, clear, fmt, badge, loading, errorBox, empty, table } from '../ui.js';

const ACTIVE = JOB_STATUSES.filter((s) => !TERMINAL_JOB_STATUSES.includes(s));

// CPUs and GPUs in use (what the live workers hold, as the server's scheduler counts it: each
// node's `allocated`) and in total, over the alive nodes.
function usage(nodes) {
  const u = { cpu: 0, cpuTotal: 0, gpu: 0, gpuTotal: 0 };
  for (const n of nodes) {
    if (n.status !== NODE_ALIVE) continue;
    const r = n.resources || {};
    const a = n.allocated || {};
    u.cpuTotal += Number(r.CPU) || 0;
    u.gpuTotal += Array.isArray(r.GPU) ? r.GPU.length : Number(r.GPU) || 0;
    u.cpu += Number(a.cpu) || 0;
    u.gpu += Number(a.gpu) || 0;
  }
  return u;
}

function stat(label, value, sub) {
  return h('div', { class: 'stat card' }, h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, value), sub ? h('div', { class: 'stat-sub' }, sub) : null);
}

// Goodput (GET /goodput: the server's sums) as a percentage.
function pct(r) {
  return typeof r === 'number' ? `${Math.round(r * 1000) / 10}%` : '—';
}

function jobLink(j) {
  return h('a', { href: `#/jobs/${j.id}` }, `#${j.id} ${j.name || ''}`);
}

export function render(main) {
  let alive = true;
  let timer = null;
  const body = h('div', {}, loading());
  clear(main, h('h1', {}, 'Overview'), body);

  async function load() {
    try {
      const [nodesR, activeR, recentR, failedR, goodR] = await Promise.all([
        api('GET', '/nodes'),
        api('GET', `/jobs?status=${ACTIVE.join(',')}&limit=1000`),
        api('GET', '/jobs?limit=10'),
        api('GET', `/jobs?status=${JOB_FAILED}&limit=5`),
        api('GET', '/goodput'),
      ]);
      if (!alive) return;
      const nodes = nodesR.nodes || nodesR;
      const active = activeR.jobs;
      const u = usage(nodes);
      const counts = {};
      for (const j of active) counts[j.status] = (counts[j.status] || 0) + 1;
      const nAlive = nodes.filter((n) => n.status === NODE_ALIVE).length;
      const nLost = nodes.filter((n) => n.status === NODE_LOST).length;
      const nDrained = nodes.filter((n) => n.draining).length;
      const queue = active.filter((j) => j.status === JOB_PENDING).reverse();
      clear(
        body,
        h(
          'section',
          { class: 'stats', 'aria-label': 'Cluster' },
          stat('Nodes', `${nAlive} alive`, `${nLost} lost · ${nDrained} drained`),
          stat('CPUs in use', `${Math.round(u.cpu * 1000) / 1000} / ${u.cpuTotal}`),
          stat('GPUs in use', `${u.gpu} / ${u.gpuTotal}`),
          stat('Goodput (last day)', pct(goodR.cluster.ratio), `useful ${fmt.seconds(goodR.cluster.useful_s)} of ${fmt.seconds(goodR.cluster.wall_s)}`),
          stat('Jobs', `${counts[JOB_RUNNING] || 0} running`, ACTIVE.filter((s) => counts[s]).map((s) => `${counts[s]} ${s.toLowerCase()}`).join(' · ') || 'no active jobs'),
        ),
        h('section', {}, h('h2', {}, 'Queue'),
          queue.length
            ? table([
                { title: 'Job', cell: jobLink },
                { title: 'Owner', cell: (j) => j.owner },
                { title: 'Priority', cell: (j) => j.priority },
                { title: 'Waiting since', cell: (j) => fmt.ago(j.created_at) },
                { title: 'Reason', cell: (j) => j.status_message || '—' },
              ], queue)
            : empty('Nothing is waiting.')),
        h('section', {}, h('h2', {}, 'Recent jobs'),
          recentR.jobs.length
            ? table([
                { title: 'Job', cell: jobLink },
                { title: 'Status', cell: (j) => badge(j.status) },
                { title: 'Owner', cell: (j) => j.owner },
                { title: 'Created', cell: (j) => fmt.ago(j.created_at) },
              ], recentR.jobs)
            : empty('No jobs yet. Submit one.')),
        h('section', { id: 'goodput-owners' }, h('h2', {}, 'Goodput by user (last day)'),
          goodR.owners.length
            ? table([
                { title: 'User', cell: (o) => o.owner },
                { title: 'Goodput', cell: (o) => pct(o.ratio) },
                { title: 'Useful', cell: (o) => fmt.seconds(o.useful_s) },
                { title: 'Lost to restarts', cell: (o) => fmt.seconds(o.lost_s) },
                { title: 'Wall', cell: (o) => fmt.seconds(o.wall_s) },
              ], goodR.owners)
            : empty('No job ran in the last day.')),
        h('section', {}, h('h2', {}, 'Recent failures'),
          failedR.jobs.length
            ? table([
                { title: 'Job', cell: jobLink },
                { title: 'Finished', cell: (j) => fmt.ago(j.finished_at) },
                { title: 'Error', cell: (j) => (j.result && j.result.error) || j.status_message || '—' },
              ], failedR.jobs)
            : empty('No failures.')),
      );
    } catch (e) {
      if (alive) clear(body, errorBox(e, load));
    }
  }

  function soon() {
    clearTimeout(timer);
    timer = setTimeout(load, 300);
  }
  load();
  const unsub = stream.subscribe('cluster', { onEvent: soon, onSubscribed: soon });
  return () => {
    alive = false;
    clearTimeout(timer);
    unsub();
  };
}
