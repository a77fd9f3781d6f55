// Small DOM helpers shared by the pages: no framework, no innerHTML with data (text only).
import * as V from 'vocab';

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const fmt = {
  time(s) {
    if (!s) return '—';
    const d = new Date(s);
    return Number.isNaN(d.getTime()) ? s : d.toLocaleString();
  },
  ago(s) {
    if (!s) return '—';
    const sec = Math.round((Date.now() - new Date(s).getTime()) / 1000);
    if (sec < 60) return `${Math.max(sec, 0)} s ago`;
    if (sec < 3600) return `${Math.round(sec / 60)} min ago`;
    if (sec < 86400) return `${Math.round(sec / 3600)} h ago`;
    return `${Math.round(sec / 86400)} d ago`;
  },
  // From start to end (or now), e.g. "42 s", "7 min", "2.5 h".
  duration(start, end) {
    const s = Math.max(0, Math.round(((end ? Date.parse(end) : Date.now()) - Date.parse(start)) / 1000));
    if (!Number.isFinite(s)) return '—';
    return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`;
  },
  // A number of seconds, e.g. "0.42 s", "42 s", "7 min", "2.5 h".
  seconds(v) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return '—';
    if (v < 10) return `${v.toFixed(2)} s`;
    return v < 120 ? `${Math.round(v)} s` : v < 7200 ? `${Math.round(v / 60)} min` : `${(v / 3600).toFixed(1)} h`;
  },
  bytes(n) {
    if (n === null || n === undefined) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) {
      n /= 1024;
      i++;
    }
    return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
  },
  num(v) {
    if (typeof v !== 'number') return v === null || v === undefined ? '—' : String(v);
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? v.toExponential(3) : v.toPrecision(5);
  },
  // A reported value: a number as num() writes it, a string as it is, anything else as JSON.
  value(v) {
    if (typeof v === 'number' || v === undefined) return fmt.num(v);
    return typeof v === 'string' ? v : JSON.stringify(v);
  },
};

// A status badge's colour: what the status means to the reader, not its name (the names come from
// the vocabulary, so CSS spells none of them).
const TONES = new Map([
  [V.JOB_STARTING, 'live'], [V.JOB_RUNNING, 'live'], [V.NODE_ALIVE, 'live'],
  [V.JOB_SUCCEEDED, 'ok'],
  [V.JOB_FAILED, 'bad'], [V.NODE_LOST, 'bad'],
  [V.JOB_STOPPED, 'warn'], [V.JOB_STOPPING, 'warn'], [V.JOB_RESTARTING, 'warn'],
]);

export function badge(status, tone = TONES.get(status)) {
  return h('span', { class: tone ? `badge tone-${tone}` : 'badge' }, status || '—');
}

// A worker's badge: a worker that exited is green only when it exited with code 0; killed by a signal
// (SIGKILL after a stop's grace period, the OOM killer) or with another code it is red.
export function workerBadge(w) {
  if (w.status !== V.WORKER_EXITED) return badge(w.status);
  return badge(w.status, w.exit_code === 0 && !w.signal ? 'ok' : 'bad');
}

export function loading(what = 'Loading…') {
  return h('p', { class: 'state loading', role: 'status' }, what);
}
export function empty(what) {
  return h('p', { class: 'state empty' }, what);
}
export function errorBox(err, retry) {
  return h(
    'div',
    { class: 'state error', role: 'alert' },
    h('strong', {}, err && err.status === 0 ? 'Server unreachable' : 'Error'),
    ' ',
    (err && err.message) || String(err),
    retry ? h('button', { type: 'button', onclick: retry }, 'Retry') : null,
  );
}

export function table(columns, rows, { caption, rowAttrs } = {}) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      caption ? h('caption', {}, caption) : null,
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c.title)))),
      h(
        'tbody',
        {},
        rows.map((r) =>
          h(
            'tr',
            rowAttrs ? rowAttrs(r) : {},
            columns.map((c) => h('td', { 'data-label': c.title }, c.cell(r))),
          ),
        ),
      ),
    ),
  );
}

// A modal confirmation (a <dialog>, keyboard friendly: Esc cancels, focus on Cancel). `extra`:
// an element shown under the question (a choice the caller reads after it resolves), or null.
export function confirmDialog(question, okLabel, extra = null) {
  return new Promise((resolve) => {
    const dlg = h(
      'dialog',
      { class: 'confirm', 'aria-label': question },
      h('p', {}, question),
      extra,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'button', class: 'cancel', onclick: () => dlg.close('cancel') }, 'Cancel'),
        h('button', { type: 'button', class: 'danger ok', onclick: () => dlg.close('ok') }, okLabel),
      ),
    );
    dlg.addEventListener('close', () => {
      resolve(dlg.returnValue === 'ok');
      dlg.remove();
    });
    document.body.append(dlg);
    dlg.showModal();
    dlg.querySelector('.cancel').focus();
  });
}

export function toast(text, kind = 'info') {
  const t = h('div', { class: `toast ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
  document.body.append(t);
  setTimeout(() => t.remove(), 5000);
}
