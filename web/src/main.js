// The dashboard's shell: sign-in, the hash router (#/jobs/7: nothing but the page's own files is
// ever requested from the server by path), the connection indicator and the live stream.
import './style.css';
import 'uplot/dist/uPlot.min.css';
import { api, ApiError, session, setToken, onUnauthorized } from './api.js';
import { stream } from './stream.js';
import { h, clear, loading, errorBox } from './ui.js';
import * as overview from './pages/overview.js';
import * as jobs from './pages/jobs.js';
import * as job from './pages/job.js';
import * as nodes from './pages/nodes.js';
import * as submit from './pages/submit.js';
import * as compare from './pages/compare.js';
import * as sweeps from './pages/sweeps.js';

const main = document.getElementById('main');
let cleanup = null;
let booted = false;
let routed = false; // the current page was rendered since sign-in

function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, query] = raw.split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean);
  if (parts.length === 0) return { page: overview, params, name: 'overview' };
  if (parts[0] === 'jobs' && parts[1]) return { page: job, params, id: parts[1], name: 'job' };
  if (parts[0] === 'jobs') return { page: jobs, params, name: 'jobs' };
  if (parts[0] === 'nodes') return { page: nodes, params, name: 'nodes' };
  if (parts[0] === 'submit') return { page: submit, params, name: 'submit' };
  if (parts[0] === 'compare') return { page: compare, params, name: 'compare' };
  if (parts[0] === 'sweeps' && parts[1]) return { page: sweeps, params, id: parts[1], name: 'sweep' };
  if (parts[0] === 'sweeps') return { page: sweeps, params, name: 'sweeps' };
  return null;
}

function route() {
  if (!booted) return;
  routed = true;
  if (cleanup) cleanup();
  cleanup = null;
  const r = parseRoute();
  document.querySelectorAll('#nav a').forEach((a) => {
    const target = a.getAttribute('href').replace(/^#/, '');
    const cur = (location.hash.replace(/^#/, '') || '/').split('?')[0];
    const on = target === '/' ? cur === '/' : cur.startsWith(target);
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
  if (!r) {
    clear(main, h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '#/' }, 'Back to the overview')));
    return;
  }
  document.body.dataset.page = r.name;
  cleanup = r.page.render(main, r) || null;
}

function renderWho() {
  const who = document.getElementById('who');
  const role = session.role;
  document.querySelectorAll('[data-needs="user"]').forEach((el) => {
    el.hidden = !(role === 'user' || role === 'admin');
  });
  if (session.authNone) {
    clear(who, h('span', { class: 'role' }, 'no sign-in (--auth none)'));
    return;
  }
  clear(
    who,
    role ? h('span', { class: 'role' }, role) : null,
    h('button', { type: 'button', class: 'link', onclick: signOut }, 'Sign out'),
  );
}

function signOut() {
  setToken(null);
  session.role = null;
  stream.stop();
  booted = false;
  routed = false;
  if (cleanup) cleanup();
  cleanup = null;
  showSignIn();
}

function showSignIn(message) {
  document.body.dataset.page = 'signin';
  clear(document.getElementById('who'));
  const err = h('p', { class: 'field-error', id: 'token-error', role: 'alert' }, message || '');
  const input = h('input', {
    id: 'token',
    name: 'token',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
    'aria-describedby': 'token-error',
  });
  const form = h(
    'form',
    { class: 'signin card', onsubmit: onSubmit },
    h('h1', {}, 'Sign in'),
    h('p', {}, 'Paste an API token (from ', h('code', {}, 'trainyard token create'), ' or the admin token file).'),
    h('label', { for: 'token' }, 'API token'),
    input,
    err,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  async function onSubmit(ev) {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    setToken(token);
    try {
      session.version = await api('GET', '/version');
      err.textContent = '';
      start();
    } catch (e) {
      setToken(null);
      err.textContent = e.status === 401 ? 'That token is unknown or revoked.' : e.message;
    }
  }
  clear(main, form);
  input.focus();
}

// Renders the page once the stream's welcome says the role (so buttons are right the first
// time), or after 1.5 s without it (the websocket port unreachable: the page still works).
function start() {
  booted = true;
  renderWho();
  stream.start();
  if (session.role) route();
  else
    setTimeout(() => {
      if (booted && !routed) route();
    }, 1500);
}

async function boot() {
  clear(main, loading('Connecting to the server…'));
  try {
    // Without a token, ask /health (no token needed) whether the server wants one, rather than
    // drawing a 401 (a red console error) from /version on every fresh page.
    if (!session.token && (await api('GET', '/health')).auth !== 'none') {
      showSignIn('');
      return;
    }
    session.version = await api('GET', '/version');
    if (!session.token) session.authNone = true;
    start();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      setToken(null);
      showSignIn(session.token ? 'Your token is no longer valid.' : '');
      return;
    }
    clear(main, errorBox(e, boot));
    setTimeout(() => {
      if (!booted) boot();
    }, 2000);
  }
}

stream.onWelcome((role) => {
  const changed = session.role !== role;
  session.role = role;
  renderWho();
  if (changed || !routed) route();
});
stream.onState((s) => {
  const el = document.getElementById('conn');
  const text = { live: 'live', connecting: 'connecting…', reconnecting: 'reconnecting…', refused: 'stream refused', idle: '' }[s];
  el.textContent = text || '';
  el.className = `conn ${s}`;
});
onUnauthorized(() => {
  if (booted && !session.authNone) signOut();
});
window.addEventListener('hashchange', route);
boot();
