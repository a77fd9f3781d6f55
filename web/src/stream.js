// The /stream websocket (docs/streams.md): authenticates with the first message (the token never
// travels in the URL), keeps subscriptions, and after a dropped connection (server restart,
// `closing`) reconnects with backoff and resubscribes after the last seq it delivered, so no row
// is lost or repeated.
import { session } from './api.js';

const PROTOCOL = 'trainyard-stream.v1';

export class Stream {
  constructor() {
    this.ws = null;
    this.subs = new Map(); // key 'cluster' | job id → {after, handlers:Set, live, pending}
    this.backoff = 250;
    this.state = 'idle';
    this.stateListeners = new Set();
    this.welcomeListeners = new Set();
    this.timer = null;
    this.stopped = false;
  }

  onState(fn) {
    this.stateListeners.add(fn);
    fn(this.state);
    return () => this.stateListeners.delete(fn);
  }

  onWelcome(fn) {
    this.welcomeListeners.add(fn);
  }

  setState(s) {
    this.state = s;
    this.stateListeners.forEach((fn) => fn(s));
  }

  url() {
    const st = session.version && session.version.stream;
    const secure = location.protocol === 'https:';
    const port = st && st.port ? st.port : location.port;
    const path = (st && st.path) || '/stream';
    return `${secure ? 'wss' : 'ws'}://${location.hostname}:${port}${path}`;
  }

  start() {
    this.stopped = false;
    if (this.ws) return;
    this.setState('connecting');
    let ws;
    try {
      ws = new WebSocket(this.url(), PROTOCOL);
    } catch {
      this.retry();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      ws.send(JSON.stringify({ type: 'auth', token: session.token || 'none' }));
    };
    ws.onmessage = (ev) => this.onMessage(ev.data);
    ws.onclose = () => {
      if (this.ws === ws) this.ws = null;
      this.subs.forEach((s) => (s.live = false));
      if (!this.stopped) this.retry();
    };
    ws.onerror = () => {};
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close();
    this.ws = null;
    this.setState('idle');
  }

  retry() {
    this.setState('reconnecting');
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.start(), this.backoff);
    this.backoff = Math.min(this.backoff * 2, 4000);
  }

  send(msg) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  subMessage(key, type, after) {
    const m = key === 'cluster' ? { type, cluster: true } : { type, job: Number(key) };
    if (after !== undefined) m.after = after;
    // Batched delivery: several events in one {"type":"events"} message (docs/streams.md).
    if (type === 'subscribe') m.batch = true;
    return m;
  }

  onMessage(text) {
    let m;
    try {
      m = JSON.parse(text);
    } catch {
      return;
    }
    if (m.type === 'welcome') {
      this.backoff = 250;
      this.setState('live');
      this.welcomeListeners.forEach((fn) => fn(m.role));
      this.subs.forEach((s, key) => this.sendSubscribe(key, s));
      return;
    }
    if (m.type === 'subscribed') {
      const key = m.cluster ? 'cluster' : String(m.job);
      const s = this.subs.get(key);
      if (!s) return;
      if (s.after === null) {
        // "from now": learn the head, then resubscribe after it (no history replayed).
        s.after = m.head;
        this.send(this.subMessage(key, 'unsubscribe'));
        this.sendSubscribe(key, s);
        return;
      }
      s.live = true;
      s.handlers.forEach((h) => h.onSubscribed && h.onSubscribed(m.head));
      return;
    }
    if (m.type === 'event') {
      this.onEvent(m);
      return;
    }
    if (m.type === 'events' && Array.isArray(m.events)) {
      m.events.forEach((e) => this.onEvent(e));
      return;
    }
    if (m.type === 'closing') {
      const r = m.resume || {};
      if (r.cluster !== undefined && this.subs.has('cluster')) this.subs.get('cluster').after = r.cluster;
      return;
    }
    if (m.type === 'error') {
      if (m.code === 'bad_token' || m.code === 'not_authenticated') this.setState('refused');
    }
  }

  onEvent(m) {
    const key = m.cluster ? 'cluster' : String(m.job);
    const s = this.subs.get(key);
    if (!s || s.after === null || m.seq <= s.after) return;
    s.after = m.seq;
    s.handlers.forEach((h) => h.onEvent(m));
  }

  sendSubscribe(key, s) {
    // Number.MAX_SAFE_INTEGER: subscribe past every row to read the head (see onMessage).
    const after = s.after === null ? Number.MAX_SAFE_INTEGER : s.after;
    this.send(this.subMessage(key, 'subscribe', after));
  }

  // Subscribes `handler` ({onEvent(msg), onSubscribed(head)}) to key ('cluster' or a job id),
  // from now on (rows committed after the subscription). Returns an unsubscribe function.
  subscribe(key, handler) {
    key = String(key);
    let s = this.subs.get(key);
    if (!s) {
      s = { after: null, handlers: new Set(), live: false };
      this.subs.set(key, s);
      if (this.state === 'live') this.sendSubscribe(key, s);
    }
    s.handlers.add(handler);
    if (s.live && handler.onSubscribed) handler.onSubscribed(s.after);
    return () => {
      s.handlers.delete(handler);
      if (s.handlers.size === 0 && this.subs.get(key) === s) {
        this.subs.delete(key);
        if (s.after !== null) this.send(this.subMessage(key, 'unsubscribe'));
      }
    };
  }
}

export const stream = new Stream();
