// Overview: nodes (alive, lost, drained), CPUs and GPUs in use / total, jobs by status, the queue
// in order with each pending job's reason, recent jobs and failures. Refreshed from the cluster
// stream.
import { api } from '../api.js';
import { stream } from '../stream.js';
import { h, clear, fmt, badge, loading, errorBox, empty, table } from '../ui.js';

const ACTIVE = ['PENDING', 'STARTING', 'RUNNING', 'RESTARTING', 'STOPPING'];

function workersOf(spec) {
  const n = spec && spec.scaling_config && spec.scaling_config.num_workers;
  if (typeof n === 'number') return n;
  if (n && typeof n === 'object') return n.max || n.min || 1;
  return 1;
}

function usage(jobsActive, nodes) {
  let cpuTotal = 0;
  let gpuTotal = 0;
  for (const n of nodes) {
    if (n.status !== 'ALIVE') continue;
    const r = n.resources || {};
    cpuTotal += Number(r.CPU) || 0;
    gpuTotal += Array.isArray(r.GPU) ? r.GPU.length : Number(r.GPU) || 0;
  }
  let cpu = 0;
  let gpu = 0;
  for (const j of jobsActive) {
    if (!['STARTING', 'RUNNING', 'RESTARTING', 'STOPPING'].includes(j.status)) continue;
    const sc = (j.spec && j.spec.scaling_config) || {};
    const per = sc.resources_per_worker || {};
    const w = workersOf(j.spec);
    cpu += w * (per.CPU !== undefined ? Number(per.CPU) : 1);
    gpu += w * (per.GPU !== undefined ? Number(per.GPU) : sc.use_gpu ? 1 : 0);
  }
  return { cpu, cpuTotal, gpu, gpuTotal };
}

function stat(label, value, sub) {
  return h('div', { class: 'stat card' }, h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, value), sub ? h('div', { class: 'stat-sub' }, sub) : null);
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
      const [nodesR, activeR, recentR, failedR] = await Promise.all([
        api('GET', '/nodes'),
        api('GET', `/jobs?status=${ACTIVE.join(',')}&limit=1000`),
        api('GET', '/jobs?limit=10'),
        api('GET', '/jobs?status=FAILED&limit=5'),
      ]);
      if (!alive) return;
      const nodes = nodesR.nodes || nodesR;
      const active = activeR.jobs;
      const u = usage(active, nodes);
      const counts = {};
      for (const j of active) counts[j.status] = (counts[j.status] || 0) + 1;
      const nAlive = nodes.filter((n) => n.status === 'ALIVE').length;
      const nLost = nodes.filter((n) => n.status === 'LOST').length;
      const nDrained = nodes.filter((n) => n.draining).length;
      const queue = active.filter((j) => j.status === 'PENDING').reverse();
      clear(
        body,
        h(
          'section',
          { class: 'stats', 'aria-label': 'Cluster' },
          stat('Nodes', `${nAlive} alive`, `${nLost} lost · ${nDrained} drained`),
          stat('CPUs in use', `${u.cpu} / ${u.cpuTotal}`),
          stat('GPUs in use', `${u.gpu} / ${u.gpuTotal}`),
          stat('Jobs', `${(counts.RUNNING || 0)} running`, ACTIVE.filter((s) => counts[s]).map((s) => `${counts[s]} ${s.toLowerCase()}`).join(' · ') || 'no active jobs'),
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
