// Submit: a form for the common fields plus a JSON editor for the whole spec (the JSON is what is
// sent; the form edits it). The API's field errors (problem+json `errors`, dotted paths) are shown
// next to the form field they name, else next to the editor. #/submit?from=ID fills it with a
// job's spec (Resubmit). The form starts with a job that runs as it is on any node (a short
// Python loop that reports a loss, no files needed); a spec without a working directory (and no
// code_package) is refused here with a message, not left to become the agent's own directory.
import { api, can } from '../api.js';
import { h, clear, loading, toast } from '../ui.js';

const EXAMPLE = [
  'import time, trainyard',
  'steps = int(trainyard.get_context().config.get("steps", 30))',
  'for step in range(1, steps + 1):',
  '    trainyard.report({"loss": 1.0 / step, "step": step})',
  '    time.sleep(0.1)',
].join('\n');

const DEFAULT = {
  name: 'my-job',
  entrypoint: ['python3', '-c', EXAMPLE],
  working_dir: '/tmp',
  backend: 'none',
  train_loop_config: { steps: 30 },
  scaling_config: { num_workers: 1, resources_per_worker: { CPU: 1 } },
};

// Form fields: id, label, the spec path, how to read and write it.
const FIELDS = [
  { id: 'name', label: 'Name', path: ['name'], type: 'text' },
  { id: 'entrypoint', label: 'Entrypoint', path: ['entrypoint'], type: 'text', hint: 'a command line, or a JSON array of arguments',
    get: (v) => (Array.isArray(v) ? JSON.stringify(v) : v ?? ''),
    set: (s) => { const t = s.trim(); if (t.startsWith('[')) { try { return JSON.parse(t); } catch { return t; } } return t; } },
  { id: 'working_dir', label: 'Working directory', path: ['working_dir'], type: 'text', hint: 'an absolute path on the nodes: where the entrypoint runs' },
  { id: 'backend', label: 'Backend', path: ['backend'], type: 'select', options: ['torch', 'tensorflow', 'native', 'none'] },
  { id: 'num_workers', label: 'Workers', path: ['scaling_config', 'num_workers'], type: 'number' },
  { id: 'cpu', label: 'CPUs per worker', path: ['scaling_config', 'resources_per_worker', 'CPU'], type: 'number' },
  { id: 'gpu', label: 'GPUs per worker', path: ['scaling_config', 'resources_per_worker', 'GPU'], type: 'number' },
  { id: 'timeout_s', label: 'Timeout (s)', path: ['timeout_s'], type: 'number' },
  { id: 'train_loop_config', label: 'train_loop_config (JSON)', path: ['train_loop_config'], type: 'textarea',
    get: (v) => (v === undefined ? '' : JSON.stringify(v)), set: (s) => { if (!s.trim()) return undefined; try { return JSON.parse(s); } catch { return s; } } },
];

function getPath(o, p) {
  return p.reduce((a, k) => (a && typeof a === 'object' ? a[k] : undefined), o);
}
function setPath(o, p, v) {
  let a = o;
  for (let i = 0; i < p.length - 1; i++) {
    if (!a[p[i]] || typeof a[p[i]] !== 'object') a[p[i]] = {};
    a = a[p[i]];
  }
  if (v === undefined || v === '') delete a[p[p.length - 1]];
  else a[p[p.length - 1]] = v;
}

export function render(main, { params }) {
  let alive = true;
  const from = params.get('from');
  const body = h('div', {}, loading());
  clear(main, h('h1', {}, from ? `Resubmit job #${from}` : 'Submit a job'), body);
  if (!can.submit()) {
    clear(body, h('p', { class: 'state empty' }, 'Your token is a viewer token: it cannot submit jobs.'));
    return () => {};
  }
  let spec = structuredClone(DEFAULT);
  const inputs = {};
  const errs = {};
  const form = h('form', { class: 'submit-form', novalidate: true, onsubmit: onSubmit });
  const fieldset = h('div', { class: 'form-grid' });
  for (const f of FIELDS) {
    const attrs = { id: `f-${f.id}`, name: f.id, 'aria-describedby': `e-${f.id}`, dataset: { path: f.path.join('.') } };
    let input;
    if (f.type === 'select') input = h('select', attrs, h('option', { value: '' }, '(default)'), f.options.map((o) => h('option', { value: o }, o)));
    else if (f.type === 'textarea') input = h('textarea', { ...attrs, rows: 3 });
    else input = h('input', { ...attrs, type: f.type, step: f.type === 'number' ? 'any' : undefined });
    input.addEventListener('input', () => fromForm(f));
    inputs[f.id] = input;
    errs[f.id] = h('p', { class: 'field-error', id: `e-${f.id}`, role: 'alert' });
    fieldset.append(h('div', { class: 'field', dataset: { field: f.path.join('.') } }, h('label', { for: `f-${f.id}` }, f.label), input, f.hint ? h('small', {}, f.hint) : null, errs[f.id]));
  }
  const editor = h('textarea', { id: 'spec-json', class: 'json', rows: 22, spellcheck: 'false', 'aria-describedby': 'e-json', oninput: fromJson });
  const jsonErr = h('div', { class: 'field-error', id: 'e-json', role: 'alert' });
  const summary = h('div', { class: 'form-summary', role: 'alert' });
  const submitBtn = h('button', { type: 'submit', class: 'primary', id: 'submit-job' }, 'Submit');
  form.append(
    h('div', { class: 'submit-cols' },
      h('div', {}, h('h2', {}, 'Common fields'), fieldset),
      h('div', {}, h('h2', {}, h('label', { for: 'spec-json' }, 'Job spec (JSON)')), editor, jsonErr)),
    summary, h('div', { class: 'actions' }, submitBtn));

  function toForm() {
    for (const f of FIELDS) {
      const v = getPath(spec, f.path);
      inputs[f.id].value = f.get ? f.get(v) : v ?? '';
    }
  }
  function toJson() {
    editor.value = JSON.stringify(spec, null, 2);
  }
  function fromForm(f) {
    const raw = inputs[f.id].value;
    let v = f.set ? f.set(raw) : raw;
    if (f.type === 'number') v = raw === '' ? undefined : Number(raw);
    setPath(spec, f.path, v);
    toJson();
  }
  function fromJson() {
    try {
      const s = JSON.parse(editor.value);
      if (s && typeof s === 'object' && !Array.isArray(s)) {
        spec = s;
        toForm();
        jsonErr.textContent = '';
      } else jsonErr.textContent = 'The spec must be a JSON object.';
    } catch (e) {
      jsonErr.textContent = `Not valid JSON yet: ${e.message}`;
    }
  }
  function clearErrors() {
    Object.values(errs).forEach((e) => (e.textContent = ''));
    Object.values(inputs).forEach((i) => i.removeAttribute('aria-invalid'));
    jsonErr.textContent = '';
    summary.textContent = '';
  }
  function showErrors(problem) {
    const list = Array.isArray(problem.errors) ? problem.errors : [];
    const loose = [];
    for (const e of list) {
      // The nearest form field: exact path, else its closest parent (scaling_config.x → ...).
      const f = FIELDS.find((x) => x.path.join('.') === e.field) || FIELDS.find((x) => e.field && e.field.startsWith(`${x.path.join('.')}.`));
      if (f) {
        errs[f.id].textContent = errs[f.id].textContent ? `${errs[f.id].textContent}; ${e.detail}` : e.detail;
        inputs[f.id].setAttribute('aria-invalid', 'true');
      } else {
        loose.push(`${e.field}: ${e.detail}`);
      }
    }
    if (loose.length) jsonErr.textContent = loose.join('\n');
    summary.textContent = problem.title ? `${problem.title}${list.length ? '' : `: ${problem.detail || ''}`}` : problem.detail || 'The server refused the job.';
    const first = form.querySelector('[aria-invalid="true"]');
    if (first) first.focus();
  }
  async function onSubmit(ev) {
    ev.preventDefault();
    clearErrors();
    let body;
    try {
      body = JSON.parse(editor.value);
    } catch (e) {
      jsonErr.textContent = `Not valid JSON: ${e.message}`;
      editor.focus();
      return;
    }
    // Without a working directory the workers would run wherever the agent was started.
    if (body && typeof body === 'object' && !body.working_dir && !body.code_package) {
      errs.working_dir.textContent = 'Required: the absolute path on the nodes where the entrypoint runs (or give a code_package in the JSON).';
      inputs.working_dir.setAttribute('aria-invalid', 'true');
      summary.textContent = 'The job needs a working directory.';
      inputs.working_dir.focus();
      return;
    }
    submitBtn.disabled = true;
    try {
      const job = await api('POST', '/jobs', body);
      toast(`Job #${job.id} submitted`);
      location.hash = `#/jobs/${job.id}`;
    } catch (e) {
      showErrors(e.problem || { detail: e.message });
    } finally {
      submitBtn.disabled = false;
    }
  }

  async function init() {
    if (from) {
      try {
        const j = await api('GET', `/jobs/${from}`);
        spec = j.spec;
        if (spec.secret_env) summary.textContent = 'The original secret_env values are not shown by the API: fill them in again.';
      } catch (e) {
        summary.textContent = `Cannot read job #${from}: ${e.message}`;
      }
    }
    if (!alive) return;
    toForm();
    toJson();
    clear(body, form);
  }
  init();
  return () => {
    alive = false;
  };
}
