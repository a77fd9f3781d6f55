// Browser scenarios for test_dashboard.py: `node dashboard.mjs SCENARIO`, with TY_URL (the
// server), TY_TOKEN (API token, empty for --auth none), TY_ARTIFACTS (screenshot folder),
// TY_PLAYWRIGHT (playwright-core's index.mjs in web/node_modules) and TY_ARGS (JSON). Prints
// "RESULT {json}" and exits 0, or prints the failure and exits 1. A scenario that needs the test to
// act (restart the server) prints "WAITING what" and reads a line from stdin.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import path from 'node:path';

const { chromium } = await import(process.env.TY_PLAYWRIGHT);
const URL_ = process.env.TY_URL;
const TOKEN = process.env.TY_TOKEN || '';
const ART = process.env.TY_ARTIFACTS;
const ARGS = JSON.parse(process.env.TY_ARGS || '{}');
const LONG = 45000;
// A server restart while other tests load the machine: its steps get longer.
const RESTART = 150000;

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function waitFor(what) {
  console.log(`WAITING ${what}`);
  await lines.next();
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const browser = await chromium.launch({
  executablePath: process.env.TY_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await context.newPage();
const problems = [];
page.on('console', (m) => {
  // A refused websocket while the server restarts is expected; anything else is a bug (a CSP
  // violation shows up here too), a 401 included: a fresh page without a token asks /health
  // whether to sign in, it does not draw a 401 from the API.
  if (m.type() !== 'error') return;
  if (/status of 401/.test(m.text())) problems.push(`a 401 in the console: ${m.text()}`);
  else if (!/WebSocket|ERR_CONNECTION_REFUSED|Failed to load resource/.test(m.text())) problems.push(m.text());
});
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('request', (r) => {
  if (TOKEN && r.url().includes(TOKEN)) problems.push(`the token appeared in a URL: ${r.url().replace(TOKEN, '<token>')}`);
});

async function shot(name, opts = {}) {
  await page.screenshot({ path: path.join(ART, `${name}.png`), fullPage: opts.full ?? false });
}

async function signIn(token = TOKEN) {
  await page.goto(URL_ + '/');
  if (token) {
    await page.locator('#token').fill(token);
    await shot('signin');
    await page.locator('form.signin button[type=submit]').click();
  }
  await page.locator('#conn.live').waitFor({ timeout: LONG });
}

async function go(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
}

const scenarios = {
  async pages() {
    await signIn();
    const role = await page.locator('#who .role').textContent();
    await page.locator('.stats').waitFor();
    await shot('overview');
    await go('#/jobs');
    await page.locator('#jobs-list table, #jobs-list .empty').first().waitFor();
    await shot('jobs');
    await go('#/nodes');
    await page.locator('article.node').first().waitFor({ timeout: LONG });
    const nodes = await page.locator('article.node').count();
    const nodeTitles = await page.locator('article.node header h2').allTextContents();
    await shot('nodes');
    await go('#/submit');
    await page.locator('#spec-json').waitFor();
    await shot('submit');
    await page.emulateMedia({ colorScheme: 'dark' });
    await go('#/');
    await page.locator('.stats').waitFor();
    await shot('overview-dark');
    await page.setViewportSize({ width: 390, height: 844 });
    await go('#/jobs');
    await page.locator('#jobs-list table, #jobs-list .empty').first().waitFor();
    await shot('jobs-phone-dark', { full: true });
    await page.emulateMedia({ colorScheme: 'light' });
    await go('#/nodes');
    await page.locator('article.node').first().waitFor();
    await shot('nodes-phone', { full: true });
    // Keyboard: after a reload (the token stays in sessionStorage) the first Tab reaches the
    // skip link, the next ones the navigation.
    await page.reload();
    await page.locator('#conn.live').waitFor({ timeout: LONG });
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => document.activeElement && document.activeElement.className);
    check(focused === 'skip', `first Tab focuses the skip link (got ${focused})`);
    return { role: role.trim(), nodes, nodeTitles };
  },

  async submit_and_watch() {
    await signIn();
    await go('#/submit');
    await page.locator('#f-name').fill('browser-job');
    await page.locator('#f-entrypoint').fill(JSON.stringify([ARGS.python, 'train.py']));
    await page.locator('#f-working_dir').fill(ARGS.workdir);
    await page.locator('#f-backend').selectOption('none');
    await page.locator('#f-num_workers').fill('2');
    await page.locator('#f-train_loop_config').fill('{"steps": 100000}');
    await page.locator('#submit-job').click();
    await page.waitForURL(/#\/jobs\/\d+/, { timeout: LONG });
    const job = Number(page.url().match(/#\/jobs\/(\d+)/)[1]);
    await page.locator('#job-status .badge', { hasText: 'RUNNING' }).waitFor({ timeout: LONG });
    // Chart points appear, and keep coming while it trains (live, no reload).
    const loss = page.locator('figure.chart[data-metric="loss"]');
    await loss.waitFor({ timeout: LONG });
    await page.waitForFunction(() => Number(document.querySelector('figure.chart[data-metric="loss"]')?.dataset.points) > 0, null, { timeout: LONG });
    const first = Number(await loss.getAttribute('data-points'));
    await page.waitForFunction((n) => Number(document.querySelector('figure.chart[data-metric="loss"]').dataset.points) > n, first, { timeout: LONG });
    const points = Number(await loss.getAttribute('data-points'));
    // Hover shows values.
    const over = loss.locator('.u-over');
    const box = await over.boundingBox();
    await page.mouse.move(box.x + box.width * 0.7, box.y + box.height / 2);
    await loss.locator('.chart-legend .hover-v').first().waitFor();
    await shot('job-metrics');
    // Zoom: a drag re-fetches the range at full detail.
    await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction(() => document.querySelector('figure.chart[data-metric="loss"]').dataset.zoomPoints !== undefined, null, { timeout: LONG });
    // The zoom survives the live redraws that follow (the accuracy chart, not zoomed, moves on).
    for (let i = 0; i < 3; i++) {
      const n = Number(await page.locator('figure.chart[data-metric="accuracy"]').getAttribute('data-points'));
      await page.waitForFunction((k) => Number(document.querySelector('figure.chart[data-metric="accuracy"]').dataset.points) > k, n, { timeout: LONG });
    }
    const zoomKept = (await loss.getAttribute('data-zoomed')) === 'true' && (await loss.locator('.reset-zoom').isVisible());
    await shot('job-metrics-zoomed');
    // Logs: lines arrive live; the first error is found.
    await page.locator('#tab-logs').click();
    await page.locator('.log-line').first().waitFor({ timeout: LONG });
    const n1 = await page.locator('.log-line').count();
    await page.waitForFunction((n) => document.querySelectorAll('.log-line').length > n, n1, { timeout: LONG });
    const logLines = await page.locator('.log-line').count();
    await page.locator('.log-line.is-error').first().waitFor({ timeout: LONG });
    await page.getByRole('button', { name: 'First error' }).click();
    const current = await page.locator('.log-line.current').textContent();
    // The error line was written to stderr: marked (class, "err" gutter); stdout's lines are not.
    const errMark = await page.locator('.log-line.current').evaluate((e) => [e.dataset.stream, e.classList.contains('is-stderr'), getComputedStyle(e.querySelector('.log-stream'), '::before').content]);
    const outMark = await page.locator('.log-line[data-stream="stdout"]').first().evaluate((e) => [e.classList.contains('is-stderr'), getComputedStyle(e.querySelector('.log-stream'), '::before').content]);
    await shot('job-logs');
    await page.locator('#log-search').fill('step 2');
    await shot('job-logs-search');
    await page.locator('#log-search').fill('rank 0 step 3 ');
    const matchInfo = (await page.locator('.log-info').textContent()).trim();
    // System: each rank's CPU % and memory from the usage samples (or, on a host where the agent
    // gets no cgroups, the empty state that says why).
    await page.locator('#tab-system').click();
    await page.locator('#usage-memory, #panel-system .empty').first().waitFor({ timeout: LONG });
    const system = (await page.locator('#usage-memory').count())
      ? { ranks: await page.locator('#usage-memory .u-legend .u-series').count() - 1 } : { empty: true };
    await shot('job-system');
    for (const t of ['workers', 'timeline', 'checkpoints', 'spec']) {
      await page.locator(`#tab-${t}`).click();
      await page.locator(`#panel-${t} table, #panel-${t} .empty, #panel-${t} pre, #panel-${t} ol`).first().waitFor({ timeout: LONG });
      await shot(`job-${t}`);
    }
    // Tags and notes, edited on the job page; the attempt's startup bar in the timeline.
    await page.locator('#tab-timeline').click();
    await page.locator('#panel-timeline .startup-bar').first().waitFor({ timeout: LONG });
    await page.locator('#edit-labels').click();
    await page.locator('#tags-input').fill('browser exp-b');
    await page.locator('#notes-input').fill('edited in the browser');
    await page.locator('#save-labels').click();
    await page.locator('#job-tags .tag', { hasText: 'exp-b' }).waitFor({ timeout: LONG });
    const tags = await page.locator('#job-tags .tag').allTextContents();
    await shot('job-tags');
    // Stop, with confirmation.
    await page.locator('#stop').click();
    await page.locator('dialog.confirm').waitFor();
    await shot('job-stop-confirm');
    await page.locator('dialog.confirm button.ok').click();
    await page.locator('#job-status .badge', { hasText: 'STOPPED' }).waitFor({ timeout: LONG });
    await page.locator('#tab-timeline').click();
    await page.locator('#panel-timeline .timeline .badge', { hasText: 'STOPPED' }).waitFor({ timeout: LONG });
    await shot('job-stopped');
    return { job, points, logLines, errorFound: /ERROR/.test(current), errMark, outMark, matchInfo, zoomKept, tags, system };
  },

  // A job that failed once and restarted: attempt and checkpoint markers on the chart (step and
  // wall-time axes), both attempts in the timeline, and a zoom on the time axis that re-fetches
  // the zoomed time range from the server.
  async restarts() {
    const zooms = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname === `/api/v1/jobs/${ARGS.job}/metrics` && (u.searchParams.has('time_min') || u.searchParams.has('step_min'))) zooms.push(Object.fromEntries(u.searchParams));
    });
    await signIn();
    await go(`#/jobs/${ARGS.job}`);
    const loss = page.locator('figure.chart[data-metric="loss"]');
    const markers = async (want) => {
      await page.waitForFunction((w) => {
        const got = (document.querySelector('figure.chart[data-metric="loss"]')?.dataset.markers || '').split(',');
        return w.every((m) => got.includes(m));
      }, want, { timeout: LONG });
      return (await loss.getAttribute('data-markers')).split(',');
    };
    const want = ['attempt 2', ARGS.checkpoint];
    const stepMarkers = await markers(want);
    const values = await page.locator('.metric-values table tbody tr').evaluateAll((rows) => rows.map((r) => [...r.cells].map((c) => c.textContent.trim())));
    const phaseCharts = await page.locator('figure.chart[data-metric="phase"]').count();
    const stepMarkerAt = (await loss.getAttribute('data-marker-at')).split(',');
    const series = (await loss.getAttribute('data-series')).split(',');
    // Smoothing and the legend's latest raw value (without the cursor on the chart).
    const smoothed = await loss.getAttribute('data-smoothed');
    const latest = (await loss.locator('.chart-legend .latest-v[data-rank="0"]').textContent()).trim();
    // Marker labels: none shown until the cursor is at a marker, then that marker's.
    const tip = loss.locator('.marker-tip');
    const tipHidden = await tip.isHidden();
    const pos = JSON.parse(await loss.getAttribute('data-marker-pos')).find((p) => p.label === ARGS.checkpoint);
    const over = await loss.locator('.u-over').boundingBox();
    await page.mouse.move(over.x + pos.left, over.y + over.height / 2);
    await loss.locator('.marker-tip:not([hidden])').waitFor({ timeout: LONG });
    const tipText = (await tip.textContent()).trim();
    await shot('job-restarts-marker-hover');
    await page.mouse.move(0, 0);
    await shot('job-restarts-step');
    await page.locator('#xaxis').selectOption('time');
    await page.waitForFunction(() => document.querySelector('figure.chart[data-metric="loss"][data-x="time"] .u-over'), null, { timeout: LONG });
    const timeMarkers = await markers(want);
    await shot('job-restarts-time');
    const box = await loss.locator('.u-over').boundingBox();
    await page.mouse.move(box.x + box.width * 0.15, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.85, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction(() => document.querySelector('figure.chart[data-metric="loss"]').dataset.zoomPoints !== undefined, null, { timeout: LONG });
    const zoomPoints = Number(await loss.getAttribute('data-zoom-points'));
    await shot('job-restarts-time-zoomed');
    await page.locator('#tab-timeline').click();
    await page.locator('#panel-timeline table tbody tr').nth(1).waitFor({ timeout: LONG });
    const attempts = await page.locator('#panel-timeline table tbody tr').evaluateAll((rows) => rows.map((r) => [...r.cells].slice(0, 2).map((c) => c.textContent.trim())));
    const timeline = await page.locator('#panel-timeline .timeline li').allTextContents();
    // An earlier attempt's output: attempt 1's lines, its crash last.
    await page.locator('#tab-logs').click();
    await page.locator('#log-attempt option[value="1"]').waitFor({ state: 'attached', timeout: LONG });
    await page.locator('#log-attempt').selectOption('1');
    await page.locator('.log-line', { hasText: 'attempt 1 crashed' }).waitFor({ timeout: LONG });
    const logLines = await page.locator('.log-line').count();
    const logTimes = await page.locator('.log-line .log-time').count();
    await page.locator('#log-wrap').uncheck();
    const nowrap = (await page.locator('.log-view.nowrap').count()) === 1;
    await shot('job-restarts-logs-attempt-1');
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: LONG }), page.locator('#log-download').click()]);
    const download = [dl.suggestedFilename(), readFileSync(await dl.path(), 'utf8')];
    await page.locator('#tab-workers').click();
    await page.locator('#panel-workers table tbody tr').nth(1).waitFor({ timeout: LONG });
    const workers = await page.locator('#panel-workers table tbody tr').evaluateAll((rows) => rows.map((r) => [r.cells[0].textContent.trim(), r.querySelector('.badge').className]));
    await shot('job-restarts-timeline', { full: true });
    // The checkpoints tab's best/latest marks whichever reply comes first: the job's own reply
    // (which names them) held back behind the checkpoint list's.
    await page.route((u) => u.pathname === `/api/v1/jobs/${ARGS.job}`, async (route) => {
      await new Promise((r) => setTimeout(r, 800));
      await route.continue();
    });
    await go(`#/jobs/${ARGS.job}?tab=checkpoints`);
    await page.locator('#job-status .badge').waitFor({ timeout: LONG });
    await page.locator('#panel-checkpoints table tbody tr').first().waitFor({ timeout: LONG });
    const checkpointRows = await page.locator('#panel-checkpoints table tbody tr').evaluateAll((rows) => rows.map((r) => [r.cells[0].textContent.trim(), r.querySelector('td[data-label="Marks"]').textContent.trim()]));
    await shot('job-restarts-checkpoints');
    // The jobs list with a final-metric column; then Compare: tick both jobs, then Compare.
    await go('#/jobs?metric=loss');
    await page.locator(`#jobs-list tr[data-id="${ARGS.job}"] td.metric`).waitFor({ timeout: LONG });
    const listFinals = [];
    for (const id of [ARGS.job, ARGS.other]) listFinals.push((await page.locator(`#jobs-list tr[data-id="${id}"] td.metric`).textContent()).trim());
    await page.locator(`#jobs-list tr[data-id="${ARGS.job}"] input.pick`).check();
    await page.locator(`#jobs-list tr[data-id="${ARGS.other}"] input.pick`).check();
    await page.locator('#compare').click();
    await page.locator('#config-diff').waitFor({ timeout: LONG });
    const compareUrl = new URL(page.url()).hash.slice(1);
    const compareSeries = await page.locator('.compare figure.chart[data-metric="loss"]').getAttribute('data-series');
    const differs = await page.locator('#config-diff tr.differs').evaluateAll((rs) => rs.map((r) => r.dataset.key));
    const finals = await page.locator('#compare-summary tr[data-key="final loss"] td').allTextContents();
    await shot('compare', { full: true });
    return { compareUrl, compareSeries, differs, finals, listFinals, checkpointRows, workers, logLines, logTimes, nowrap, download, stepMarkers, stepMarkerAt, series, smoothed, latest, tipHidden, tipText, timeMarkers, zooms, zoomPoints, attempts, timeline, values, phaseCharts };
  },

  async viewer() {
    await signIn();
    await page.waitForFunction(() => document.querySelector('#who .role')?.textContent === 'viewer', null, { timeout: LONG });
    await go(`#/jobs/${ARGS.job}`);
    await page.locator('#stop').waitFor({ timeout: LONG });
    const stopDisabled = await page.locator('#stop').isDisabled();
    const resubmitDisabled = await page.locator('#resubmit').isDisabled();
    await page.locator('figure.chart[data-metric="loss"] .rank-toggle').nth(1).waitFor({ timeout: LONG });
    const submitHidden = await page.locator('#nav a[href="#/submit"]').isHidden();
    check(resubmitDisabled, 'Resubmit is disabled for a viewer');
    check(await page.locator('#edit-labels').isDisabled(), 'Editing tags is disabled for a viewer');
    await shot('job-as-viewer');
    await go('#/nodes');
    await page.locator('article.node').first().waitFor({ timeout: LONG });
    check(await page.locator('article.node .actions button').first().isDisabled(), 'Drain is disabled for a viewer');
    return { stopDisabled, submitHidden };
  },

  async bad_spec() {
    await signIn();
    await go('#/submit');
    await page.locator('#f-num_workers').fill('0');
    await page.locator('#submit-job').click();
    await page.locator('#e-num_workers:not(:empty), #e-json:not(:empty)').first().waitFor({ timeout: LONG });
    const field = (await page.locator('#e-num_workers').textContent()) || '';
    const invalid = await page.locator('#f-num_workers').getAttribute('aria-invalid');
    check(invalid === 'true', 'the field is marked invalid');
    await shot('submit-bad-spec');
    // No working directory: refused in the form, naming the field.
    await page.locator('#f-num_workers').fill('1');
    await page.locator('#f-working_dir').fill('');
    await page.locator('#submit-job').click();
    await page.locator('#e-working_dir:not(:empty)').waitFor({ timeout: LONG });
    const workdirError = (await page.locator('#e-working_dir').textContent()).trim();
    await shot('submit-no-workdir');
    // The form as it opens is a job that runs.
    await go('#/jobs');
    await page.locator('#jobs-list table, #jobs-list .empty').first().waitFor({ timeout: LONG });
    await go('#/submit');
    await page.locator('#submit-job').click();
    await page.waitForURL(/#\/jobs\/\d+/, { timeout: LONG });
    const job = Number(page.url().match(/#\/jobs\/(\d+)/)[1]);
    return { field: field ? 'scaling_config.num_workers' : '', error: field, workdirError, job };
  },

  async reconnect() {
    await signIn();
    await go('#/jobs');
    await page.locator('#jobs-list table, #jobs-list .empty').first().waitFor();
    await page.evaluate(() => {
      window.__states = [];
      new MutationObserver(() => window.__states.push(document.getElementById('conn').className)).observe(document.getElementById('conn'), { attributes: true });
    });
    await waitFor('restart');
    await page.waitForFunction(() => window.__states.some((s) => /reconnecting|connecting/.test(s)), null, { timeout: RESTART });
    await page.locator('#conn.live').waitFor({ timeout: RESTART });
    await shot('jobs-after-restart');
    await waitFor('job');
    await page.locator('#jobs-list td', { hasText: 'after-restart' }).first().waitFor({ timeout: RESTART });
    await go('#/');
    await page.locator('.stats').waitFor();
    await page.locator('section', { hasText: 'Recent jobs' }).locator('table').waitFor({ timeout: RESTART });
    await shot('overview-with-jobs');
    return { sawReconnecting: true, liveAgain: true, newJobShown: true };
  },

  // The overview's "CPUs in use" and "GPUs in use" as the page shows them, once they read
  // ARGS.cpu (the test's expected text).
  async overview_usage() {
    await signIn();
    const cpu = page.locator('.stat', { has: page.locator('.stat-label', { hasText: 'CPUs in use' }) }).locator('.stat-value');
    const gpu = page.locator('.stat', { has: page.locator('.stat-label', { hasText: 'GPUs in use' }) }).locator('.stat-value');
    await page.waitForFunction((want) => [...document.querySelectorAll('.stat')].some((s) => s.textContent.includes('CPUs in use') && s.querySelector('.stat-value').textContent === want), ARGS.cpu, { timeout: LONG }).catch(() => {});
    await shot('overview-usage');
    return { cpu: (await cpu.textContent()).trim(), gpu: (await gpu.textContent()).trim() };
  },

  // The jobs list's project select (issue 22): the projects the token may see, and with
  // ARGS.project chosen, that project's jobs only; without it, the unfiltered list's jobs.
  async project_filter() {
    await signIn();
    await go('#/jobs');
    await page.locator('#f-project option[value="default"]').waitFor({ state: 'attached', timeout: LONG });
    const options = await page.locator('#f-project option').evaluateAll((os) => os.map((o) => o.value).filter(Boolean));
    if (ARGS.project) {
      await page.locator('#f-project').selectOption(ARGS.project);
      await page.waitForFunction(() => location.hash.includes('project='), null, { timeout: LONG });
    }
    await page.locator('#jobs-list table.jobs').waitFor({ timeout: LONG });
    await shot(`jobs-project-${ARGS.project || 'any'}`);
    const ids = await page.locator('#jobs-list tbody tr').evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.id)));
    return { options, ids };
  },

  // A failed job's page (ARGS.job): its error as shown, and the status messages shown beside it
  // (issue 23: the error was shown twice).
  async job_error() {
    await signIn();
    await go(`#/jobs/${ARGS.job}`);
    await page.locator('#job-error').waitFor({ timeout: LONG });
    await shot('job-error');
    return {
      error: (await page.locator('#job-error').textContent()).trim(),
      messages: await page.locator('.status-message').evaluateAll((ps) => ps.map((p) => p.textContent)),
    };
  },

  // The sweeps list, then sweep ARGS.sweep's page: the trials table (best first, then sorted
  // by the metric ascending with a click), the parallel-coordinates lines, the curves' chart.
  async sweep_page() {
    await signIn();
    await go('#/sweeps');
    await page.locator(`#sweeps-list tr[data-id="${ARGS.sweep}"] a`).click();
    await page.waitForURL(new RegExp(`#/sweeps/${ARGS.sweep}$`), { timeout: LONG });
    await page.locator('#trials-table tbody tr').first().waitFor({ timeout: LONG });
    await page.locator('#parallel polyline').first().waitFor({ timeout: LONG });
    const chart = page.locator('#sweep-chart');
    await chart.locator('canvas').waitFor({ timeout: LONG });
    await shot('sweep', { full: true });
    const order = () => page.locator('#trials-table tbody tr').evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.index)));
    const bestFirst = await order();
    const bestRow = await page.locator('#trials-table tbody tr.best').getAttribute('data-index');
    await page.locator('#trials-table th[data-key="best_metric"] button').click();
    const ascending = await order();
    return {
      bestFirst,
      ascending,
      bestRow: Number(bestRow),
      lines: await page.locator('#parallel polyline').count(),
      bestLine: Number(await page.locator('#parallel polyline.best').getAttribute('data-trial')),
      axes: await page.locator('#parallel .axis-name').allTextContents(),
      chart: await chart.evaluate((f) => ({ ...f.dataset })),
    };
  },

  async auth_none() {
    await page.goto(URL_ + '/');
    await page.locator('.stats').waitFor({ timeout: LONG });
    const signInShown = (await page.locator('#token').count()) > 0;
    await shot('overview-auth-none');
    return { signInShown, overview: true };
  },
};

let code = 0;
try {
  const result = await scenarios[process.argv[2]]();
  check(problems.length === 0, `no console errors: ${problems.join(' | ')}`);
  console.log(`RESULT ${JSON.stringify(result)}`);
} catch (e) {
  console.log(`FAILED ${process.argv[2]}: ${e.stack || e}`);
  try {
    await shot(`failed-${process.argv[2]}`, { full: true });
  } catch {
    /* the page is gone */
  }
  code = 1;
}
await browser.close();
process.exit(code);
