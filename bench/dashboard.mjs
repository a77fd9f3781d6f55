// The browser half of bench/dashboard.py (TY_URL, TY_TOKEN, TY_PLAYWRIGHT, TY_ARGS: {phase, big,
// live, jobs, runs, seconds, every, steps}). Prints the figures.
const { chromium } = await import(process.env.TY_PLAYWRIGHT);
const URL_ = process.env.TY_URL;
const A = JSON.parse(process.env.TY_ARGS);

const browser = await chromium.launch({
  executablePath: process.env.TY_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--enable-precise-memory-info'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await context.newPage();
page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
page.on('console', (m) => { if (m.type() === 'error') console.log(`console: ${m.text()}`); });
await page.goto(URL_ + '/');
await page.evaluate((t) => sessionStorage.setItem('trainyard.token', t), process.env.TY_TOKEN);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

// 1. time to first chart: a fresh page load each run (before the live job starts).
if (A.phase === 'first') {
const firsts = [];
const fetches = [];
const alls = [];
const waterfalls = [];
for (let i = 0; i < A.runs; i++) {
  await page.goto('about:blank');
  await page.goto(`${URL_}/#/jobs/${A.big}`, { waitUntil: 'commit' });
  await page.waitForFunction(() => document.body && document.body.dataset.firstChart, null, { timeout: 60000 });
  firsts.push(Number(await page.evaluate(() => document.body.dataset.firstChart)));
  await page.waitForFunction(() => document.body && document.body.dataset.allRanks, null, { timeout: 60000 });
  alls.push(Number(await page.evaluate(() => document.body.dataset.allRanks)));
  const f = await page.evaluate(() => performance.getEntriesByType('resource').filter((e) => e.name.includes('/metrics?')).map((e) => e.duration));
  fetches.push(f[0]);
  waterfalls.push(await page.evaluate(() => performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/api/'))
    .map((e) => [e.name.replace(/^.*\/api\/v1/, ''), e.startTime, e.responseStart, e.responseEnd, e.transferSize])));
}
// Where the time goes: each API request of the median run (start, first byte, end, bytes).
const mid = firsts.indexOf(median(firsts));
console.log(`requests of the median run (ms from navigation start: start / first byte / end, bytes):`);
for (const [n, s, b, e, z] of waterfalls[mid]) console.log(`  ${n}: ${s.toFixed(0)} / ${b.toFixed(0)} / ${e.toFixed(0)}, ${z}`);
const points = await page.locator('figure.chart').first().getAttribute('data-points');
console.log(`time to first chart (${A.points} points over 8 ranks; rank 0 drawn first): median ${median(firsts).toFixed(0)} ms, ` +
  `runs ${firsts.map((x) => x.toFixed(0)).join(', ')} ms; rank 0's metrics request alone: median ${median(fetches).toFixed(0)} ms`);
console.log(`all 8 ranks drawn (${points} buckets): median ${median(alls).toFixed(0)} ms, runs ${alls.map((x) => x.toFixed(0)).join(', ')} ms`);

}

// 4. the compare page: a fresh load each run, until every chart, the summary and the diff are drawn.
if (A.phase === 'compare') {
const times = [];
const waterfalls = [];
for (let i = 0; i < A.runs; i++) {
  await page.goto('about:blank');
  await page.goto(`${URL_}/#/compare?jobs=${A.jobs.join(',')}`, { waitUntil: 'commit' });
  await page.waitForFunction(() => document.querySelectorAll('.compare figure.chart canvas').length >= 3 && document.querySelector('#config-diff'), null, { timeout: 60000, polling: 'raf' });
  times.push(await page.evaluate(() => performance.now()));
  waterfalls.push(await page.evaluate(() => performance.getEntriesByType('resource')
    .filter((e) => e.name.includes('/api/'))
    .map((e) => [e.name.replace(/^.*\/api\/v1/, ''), e.startTime, e.responseStart, e.responseEnd, e.transferSize])));
}
console.log(`requests of the median run (ms from navigation start: start / first byte / end, bytes):`);
for (const [n, s, b, e, z] of waterfalls[times.indexOf(median(times))]) console.log(`  ${n}: ${s.toFixed(0)} / ${b.toFixed(0)} / ${e.toFixed(0)}, ${z}`);
const charts = await page.locator('.compare figure.chart').count();
console.log(`compare page (${A.jobs.length} runs x 8 ranks x 3 metrics, ${A.steps} reports per rank; ${charts} charts): median ${median(times).toFixed(0)} ms, ` +
  `runs ${times.map((x) => x.toFixed(0)).join(', ')} ms`);
}

// 2 + 3. the live job: frame intervals, script time, heap.
if (A.phase === 'live') {
const cdp = await context.newCDPSession(page);
await cdp.send('Performance.enable');
await page.goto('about:blank');
await page.goto(`${URL_}/#/jobs/${A.live}`);
await page.waitForFunction(() => Number(document.querySelector('figure.chart')?.dataset.points) > 0, null, { timeout: 60000 });
await page.evaluate(() => {
  window.__frames = [];
  let last = performance.now();
  const tick = (t) => {
    window.__frames.push(t - last);
    last = t;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
});
const metric = async (name) => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === name).value;
const heap = async () => {
  await cdp.send('HeapProfiler.collectGarbage');
  return (await cdp.send('Runtime.getHeapUsage')).usedSize / 1048576;
};
const script0 = await metric('ScriptDuration');
const task0 = await metric('TaskDuration');
const heaps = [];
const t0 = Date.now();
while (Date.now() - t0 < A.seconds * 1000) {
  heaps.push([Math.round((Date.now() - t0) / 1000), await heap()]);
  await page.waitForTimeout(Math.min(A.every * 1000, A.seconds * 1000 - (Date.now() - t0)));
}
heaps.push([Math.round((Date.now() - t0) / 1000), await heap()]);
const wall = (Date.now() - t0) / 1000;
const script = (await metric('ScriptDuration')) - script0;
const task = (await metric('TaskDuration')) - task0;
const frames = (await page.evaluate(() => window.__frames)).slice(1);
const redraws = await page.evaluate(() => window.tyRedrawMs || []);
const drawn = await page.locator('figure.chart').first().getAttribute('data-points');
const lines = await page.evaluate(() => document.querySelectorAll('.log-line').length);
console.log(`live (8 ranks x 10 points/s for ${wall.toFixed(0)} s; ${drawn} points held in the chart): frame interval median ` +
  `${median(frames).toFixed(1)} ms, p99 ${pct(frames, 0.99).toFixed(1)} ms, max ${Math.max(...frames).toFixed(1)} ms over ${frames.length} frames; ` +
  `main thread busy ${(100 * task / wall).toFixed(1)} % (script ${(100 * script / wall).toFixed(1)} %)`);
if (redraws.length) console.log(`live redraws (points drawn, 4 a second at most): ${redraws.length}, median ${median(redraws).toFixed(1)} ms, p99 ${pct(redraws, 0.99).toFixed(1)} ms, max ${Math.max(...redraws).toFixed(1)} ms`);
console.log(`JS heap after GC (MiB) at seconds: ${heaps.map(([s, m]) => `${s}: ${m.toFixed(1)}`).join(', ')}`);
void lines;
}
await browser.close();
