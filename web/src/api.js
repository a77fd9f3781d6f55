// REST client: the API token (sessionStorage only: never in a URL, never logged) and
// problem+json errors turned into ApiError.
const TOKEN_KEY = 'trainyard.token';

export const session = {
  token: sessionStorage.getItem(TOKEN_KEY),
  role: null, // 'viewer' | 'user' | 'admin' once known
  authNone: false, // the server runs --auth none
  version: null, // GET /api/v1/version
};

export function setToken(token) {
  session.token = token || null;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
  // The problem's {field, detail} entries (the API names the fields at fault).
  get fieldErrors() {
    return Array.isArray(this.problem.errors) ? this.problem.errors : [];
  }
}

const listeners = { unauthorized: [] };
export function onUnauthorized(fn) {
  listeners.unauthorized.push(fn);
}

// Calls the REST API: path under /api/v1, body a JSON value or undefined. Returns the parsed
// JSON (or text for non-JSON replies); throws ApiError (status 0: the server is unreachable).
export async function api(method, path, body, { raw = false, signal } = {}) {
  const headers = {};
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { title: 'Server unreachable', detail: 'cannot reach the server' });
  }
  const text = await r.text();
  let json = null;
  const ctype = r.headers.get('content-type') || '';
  if (ctype.includes('json') && text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  if (!r.ok) {
    if (r.status === 401) listeners.unauthorized.forEach((fn) => fn());
    throw new ApiError(r.status, json || { title: r.statusText, detail: text.slice(0, 300) });
  }
  return raw || !ctype.includes('json') ? text : json;
}

export const can = {
  submit: () => session.role === 'user' || session.role === 'admin',
  stop: () => session.role === 'user' || session.role === 'admin',
  drain: () => session.role === 'admin',
};
