// The dashboard in a real browser: headless chromium (playwright-core,
// installed by browser.sh) against the emqd built here and a real
// redis-server on free loopback ports, with a token. The page asks for
// the token, shows the queue and its groups, pauses a group (checked
// over the protocol), retries a dead job (checked over the protocol),
// and a request without the token is refused. Every wait is for a
// selector or a condition, with a generous deadline; screenshots of the
// main views go to $SCREENSHOT_DIR.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { startStack, freePort, waitFor } from '../../client/node/test/helpers.mjs';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR, 'package.json'));
const { chromium } = require('playwright-core');

const TOKEN = 'dash-s3cret';
const Q = 'mail';
const WAIT = 30000; // a deadline for each wait, not a measure
const shots = process.env.SCREENSHOT_DIR;

let stack;
let admin; // a protocol connection, to set up and to check effects
let browser;
let page;
let base;
let deadJob;

before(async () => {
  const http = await freePort();
  base = `http://127.0.0.1:${http}/`;
  stack = await startStack({ emqdArgs: ['--token', TOKEN, '--metrics', `127.0.0.1:${http}`] });
  admin = await stack.connect({ token: TOKEN, name: 'dashboard-test' });
  for (let i = 0; i < 5; i++) await admin.request('enqueue', { queue: Q, payload: { to: `a${i}@acme.test` }, group: 'TENacme' });
  for (let i = 0; i < 3; i++) await admin.request('enqueue', { queue: Q, payload: { to: `b${i}@beta.test` }, group: 'TENbeta' });
  await admin.request('limit', { queue: Q, group: 'TENbeta', max: 2 });
  // One job dies: one attempt allowed, claimed from the flat set, failed.
  const d = await admin.request('enqueue', { queue: Q, payload: { to: 'nobody' }, max_attempts: 1 });
  deadJob = d.job;
  await admin.request('enqueue', { queue: Q, payload: { to: 'flat@x.test' } });
  const cl = await admin.request('claim', { queue: Q, flat: true, count: 1 });
  assert.equal(cl.jobs[0].job, deadJob);
  await admin.request('fail', { queue: Q, job: deadJob, lease: cl.jobs[0].lease, error: 'mailbox unavailable' });
  assert.equal((await admin.request('job', { queue: Q, job: deadJob })).job.state, 'dead');

  browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.setDefaultTimeout(WAIT);
});

after(async () => {
  await browser?.close();
  await stack?.stop();
});

async function shot(name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

async function groupPaused(group) {
  const r = await admin.request('groups', { queue: Q, count: 1000 });
  return r.groups.find((g) => g.group === group)?.paused === true;
}

async function confirm() {
  await page.locator('#confirm-dialog[open]').waitFor();
  await page.click('#confirm-ok');
}

test('a request without the token is refused, and changes nothing', async () => {
  const post = (headers) => fetch(base + 'api/pause', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Emq-Request': '1', ...headers },
    body: JSON.stringify({ queue: Q, group: 'TENacme' }),
  });
  for (const headers of [{}, { Authorization: 'Bearer wrong' }]) {
    const res = await post(headers);
    assert.equal(res.status, 401);
    const body = await res.json();
    assert.equal(body.ok, false);
    assert.equal(body.error, 'EAUTH');
  }
  assert.equal(await groupPaused('TENacme'), false);
});

test('the page asks for the token, then shows the queue', async () => {
  await page.goto(base);
  await page.locator('#token-dialog[open]').waitFor();
  await page.fill('#token-input', TOKEN);
  await page.click('#token-ok');
  const row = page.locator(`#queues-body tr[data-queue="${Q}"]`);
  await row.waitFor();
  // The totals as the protocol gives them: 8 grouped + 1 flat pending, 1 dead.
  await waitFor(async () => (await row.locator('td').nth(1).textContent()) === '9', { timeout: WAIT, what: 'pending 9' });
  assert.equal(await row.locator('td').nth(4).textContent(), '1');
  await shot('queues');
});

test('the queue view lists its groups, sortable', async () => {
  await page.click(`#queues-body tr[data-queue="${Q}"] a`);
  await page.locator('#groups-body tr[data-group="TENacme"]').waitFor();
  await page.locator('#groups-body tr[data-group="TENbeta"]').waitFor();
  await page.locator('#queue-cards [data-count="pending"] .value').filter({ hasText: '9' }).waitFor();
  // Deepest first by default; by name ascending on request.
  assert.deepEqual(await page.locator('#groups-body tr').evaluateAll((rs) => rs.map((r) => r.dataset.group)), ['TENacme', 'TENbeta']);
  const beta = page.locator('#groups-body tr[data-group="TENbeta"] td');
  assert.equal(await beta.nth(3).textContent(), '2'); // its ceiling
  await page.click('#groups-table th[data-sort="active"]');
  await page.click('#groups-table th[data-sort="group"]');
  await shot('queue');
});

test('pausing a group from the page pauses it', async () => {
  assert.equal(await groupPaused('TENacme'), false);
  await page.click('#groups-body tr[data-group="TENacme"] button[data-action="pause"]');
  await confirm();
  await page.locator('#toast', { hasText: 'TENacme paused' }).waitFor();
  await waitFor(() => groupPaused('TENacme'), { timeout: WAIT, what: 'TENacme paused over the protocol' });
  // The page shows it too, with the lever turned into resume.
  await page.locator('#groups-body tr[data-group="TENacme"] button[data-action="resume"]').waitFor();
});

test('cancelling a confirmation does nothing', async () => {
  await page.click('#groups-body tr[data-group="TENbeta"] button[data-action="drain"]');
  await page.locator('#confirm-dialog[open]').waitFor();
  await page.click('#confirm-cancel');
  await page.locator('#confirm-dialog[open]').waitFor({ state: 'detached' });
  assert.equal((await admin.request('depth', { queue: Q, group: 'TENbeta' })).depth, 3);
});

test('one group: its pending jobs in service order', async () => {
  await page.click('#groups-body tr[data-group="TENbeta"] a');
  await page.locator('#group-pending tbody tr[data-job]').nth(2).waitFor();
  assert.equal(await page.locator('#group-pending tbody tr[data-job]').count(), 3);
  const peek = await admin.request('peek', { queue: Q, group: 'TENbeta' });
  assert.deepEqual(await page.locator('#group-pending tbody tr[data-job]').evaluateAll((rs) => rs.map((r) => r.dataset.job)), peek.jobs.map((j) => j.job));
  await shot('group');
});

test('a dead job is retried from the dead letters', async () => {
  await page.goto(`${base}#/queue/${Q}/jobs/dead`);
  const row = page.locator(`#state-jobs tr[data-job="${deadJob}"]`);
  await row.waitFor();
  await row.locator('td', { hasText: 'mailbox unavailable' }).waitFor();
  await shot('dead');
  await row.locator('button[data-action="retry"]').click();
  await confirm();
  await page.locator('#toast', { hasText: '1 job retried' }).waitFor();
  const j = await admin.request('job', { queue: Q, job: deadJob });
  assert.equal(j.job.state, 'pending');
  assert.equal(j.job.attempts, 0);
  await row.waitFor({ state: 'detached' });
});

test('a job by id shows its row', async () => {
  await page.goto(`${base}#/job/${Q}/${deadJob}`);
  await page.locator('#job-table td[data-field="state"]', { hasText: 'pending' }).waitFor();
  assert.equal(await page.locator('#job-table td[data-field="job"]').textContent(), deadJob);
  await shot('job');
});

test('the workers view shows the connections and what one holds', async () => {
  const w = await stack.connect({ token: TOKEN, name: 'worker-7' });
  const got = await w.request('claim', { queue: Q, count: 2 });
  assert.equal(got.jobs.length, 2);
  const me = (await w.request('clients', {})).clients.find((c) => c.self);
  await page.goto(`${base}#/workers`);
  const row = page.locator(`#workers-body tr[data-client="${me.id}"]`);
  await row.locator('td', { hasText: 'worker-7' }).waitFor();
  assert.equal(await row.locator('td').nth(6).textContent(), '2');
  await row.locator('a').click();
  for (const j of got.jobs) await page.locator(`#held-table tr[data-job="${j.job}"]`).waitFor();
  await shot('workers');
  for (const j of got.jobs) await w.request('release', { queue: Q, job: j.job, lease: j.lease });
});

test('100,000 groups stay usable: scanned once, sorted, paged, filtered', async () => {
  const big = 'big';
  const N = 100000;
  // In batches of 1000, each item's result checked: a slow daemon (ASan,
  // loaded cores) must not leave the registry short of what the page is
  // then asked to show.
  for (let b = 0; b < N / 1000; b++) {
    const jobs = [];
    for (let i = b * 1000; i < (b + 1) * 1000; i++) jobs.push({ payload: i, group: `TENg${i}` });
    const r = await admin.request('enqueue_many', { queue: big, jobs });
    const bad = r.results.filter((x) => x.verdict !== 'enqueued');
    assert.equal(bad.length, 0, `batch ${b}: ${JSON.stringify(bad[0])}`);
  }
  for (let i = 0; i < 4; i++) await admin.request('enqueue', { queue: big, payload: i, group: 'TENdeep' });
  assert.equal((await admin.request('stats', { queue: big })).groups, N + 1);
  await page.goto(`${base}#/queue/${big}`);
  // The scan's status names the count when it is done (what it said last
  // goes in the failure).
  const want = `${(N + 1).toLocaleString('en-US')} groups (scanned`;
  let said = '';
  await waitFor(async () => (said = await page.textContent('#groups-status')).includes(want),
    { timeout: 300000, interval: 200, what: `the scan of ${N + 1} groups` }).catch((e) => {
    throw new Error(`${e.message}; the page said "${said}"`);
  });
  // Deepest first: the one group with 4 jobs heads the first screen of 50.
  assert.equal(await page.locator('#groups-body tr').first().getAttribute('data-group'), 'TENdeep');
  assert.equal(await page.locator('#groups-body tr').count(), 50);
  await page.locator('#groups-pager', { hasText: 'page 1 of 2,001' }).waitFor();
  await page.click('#groups-pager button:has-text("Next")');
  await page.locator('#groups-pager', { hasText: 'page 2 of 2,001' }).waitFor();
  await page.fill('#group-filter', 'TENg99999');
  await page.locator('#groups-pager', { hasText: '(1 groups)' }).waitFor();
  assert.equal(await page.locator('#groups-body tr').first().getAttribute('data-group'), 'TENg99999');
  await page.fill('#group-filter', '');
  await page.click('#groups-table th[data-sort="group"]');
  await page.locator('#groups-body tr').first().waitFor();
  assert.equal(await page.locator('#groups-body tr').first().getAttribute('data-group'), 'TENdeep');
  await shot('groups-100k');
});
