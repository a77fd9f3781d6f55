// The live log viewer: one rank or all ranks interleaved, of the current attempt or an earlier one
// (the crash that ended attempt 1), each line with its time (when its chunk was stored), follow
// (stick to the bottom), search (only matching lines, highlighted), a jump to the first error,
// line wrapping on or off, and a download of the attempt's whole output. Lines come from
// GET /jobs/{id}/logs (format=jsonl) and then from the job stream's `log` rows; the DOM keeps at
// most MAX_LINES lines. Each line says its output stream (the agent keeps stdout and stderr apart):
// stderr's carry an "err" gutter and a red rule, and a filter shows both streams or one.
import { api } from './api.js';
import { h, clear, loading, errorBox, toast } from './ui.js';

const MAX_LINES = 5000;
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;
const ERROR_RE = /\b(error|exception|traceback|fatal|panic)\b/i;

export class LogViewer {
  constructor(container, jobId) {
    this.el = container;
    this.job = jobId;
    this.rank = 'all';
    this.attempt = null;
    this.search = '';
    this.stream = ''; // '' both, or 'stdout' / 'stderr' only
    this.follow = true;
    this.maxOffset = new Map(); // `${attempt}/${rank}/${stream}` → highest chunk offset read
    this.count = 0;
    this.pending = [];
    this.queue = []; // live lines not yet appended (flush, once a frame)
    this.raf = 0;
    this.loaded = false;

    this.rankSel = h('select', { id: 'log-rank', onchange: () => { this.rank = this.rankSel.value; this.load(); } }, h('option', { value: 'all' }, 'all ranks'));
    this.attemptSel = h('select', { id: 'log-attempt', onchange: () => { this.attempt = Number(this.attemptSel.value) || null; this.load(); } }, h('option', { value: '' }, 'current attempt'));
    this.streamSel = h('select', { id: 'log-stream', onchange: () => { this.stream = this.streamSel.value; this.load(); } },
      h('option', { value: '' }, 'stdout + stderr'), h('option', { value: 'stdout' }, 'stdout only'), h('option', { value: 'stderr' }, 'stderr only'));
    this.wrapCb = h('input', { id: 'log-wrap', type: 'checkbox', checked: true, onchange: () => this.view.classList.toggle('nowrap', !this.wrapCb.checked) });
    this.dlBtn = h('button', { type: 'button', id: 'log-download', onclick: () => this.download() }, 'Download');
    this.searchIn = h('input', { id: 'log-search', type: 'search', placeholder: 'search', oninput: () => this.applySearch() });
    this.followCb = h('input', { id: 'log-follow', type: 'checkbox', checked: true, onchange: () => { this.follow = this.followCb.checked; if (this.follow) this.toBottom(); } });
    this.errBtn = h('button', { type: 'button', onclick: () => this.jumpToError() }, 'First error');
    this.info = h('span', { class: 'log-info', role: 'status' });
    this.view = h('div', { class: 'log-view', tabindex: '0', role: 'log', 'aria-label': 'Worker output', onscroll: () => this.onScroll() });
    clear(container,
      h('div', { class: 'log-controls' },
        h('label', { for: 'log-attempt' }, 'Attempt'), this.attemptSel,
        h('label', { for: 'log-rank' }, 'Rank'), this.rankSel,
        h('label', { for: 'log-stream' }, 'Stream'), this.streamSel,
        h('label', { for: 'log-search', class: 'sr-only' }, 'Search'), this.searchIn,
        h('label', { for: 'log-follow', class: 'check' }, this.followCb, 'Follow'),
        h('label', { for: 'log-wrap', class: 'check' }, this.wrapCb, 'Wrap'),
        this.errBtn, this.dlBtn, this.info),
      this.view);
  }

  setRanks(n) {
    const have = this.rankSel.options.length - 1;
    for (let r = have; r < n; r++) this.rankSel.append(h('option', { value: String(r) }, `rank ${r}`));
  }

  // The job's attempts so far (its current one is n): each can be chosen.
  setAttempts(n) {
    const have = this.attemptSel.options.length - 1;
    for (let a = have + 1; a <= n; a++) this.attemptSel.append(h('option', { value: String(a) }, `attempt ${a}`));
  }

  // The whole output of the attempt and rank(s) shown (not only the lines loaded), as a text file.
  // Fetched with the token in a header (never in a URL), saved as a blob.
  async download() {
    const q = new URLSearchParams();
    if (this.rank !== 'all') q.set('rank', this.rank);
    if (this.attempt) q.set('attempt', String(this.attempt));
    if (this.stream) q.set('stream', this.stream);
    try {
      const text = await api('GET', `/jobs/${this.job}/logs?${q}`, undefined, { raw: true });
      const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
      const name = `job-${this.job}${this.attempt ? `-attempt-${this.attempt}` : ''}${this.rank !== 'all' ? `-rank-${this.rank}` : ''}.log`;
      const a = h('a', { href: url, download: name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      toast(`download failed: ${e.message}`, 'error');
    }
  }

  async load() {
    this.loaded = false;
    this.pending = [];
    this.queue = [];
    this.maxOffset.clear();
    this.count = 0;
    clear(this.view, loading('Loading logs…'));
    const q = new URLSearchParams({ format: 'jsonl', tail: '2000' });
    if (this.rank !== 'all') q.set('rank', this.rank);
    if (this.attempt) q.set('attempt', String(this.attempt));
    if (this.stream) q.set('stream', this.stream);
    try {
      const text = await api('GET', `/jobs/${this.job}/logs?${q}`, undefined, { raw: true });
      clear(this.view);
      const frag = document.createDocumentFragment();
      for (const l of text.split('\n')) {
        if (!l) continue;
        let o;
        try { o = JSON.parse(l); } catch { continue; }
        const key = `${o.attempt}/${o.rank}/${o.stream || 'stdout'}`;
        this.maxOffset.set(key, Math.max(this.maxOffset.get(key) ?? -1, o.offset));
        frag.append(this.lineEl(o.rank, o.line, o.at, o.stream));
      }
      this.view.append(frag);
      if (!this.view.childElementCount) this.view.append(h('p', { class: 'state empty log-empty' }, 'No output yet.'));
      this.loaded = true;
      for (const [d, at] of this.pending) this.addChunk(d, at);
      this.pending = [];
      this.trim();
      this.applySearch();
      if (this.follow) this.toBottom();
    } catch (e) {
      clear(this.view, errorBox(e, () => this.load()));
    }
  }

  lineEl(rank, text, at, stream) {
    this.count++;
    const clean = String(text).replace(ANSI, '');
    const t = at ? new Date(at) : null;
    const time = t && !Number.isNaN(t.getTime())
      ? h('time', { class: 'log-time', datetime: at, title: `stored ${t.toLocaleString()}` }, `${t.toLocaleTimeString([], { hour12: false })}.${String(t.getMilliseconds()).padStart(3, '0')}`)
      : null;
    const err = stream === 'stderr';
    const el = h('div', { class: 'log-line', dataset: { rank, stream: stream || 'stdout' } },
      h('span', { class: 'log-stream', title: err ? 'written to stderr' : 'written to stdout' }),
      time, time ? ' ' : null, h('span', { class: 'log-rank' }, `[${rank}]`), ' ', clean);
    if (err) el.classList.add('is-stderr');
    if (ERROR_RE.test(clean)) el.classList.add('is-error');
    return el;
  }

  // A live `log` row (its data; at: the row's time).
  addChunk(d, at) {
    if (!this.loaded) {
      this.pending.push([d, at]);
      return;
    }
    if (this.rank !== 'all' && String(d.rank) !== this.rank) return;
    if (this.attempt && d.attempt !== this.attempt) return;
    const stream = d.stream || 'stdout';
    if (this.stream && stream !== this.stream) return;
    const key = `${d.attempt}/${d.rank}/${stream}`;
    if (d.offset <= (this.maxOffset.get(key) ?? -1)) return;
    this.maxOffset.set(key, d.offset);
    for (const line of d.lines || []) this.queue.push([d.rank, line, at, stream]);
    if (this.queue.length > MAX_LINES) this.queue.splice(0, this.queue.length - MAX_LINES);
    if (!this.raf) this.raf = requestAnimationFrame(() => this.flush());
  }

  // The live lines of a frame are appended together: one layout and one scroll a frame, not one
  // per chunk (8 ranks printing 10 lines a second are 80 chunks).
  flush() {
    this.raf = 0;
    const lines = this.queue;
    this.queue = [];
    if (!lines.length || !this.loaded) return;
    const emptyEl = this.view.querySelector('.log-empty');
    if (emptyEl) emptyEl.remove();
    const frag = document.createDocumentFragment();
    const needle = this.search.toLowerCase();
    for (const [rank, line, at, stream] of lines) {
      const el = this.lineEl(rank, line, at, stream);
      if (needle && !el.textContent.toLowerCase().includes(needle)) el.hidden = true;
      frag.append(el);
    }
    this.view.append(frag);
    this.trim();
    if (this.follow) this.toBottom();
  }

  trim() {
    let extra = this.view.childElementCount - MAX_LINES;
    while (extra-- > 0) this.view.firstElementChild.remove();
  }

  applySearch() {
    this.search = this.searchIn.value;
    const needle = this.search.toLowerCase();
    let shown = 0;
    for (const el of this.view.children) {
      if (!el.classList.contains('log-line')) continue;
      const hit = !needle || el.textContent.toLowerCase().includes(needle);
      el.hidden = !hit;
      el.classList.toggle('hit', !!needle && hit);
      if (hit) shown++;
    }
    this.info.textContent = needle ? `${shown} matching line${shown === 1 ? '' : 's'}` : '';
  }

  jumpToError() {
    const el = [...this.view.querySelectorAll('.log-line.is-error')].find((e) => !e.hidden);
    if (!el) {
      this.info.textContent = 'no error in the lines loaded';
      return;
    }
    this.follow = false;
    this.followCb.checked = false;
    this.view.querySelectorAll('.current').forEach((e) => e.classList.remove('current'));
    el.classList.add('current');
    el.scrollIntoView({ block: 'center' });
    this.info.textContent = 'first error';
  }

  toBottom() {
    this.view.scrollTop = this.view.scrollHeight;
  }

  onScroll() {
    const atBottom = this.view.scrollHeight - this.view.scrollTop - this.view.clientHeight < 30;
    if (!atBottom && this.follow && this.loaded) {
      this.follow = false;
      this.followCb.checked = false;
    }
  }
}
