// Nodes: each node's resources, GPUs (type, which are in use, and NVML's latest sample per GPU),
// running workers, a DRAINING badge, and Drain (its running jobs checkpoint and move, or finish
// there) / Undrain for admins. Refreshed from the cluster stream.
import { JOB_STATUSES, TERMINAL_JOB_STATUSES, JOB_PENDING, LIVE_WORKER_STATUSES } from 'vocab';
import { api, can } from '../api.js';
import { stream } from '../stream.js';
import { h, clear, fmt, badge, loading, errorBox, empty, confirmDialog, toast } from '../ui.js';
import { renderNodeUsage, dropUsage, USAGE_REFRESH_MS } from '../usage.js';

// The statuses of a job whose current attempt may have live workers: placed, not yet finished.
const PLACED_JOB_STATUSES = JOB_STATUSES.filter((s) => s !== JOB_PENDING && !TERMINAL_JOB_STATUSES.includes(s));

export function render(main) {
  let alive = true;
  let timer = null;
  const body = h('div', { class: 'nodes' }, loading());
  clear(main, h('h1', {}, 'Nodes'), body);

  async function load() {
    try {
      const [r, active] = await Promise.all([api('GET', '/nodes'), api('GET', `/jobs?status=${PLACED_JOB_STATUSES.join(',')}&limit=200`)]);
      if (!alive) return;
      const nodes = r.nodes || r;
      if (!nodes.length) {
        clear(body, empty('No node has joined yet. Start an agent: trainyard-agent --server ws://HOST:PORT --token-file cluster.token'));
        return;
      }
      // Which workers run where (GPU indices in use per node).
      const byNode = new Map();
      await Promise.all(active.jobs.map(async (j) => {
        try {
          const w = await api('GET', `/jobs/${j.id}/workers`);
          for (const x of w.workers || w) {
            if (x.attempt !== j.attempt || !LIVE_WORKER_STATUSES.includes(x.status)) continue;
            if (!byNode.has(x.node_id)) byNode.set(x.node_id, []);
            byNode.get(x.node_id).push({ job: j, w: x });
          }
        } catch {
          /* the job finished meanwhile */
        }
      }));
      if (!alive) return;
      usageBoxes.forEach(dropUsage);
      clear(body, nodes.map((n) => nodeCard(n, byNode.get(n.id) || [])));
      drawUsage();
    } catch (e) {
      if (alive) clear(body, errorBox(e, load));
    }
  }

  function nodeCard(n, workers) {
    const r = n.resources || {};
    const gpus = Array.isArray(r.GPU) ? r.GPU : [];
    const used = new Set(workers.flatMap((x) => x.w.gpus || []));
    const other = Object.entries(r).filter(([k]) => !['CPU', 'GPU', 'memory_mb'].includes(k));
    const action = n.draining ? 'undrain' : 'drain';
    const btn = h('button', {
      type: 'button', class: n.draining ? '' : 'danger', disabled: !can.drain(),
      title: can.drain() ? '' : 'only admins drain nodes', dataset: { node: n.id },
      onclick: async () => {
        // What the server does (POST /nodes/{id}/drain): no new workers; running jobs are asked to
        // checkpoint, stopped and restarted elsewhere, unless "preempt": false lets them finish.
        const jobs = new Set(workers.map((x) => x.job.id)).size;
        const finish = h('input', { type: 'checkbox', name: 'no-preempt' });
        const question = n.draining
          ? `Undrain ${n.id}? New workers may be placed there again.`
          : `Drain ${n.id}? No new workers are placed there. ${jobs === 1 ? 'The job running there is' : `The ${jobs} jobs running there are`} asked to checkpoint, stopped, and restarted elsewhere from their latest checkpoint.`;
        const choice = n.draining ? null : h('label', { class: 'choice' }, finish, ' Let running jobs finish here instead (no checkpoint, no move)');
        if (!(await confirmDialog(question, n.draining ? 'Undrain' : 'Drain', choice))) return;
        try {
          const r = await api('POST', `/nodes/${encodeURIComponent(n.id)}/${action}`, action === 'drain' && finish.checked ? { preempt: false } : {});
          const moved = (r && r.preempted_jobs) || [];
          toast(n.draining ? `${n.id}: undrained` : finish.checked ? `${n.id}: draining; running jobs finish there` : `${n.id}: draining${moved.length ? `; moving job${moved.length > 1 ? 's' : ''} ${moved.map((j) => `#${j}`).join(', ')}` : ''}`);
          load();
        } catch (e) {
          toast(e.message, 'error');
        }
      },
    }, n.draining ? 'Undrain' : 'Drain');
    return h('article', { class: 'node card', dataset: { node: n.id } },
      h('header', {}, h('h2', {}, n.id), badge(n.status), n.draining ? badge('DRAINING', 'warn') : null, h('div', { class: 'actions' }, btn)),
      h('p', { class: 'meta' }, `host ${n.hostname || '?'} · ${n.address || ''} · agent ${n.agent_version || '?'} · heartbeat ${fmt.ago(n.last_heartbeat_at)}`),
      conditionList(n.conditions || []),
      h('dl', { class: 'res' },
        h('dt', {}, 'CPUs'), h('dd', {}, String(r.CPU ?? '—')),
        h('dt', {}, 'Memory'), h('dd', {}, r.memory_mb ? fmt.bytes(r.memory_mb * 1048576) : '—'),
        h('dt', {}, 'GPUs'), h('dd', {}, gpus.length ? h('span', { class: 'gpus' }, `${n.gpu_type || 'GPU'}: `, gpus.map((g) => h('span', { class: `gpu${used.has(g) ? ' used' : ''}`, title: used.has(g) ? 'in use' : 'free' }, String(g)))) : 'none'),
        other.map(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]),
        h('dt', {}, 'Workers'), h('dd', {}, String(n.running_workers ?? workers.length)),
        // The agent data directory's free space; under disk pressure no new workers go there.
        n.disk ? [h('dt', {}, 'Disk free'), h('dd', { class: n.disk.pressure ? 'disk-pressure' : '', title: n.disk.path },
          `${fmt.bytes(n.disk.free_mb * 1048576)} of ${fmt.bytes(n.disk.total_mb * 1048576)}`, n.disk.pressure ? ' ' : null, n.disk.pressure ? badge('DISK PRESSURE', 'warn') : null)] : null),
      gpuTable(n.gpus || []),
      usageBox(n.id),
      workers.length ? h('ul', { class: 'node-workers' }, workers.map(({ job, w }) => h('li', {}, h('a', { href: `#/jobs/${job.id}` }, `#${job.id} ${job.name || ''}`), ` rank ${w.rank} · pid ${w.pid ?? '—'} · ${w.status}`))) : h('p', { class: 'meta' }, 'No workers running.'));
  }

  // What the node's agent reports wrong (e.g. artifact-store-unreachable: its uploads fail), with
  // the message naming the URL and the error.
  function conditionList(conditions) {
    if (!conditions.length) return null;
    return h('ul', { class: 'conditions' }, conditions.map((c) => h('li', { class: 'condition', dataset: { condition: c.type } },
      badge(c.type, 'warn'), ` ${c.message} (since ${fmt.ago(c.since)})`)));
  }

  // NVML's view of each GPU (agents that discovered them; declared GPUs have none).
  function gpuTable(gpus) {
    if (!gpus.length) return null;
    const num = (v, unit) => (v === null || v === undefined ? '—' : `${v}${unit}`);
    return h('table', { class: 'gpu-samples' },
      h('thead', {}, h('tr', {}, ['GPU', 'UUID', 'Use', 'Memory', 'Temp', 'Power'].map((t) => h('th', {}, t)))),
      h('tbody', {}, gpus.map((g) => h('tr', { class: g.lost ? 'unhealthy' : '', dataset: { gpu: String(g.index) } },
        h('td', {}, `${g.index}${g.lost ? ' (lost)' : ''}`),
        h('td', { title: g.name || '' }, g.uuid),
        h('td', {}, num(g.utilization_pct, '%')),
        h('td', {}, `${fmt.bytes((g.memory_used_mb || 0) * 1048576)} / ${fmt.bytes((g.memory_mb || 0) * 1048576)}`),
        h('td', {}, num(g.temperature_c, ' °C')),
        h('td', {}, g.power_mw === null || g.power_mw === undefined ? '—' : `${Math.round(g.power_mw / 1000)} W`)))));
  }

  // Each card's chart of its workers' CPU and memory (usage.js), re-read every 10 s.
  let usageBoxes = [];
  let usageTimer = null;
  function usageBox(id) {
    const box = h('div', { class: 'node-usage-box', dataset: { node: id } });
    usageBoxes.push(box);
    return box;
  }
  function drawUsage() {
    clearTimeout(usageTimer);
    usageBoxes = usageBoxes.filter((b) => b.isConnected);
    Promise.all(usageBoxes.map((b) => renderNodeUsage(b, b.dataset.node))).then(() => {
      if (alive) usageTimer = setTimeout(drawUsage, USAGE_REFRESH_MS);
    });
  }

  function soon() {
    clearTimeout(timer);
    timer = setTimeout(load, 300);
  }
  load();
  const unsub = stream.subscribe('cluster', { onEvent: soon });
  return () => {
    alive = false;
    clearTimeout(timer);
    clearTimeout(usageTimer);
    usageBoxes.forEach(dropUsage);
    unsub();
  };
}
