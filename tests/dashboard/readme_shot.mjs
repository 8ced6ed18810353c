// Makes the README's dashboard picture (docs/dashboard.png): a real
// redis-server and emqd on free loopback ports, a little traffic for a
// minute and a half (so the throughput lines have points), then one
// screenshot of a queue's view. Not a test; run by hand after changing
// the page:
//   PLAYWRIGHT_DIR=build/tests/dashboard/playwright-cache EMQD=build/daemon/emqd \
//     node tests/dashboard/readme_shot.mjs docs/dashboard.png
import { createRequire } from 'node:module';
import path from 'node:path';
import { startStack, freePort } from '../../client/node/test/helpers.mjs';

const out = process.argv[2] || 'dashboard.png';
const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR, 'package.json'));
const { chromium } = require('playwright-core');
const http = await freePort();
const stack = await startStack({ emqdArgs: ['--metrics', `127.0.0.1:${http}`] });
const c = await stack.connect({ name: 'producer' });
const w = await stack.connect({ name: 'worker-1' });
const Q = 'mail';
const groups = ['TENacme', 'TENbeta', 'TENcorp', 'TENdelta', 'TENember', 'TENfjord'];
await c.request('limit', { queue: Q, group: 'TENbeta', max: 4 });
await c.request('pause', { queue: Q, group: 'TENdelta' });
for (const [i, g] of groups.entries()) {
  await c.request('enqueue_many', { queue: Q, jobs: Array.from({ length: 40 - i * 6 }, (_, k) => ({ payload: { to: `user${k}@${g.slice(3)}.test` }, group: g })) });
}
await c.request('enqueue_many', { queue: 'reports', jobs: Array.from({ length: 25 }, (_, k) => ({ payload: { report: k } })) });
const d = await c.request('enqueue', { queue: Q, payload: { to: 'bounce@nowhere.test' }, max_attempts: 1 });
const cl = await w.request('claim', { queue: Q, flat: true });
await w.request('fail', { queue: Q, job: d.job, lease: cl.jobs[0].lease, error: 'mailbox unavailable' });

// Traffic until the picture is taken: a burst of enqueues every 250 ms,
// its size varying so the lines are not flat, and a worker completing a
// little less than comes in, so the backlogs stay.
let running = true;
const traffic = (async () => {
  for (let tick = 0; running; tick++) {
    const n = 4 + Math.round(3 * Math.sin(tick / 12) + 3);
    const g = groups[tick % groups.length];
    await c.request('enqueue_many', { queue: Q, jobs: Array.from({ length: n }, (_, k) => ({ payload: { k }, group: g })) });
    const got = await w.request('claim', { queue: Q, count: n - 2 });
    for (const j of got.jobs) await w.request('complete', { queue: Q, job: j.job, lease: j.lease });
    await new Promise((r) => setTimeout(r, 250)); // pacing the traffic, not a wait for an event
  }
})();
await new Promise((r) => setTimeout(r, 90000)); // a minute and a half of history
await w.request('claim', { queue: Q, count: 3 }); // a few jobs active in the picture
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
await page.goto(`http://127.0.0.1:${http}/#/queue/${Q}`);
await page.locator('#groups-body tr[data-group]').first().waitFor();
await page.locator('#queue-cards svg polyline').first().waitFor();
await page.waitForFunction(() => /[1-9]/.test(document.querySelector('#queue-cards [data-count="done"] .value').textContent));
await page.screenshot({ path: out });
running = false;
await traffic;
await browser.close();
await stack.stop();
