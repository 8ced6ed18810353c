// The echomq dashboard: one page, plain JavaScript, no framework. It reads
// emqd's /api (proto/HTTP.md): every call is POST /api/<op> with the op's
// arguments as JSON, and the answer is the protocol's reply line. Every
// request carries the X-Emq-Request header (emqd refuses /api requests
// without it, so another site cannot post to it from a browser) and, when
// the daemon has a token, Authorization: Bearer <token>, kept in this tab's
// sessionStorage: never in a cookie.
//
// Views (location.hash): #/ queues; #/queue/Q one queue and its groups;
// #/queue/Q/group/G one group; #/queue/Q/jobs/STATE a state's jobs (dead
// letters with retry and purge); #/job a job by id; #/workers the
// connections. The visible view refreshes every 2 s while the tab is
// visible, one refresh at a time; emqd shares identical reads between
// tabs (http-cache-ms).
'use strict';

const POLL_MS = 2000;
const GROUP_SCAN_PAGE = 1000; // groups asked per page while scanning
const GROUPS_PER_SCREEN = 50;
const PEEK_COUNT = 50;

// --- the API ---------------------------------------------------------------

class ApiError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

let token = sessionStorage.getItem('emq-token');

// emqd shares identical reads between tabs for http-cache-ms (1 s by
// default). Right after an action the page wants its own effect, not a
// shared reply from before it: for a moment its reads carry a ref of
// their own, which makes them differ.
const LEVERS = new Set(['pause', 'resume', 'limit', 'drain', 'remove', 'dead']);
let freshUntil = 0;
let freshSeq = 0;

async function api(op, args = {}) {
  if (!LEVERS.has(op) && performance.now() < freshUntil) args = { ...args, ref: `fresh-${++freshSeq}` };
  const headers = { 'Content-Type': 'application/json', 'X-Emq-Request': 'dashboard' };
  if (token) headers.Authorization = 'Bearer ' + token;
  let res;
  try {
    res = await fetch('api/' + op, {
      method: 'POST', headers, body: JSON.stringify(args), credentials: 'omit', cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError('ECONN', 'emqd does not answer (' + e.message + ')', 0);
  }
  let reply;
  try {
    reply = await res.json();
  } catch (e) {
    throw new ApiError('EPROTO', 'HTTP ' + res.status + ': not a reply line', res.status);
  }
  if (!reply.ok) {
    const err = new ApiError(reply.error, reply.message, res.status);
    if (reply.error === 'EAUTH' && res.status === 401) askToken(token ? 'That token was refused.' : '');
    throw err;
  }
  return reply;
}

// --- small DOM helpers (text only: names and payloads never become markup)

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

const $ = (sel) => document.querySelector(sel);
const fmt = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'));
const rate = (n) => (n === null || n === undefined || !isFinite(n) ? '—' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US'));
const qhref = (q) => '#/queue/' + encodeURIComponent(q);
const ghref = (q, g) => qhref(q) + '/group/' + encodeURIComponent(g);
const ago = (ms) => (ms < 1000 ? ms + ' ms' : ms < 60000 ? (ms / 1000).toFixed(1) + ' s' : ms < 3600000 ? Math.round(ms / 60000) + ' min' : (ms / 3600000).toFixed(1) + ' h');
const when = (ms) => (ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—');

function toast(text, bad) {
  const t = $('#toast');
  t.textContent = text;
  t.className = bad ? 'bad' : 'good';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 6000);
}

function card(label, value, id) {
  return h('div', { class: 'card', 'data-count': id }, h('div', { class: 'value' }, value), h('div', { class: 'label' }, label));
}

// A sparkline of per-interval counts (oldest first), as an inline SVG.
function spark(values, title) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 120 28');
  svg.setAttribute('class', 'spark');
  const t = document.createElementNS(ns, 'title');
  t.textContent = title;
  svg.append(t);
  if (!values || values.length < 2) {
    // emqd samples every 10 s: the first points come after 20 s.
    const wait = document.createElementNS(ns, 'text');
    wait.setAttribute('x', '0');
    wait.setAttribute('y', '18');
    wait.setAttribute('class', 'spark-wait');
    wait.textContent = 'collecting…';
    svg.append(wait);
    return svg;
  }
  const max = Math.max(1, ...values);
  const pts = values.map((v, i) => `${(i * 120 / (values.length - 1)).toFixed(1)},${(26 - v * 24 / max).toFixed(1)}`);
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', pts.join(' '));
  svg.append(line);
  return svg;
}

// --- confirmation and token dialogs ------------------------------------------

// Ask before an action; resolves to true, or (with a field) the number typed.
function confirmAction(title, text, field) {
  const d = $('#confirm-dialog');
  $('#confirm-title').textContent = title;
  $('#confirm-text').textContent = text;
  $('#confirm-field').hidden = !field;
  if (field) {
    $('#confirm-label').textContent = field.label + ' ';
    $('#confirm-input').value = field.value ?? '';
  }
  return new Promise((resolve) => {
    d.onclose = () => {
      if (d.returnValue !== 'ok') return resolve(false);
      if (!field) return resolve(true);
      const v = $('#confirm-input').value.trim();
      resolve(v === '' ? null : Number(v));
    };
    d.returnValue = '';
    d.showModal();
  });
}

// Run a confirmed action: its reply is shown, then the view refreshes.
async function act(title, text, op, args, done, field) {
  const answer = await confirmAction(title, text, field);
  if (answer === false) return;
  if (field) args = { ...args, [field.arg]: answer === null || answer === 0 ? null : answer };
  try {
    const r = await api(op, args);
    toast(done(r));
    freshUntil = performance.now() + 1500;
    refreshSoon();
  } catch (e) {
    toast(`${op} refused: ${e.code}: ${e.message}`, true);
  }
}

function askToken(why) {
  const d = $('#token-dialog');
  $('#token-error').hidden = !why;
  $('#token-error').textContent = why || '';
  if (!d.open) d.showModal();
}

$('#token-form').addEventListener('submit', () => {
  token = $('#token-input').value;
  sessionStorage.setItem('emq-token', token);
  $('#token-input').value = '';
  $('#signout').hidden = false;
  refreshSoon();
});
$('#signout').hidden = !token;
$('#signout').addEventListener('click', () => {
  token = null;
  sessionStorage.removeItem('emq-token');
  $('#signout').hidden = true;
  refreshSoon();
});

// --- throughput: counters from the throughput op, per second ---------------------

// The last totals seen per queue, to turn two polls into a live rate.
const lastTotals = new Map();

function liveRates(q) {
  const now = performance.now();
  const prev = lastTotals.get(q.queue);
  lastTotals.set(q.queue, { at: now, enqueued: q.enqueued, completed: q.completed, failed: q.failed });
  if (!prev || now - prev.at < 500) return prev?.rates || null;
  const dt = (now - prev.at) / 1000;
  const r = { enqueued: (q.enqueued - prev.enqueued) / dt, completed: (q.completed - prev.completed) / dt, failed: (q.failed - prev.failed) / dt };
  lastTotals.get(q.queue).rates = r;
  return r;
}

function perSecond(history, intervalMs) {
  return (history || []).map((n) => n * 1000 / intervalMs);
}

async function ratesByQueue(queue) {
  try {
    const r = await api('throughput', queue ? { queue } : {});
    const m = new Map();
    for (const q of r.queues) m.set(q.queue, { ...q, interval_ms: r.interval_ms, live: liveRates(q) });
    return m;
  } catch (e) {
    if (e.code === 'EUNKNOWN') return new Map();
    throw e;
  }
}

// --- the views ------------------------------------------------------------------

// Each view: render(main, params) builds it once; refresh() updates it.
const views = {};
let current = null;

views.queues = {
  async render(main) {
    main.append(h('h1', {}, 'Queues'),
      h('p', { class: 'hint' }, 'Every queue this emqd knows, with its totals; rates are what this daemon saw, per second (now, and per 10 s over the last 5 minutes).'),
      h('table', { class: 'grid', id: 'queues-table' },
        h('thead', {}, h('tr', {}, ['Queue', 'Pending', 'Active', 'Delayed', 'Dead', 'Groups', 'Paused', 'In /s', 'Done /s', 'Done, last 5 min'].map((c) => h('th', {}, c)))),
        h('tbody', { id: 'queues-body' })));
  },
  async refresh() {
    const [list, rates] = await Promise.all([allQueues(), ratesByQueue()]);
    const body = $('#queues-body');
    if (!body) return;
    const rows = list.map((q) => {
      const r = rates.get(q.queue);
      return h('tr', { 'data-queue': q.queue },
        h('td', {}, h('a', { href: qhref(q.queue) }, q.queue)),
        h('td', { class: 'num' }, fmt(q.pending)), h('td', { class: 'num' }, fmt(q.active)),
        h('td', { class: 'num' }, fmt(q.delayed)),
        h('td', { class: 'num' }, q.dead ? h('a', { href: qhref(q.queue) + '/jobs/dead', class: 'bad' }, fmt(q.dead)) : fmt(q.dead)),
        h('td', { class: 'num' }, fmt(q.groups)), h('td', { class: 'num' }, fmt(q.paused)),
        h('td', { class: 'num' }, rate(r?.live?.enqueued)), h('td', { class: 'num' }, rate(r?.live?.completed)),
        h('td', {}, spark(perSecond(r?.history?.completed, r?.interval_ms || 10000), 'completed per second, per 10 s')));
    });
    body.replaceChildren(...(rows.length ? rows : [h('tr', {}, h('td', { colspan: 10, class: 'empty' }, 'No queues yet: enqueue a job.'))]));
  },
};

// Every queue with its totals: the queues op, page by page; an emqd
// without it lists the queues the throughput op knows, each with stats.
async function allQueues() {
  try {
    const out = [];
    let cursor = '0';
    for (let pages = 0; pages < 100; pages++) {
      const r = await api('queues', { cursor, count: 500 });
      out.push(...r.queues);
      cursor = r.cursor;
      if (cursor === '0') break;
    }
    return out.sort((a, b) => a.queue.localeCompare(b.queue));
  } catch (e) {
    if (e.code !== 'EUNKNOWN') throw e;
  }
  const names = [...(await ratesByQueue()).keys()].sort().slice(0, 100);
  return Promise.all(names.map(async (queue) => ({ queue, ...(await api('stats', { queue })) })));
}

// One queue: its counts, rates, and its groups (scanned page by page,
// then sorted and shown a screen at a time in the page: 100,000 groups
// are 100 calls of the groups op, once, not at every refresh).
views.queue = {
  async render(main, p) {
    this.q = p.queue;
    this.groups = null;
    this.sort = { key: 'depth', dir: -1 };
    this.page = 0;
    this.filter = '';
    main.append(
      h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Queues'), ' / ', this.q),
      h('h1', {}, 'Queue ', h('span', { class: 'name' }, this.q)),
      h('div', { class: 'cards', id: 'queue-cards' }),
      h('div', { class: 'tabs' },
        ['pending', 'active', 'delayed', 'dead'].map((s) => h('a', { href: qhref(this.q) + '/jobs/' + s }, s === 'pending' ? 'Flat backlog' : s === 'dead' ? 'Dead letters' : s[0].toUpperCase() + s.slice(1)))),
      h('h2', {}, 'Groups'),
      h('div', { class: 'toolbar' },
        h('input', { type: 'search', id: 'group-filter', placeholder: 'filter by group id', oninput: (e) => { this.filter = e.target.value; this.page = 0; this.draw(); } }),
        h('button', { type: 'button', id: 'groups-rescan', onclick: () => this.scan() }, 'Rescan groups'),
        h('span', { id: 'groups-status', class: 'hint' })),
      h('table', { class: 'grid', id: 'groups-table' },
        h('thead', {}, h('tr', {}, [['group', 'Group'], ['depth', 'Pending'], ['active', 'Active'], ['limit', 'Ceiling'], ['paused', 'Paused']].map(([k, label]) =>
          h('th', { class: 'sortable', 'data-sort': k, onclick: () => { this.sort = { key: k, dir: this.sort.key === k ? -this.sort.dir : (k === 'group' ? 1 : -1) }; this.page = 0; this.draw(); } }, label)), h('th', {}, 'Actions'))),
        h('tbody', { id: 'groups-body' })),
      h('div', { class: 'pager', id: 'groups-pager' }));
    this.scan();
  },
  async refresh() {
    const [st, rates] = await Promise.all([api('stats', { queue: this.q }), ratesByQueue(this.q)]);
    const r = rates.get(this.q);
    const cards = $('#queue-cards');
    if (!cards) return;
    cards.replaceChildren(
      card('pending', fmt(st.pending), 'pending'), card('active', fmt(st.active), 'active'),
      card('delayed', fmt(st.delayed), 'delayed'), card('dead', fmt(st.dead), 'dead'),
      card('ring (lanes ready)', fmt(st.ring), 'ring'), card('groups', fmt(st.groups), 'groups'),
      card('paused groups', fmt(st.paused), 'paused'), card('flat backlog', fmt(st.flat), 'flat'),
      card('enqueued /s', rate(r?.live?.enqueued), 'in'), card('completed /s', rate(r?.live?.completed), 'done'),
      h('div', { class: 'card wide' }, spark(perSecond(r?.history?.completed, r?.interval_ms || 10000), 'completed per second'),
        h('div', { class: 'label' }, 'completed /s, last 5 min')),
      h('div', { class: 'card wide' }, spark(perSecond(r?.history?.enqueued, r?.interval_ms || 10000), 'enqueued per second'),
        h('div', { class: 'label' }, 'enqueued /s, last 5 min')));
    // A small registry is scanned again at each refresh; a large one on request.
    if (this.groups && this.groups.length <= GROUP_SCAN_PAGE && !this.scanning && this.scanPages === 1) this.scan(true);
  },
  async scan(quiet) {
    if (this.scanning) return;
    this.scanning = true;
    const status = $('#groups-status');
    // A scan of the registry (SSCAN) may list a group twice while Redis
    // rehashes the set: keyed by name, the later row wins.
    const found = new Map();
    let cursor = '0';
    let pages = 0;
    try {
      do {
        // A page that fails (a busy daemon: EUNAVAILABLE) is asked again,
        // twice, before the scan gives up.
        let r;
        for (let tries = 0; !r; tries++) {
          try {
            r = await api('groups', { queue: this.q, cursor, count: GROUP_SCAN_PAGE });
          } catch (e) {
            if (tries >= 2 || e.code === 'EAUTH' || e.code === 'EARG') throw e;
          }
        }
        for (const g of r.groups) found.set(g.group, g);
        cursor = r.cursor;
        pages++;
        if (!quiet && status) status.textContent = `scanning… ${fmt(found.size)} groups`;
      } while (cursor !== '0' && current === this);
      this.groups = [...found.values()];
      this.scanPages = pages;
      if (status) status.textContent = `${fmt(found.size)} groups (scanned ${new Date().toLocaleTimeString()})`;
      this.draw();
    } catch (e) {
      if (status) status.textContent = `scan failed: ${e.code}: ${e.message}`;
    } finally {
      this.scanning = false;
    }
  },
  draw() {
    const body = $('#groups-body');
    if (!body || !this.groups) return;
    const { key, dir } = this.sort;
    const val = (g) => (key === 'limit' ? (g.limit ?? -1) : key === 'paused' ? (g.paused ? 1 : 0) : g[key]);
    let list = this.filter ? this.groups.filter((g) => g.group.includes(this.filter)) : this.groups.slice();
    list.sort((a, b) => (val(a) < val(b) ? -dir : val(a) > val(b) ? dir : a.group.localeCompare(b.group)));
    const pages = Math.max(1, Math.ceil(list.length / GROUPS_PER_SCREEN));
    this.page = Math.min(this.page, pages - 1);
    const shown = list.slice(this.page * GROUPS_PER_SCREEN, (this.page + 1) * GROUPS_PER_SCREEN);
    for (const th of document.querySelectorAll('#groups-table th.sortable')) th.dataset.dir = th.dataset.sort === key ? (dir > 0 ? 'asc' : 'desc') : '';
    body.replaceChildren(...(shown.length ? shown.map((g) => groupRow(this.q, g)) : [h('tr', {}, h('td', { colspan: 6, class: 'empty' }, 'No groups.'))]));
    $('#groups-pager').replaceChildren(
      h('button', { type: 'button', disabled: this.page === 0, onclick: () => { this.page--; this.draw(); } }, '‹ Previous'),
      h('span', {}, ` page ${this.page + 1} of ${fmt(pages)} (${fmt(list.length)} groups) `),
      h('button', { type: 'button', disabled: this.page >= pages - 1, onclick: () => { this.page++; this.draw(); } }, 'Next ›'));
  },
};

function groupRow(q, g) {
  return h('tr', { 'data-group': g.group },
    h('td', {}, h('a', { href: ghref(q, g.group) }, g.group)),
    h('td', { class: 'num' }, fmt(g.depth)), h('td', { class: 'num' }, fmt(g.active)),
    h('td', { class: 'num' }, g.limit === null ? '—' : fmt(g.limit)),
    h('td', {}, g.paused ? h('span', { class: 'tag paused' }, 'paused') : ''),
    h('td', { class: 'actions' }, groupActions(q, g.group, g.paused, g.limit)));
}

// The levers of one group, each confirmed.
function groupActions(q, group, paused, limit) {
  const args = { queue: q, group };
  return [
    paused
      ? h('button', { type: 'button', 'data-action': 'resume', onclick: () => act('Resume ' + group + '?', `Its lane returns to the ring of ${q}.`, 'resume', args, (r) => r.changed ? `${group} resumed` : `${group} was not paused`) }, 'Resume')
      : h('button', { type: 'button', 'data-action': 'pause', onclick: () => act('Pause ' + group + '?', `No job of ${group} is handed out until it is resumed; jobs already leased run on.`, 'pause', args, (r) => r.changed ? `${group} paused` : `${group} was paused already`) }, 'Pause'),
    h('button', { type: 'button', 'data-action': 'limit', onclick: () => act('Ceiling of ' + group, `At most this many jobs of ${group} active at once (empty or 0: no ceiling).`, 'limit', args, () => `${group}: ceiling set`, { label: 'max', arg: 'max', value: limit ?? '' }) }, 'Limit'),
    h('button', { type: 'button', class: 'danger', 'data-action': 'drain', onclick: () => act('Drain ' + group + '?', `Deletes every pending job of ${group} in ${q}. Active and delayed jobs stay.`, 'drain', args, (r) => `${group}: ${fmt(r.drained)} jobs deleted`) }, 'Drain'),
  ];
}

// One group: its pending jobs (peek, in service order) and its leases.
views.group = {
  async render(main, p) {
    this.q = p.queue;
    this.g = p.group;
    this.cursor = null;
    main.append(
      h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Queues'), ' / ', h('a', { href: qhref(this.q) }, this.q), ' / ', this.g),
      h('h1', {}, 'Group ', h('span', { class: 'name' }, this.g)),
      h('div', { class: 'cards', id: 'group-cards' }),
      h('div', { class: 'toolbar', id: 'group-actions' }),
      h('h2', {}, 'Pending, in service order'),
      jobTable('group-pending'),
      h('div', { class: 'pager', id: 'group-pager' }),
      h('h2', {}, 'Leases (active), soonest deadline first'),
      jobTable('group-active'));
  },
  async refresh() {
    const [depth, pend, act_, info] = await Promise.all([
      api('depth', { queue: this.q, group: this.g }),
      api('peek', { queue: this.q, group: this.g, state: 'pending', count: PEEK_COUNT, ...(this.cursor ? { cursor: this.cursor } : {}) }),
      api('peek', { queue: this.q, group: this.g, state: 'active', count: PEEK_COUNT }),
      findGroup(this.q, this.g),
    ]);
    if (!$('#group-cards')) return;
    $('#group-cards').replaceChildren(card('pending', fmt(depth.depth), 'pending'), card('active', info ? fmt(info.active) : fmt(act_.jobs.length), 'active'),
      card('ceiling', info && info.limit !== null ? fmt(info.limit) : '—', 'limit'), card('paused', info?.paused ? 'yes' : 'no', 'paused'));
    $('#group-actions').replaceChildren(...groupActions(this.q, this.g, info?.paused, info?.limit));
    fillJobs('#group-pending', this.q, pend.jobs);
    fillJobs('#group-active', this.q, act_.jobs);
    $('#group-pager').replaceChildren(
      h('button', { type: 'button', disabled: !this.cursor, onclick: () => { this.cursor = null; refreshSoon(); } }, '« First page'),
      h('button', { type: 'button', disabled: !pend.cursor, onclick: () => { this.cursor = pend.cursor; refreshSoon(); } }, 'Next page ›'));
  },
};

// A group's registry entry (ceiling, paused): the groups op has no lookup
// by name, so this reads its first page (one call) and, past it, the
// entry the queue view's last scan found (null when neither has it).
async function findGroup(q, g) {
  const r = await api('groups', { queue: q, count: GROUP_SCAN_PAGE });
  const hit = r.groups.find((x) => x.group === g);
  if (hit) return hit;
  const v = views.queue;
  return v.q === q && v.groups ? v.groups.find((x) => x.group === g) || null : null;
}

function jobTable(id) {
  return h('table', { class: 'grid jobs', id },
    h('thead', {}, h('tr', {}, ['Job', 'Group', 'Attempts', 'Created', 'Detail', 'Payload', 'Actions'].map((c) => h('th', {}, c)))),
    h('tbody', {}));
}

function fillJobs(sel, q, jobs) {
  const body = $(sel + ' tbody');
  if (!body) return;
  body.replaceChildren(...(jobs.length ? jobs.map((j) => jobRow(q, j)) : [h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'None.'))]));
}

function jobRow(q, j) {
  const detail = j.state === 'active' ? 'lease until ' + when(j.lease_until)
    : j.state === 'delayed' ? 'due ' + when(j.ready_ms)
      : j.state === 'dead' ? (j.error || '') + ' (died ' + when(j.finished_ms) + ')'
        : j.error ? 'last error: ' + j.error : '';
  return h('tr', { 'data-job': j.job },
    h('td', {}, h('a', { href: '#/job/' + encodeURIComponent(q) + '/' + encodeURIComponent(j.job), class: 'mono' }, j.job)),
    h('td', {}, j.group === null ? h('span', { class: 'hint' }, '(flat)') : h('a', { href: ghref(q, j.group) }, j.group)),
    h('td', { class: 'num' }, `${j.attempts ?? 0}/${j.max_attempts || '∞'}`),
    h('td', {}, when(j.created_ms)),
    h('td', {}, detail),
    h('td', { class: 'payload mono' }, j.payload === undefined ? '' : JSON.stringify(j.payload).slice(0, 120)),
    h('td', { class: 'actions' }, jobActions(q, j)));
}

// What can be done to one job, by its state.
function jobActions(q, j) {
  const args = { queue: q, job: j.job };
  if (j.state === 'dead') {
    return [
      h('button', { type: 'button', 'data-action': 'retry', onclick: () => act('Retry ' + j.job + '?', 'It goes back to its lane with its attempts reset to 0.', 'dead', { ...args, action: 'retry' }, (r) => `${fmt(r.count)} job retried`) }, 'Retry'),
      h('button', { type: 'button', class: 'danger', 'data-action': 'purge', onclick: () => act('Purge ' + j.job + '?', 'Its row is deleted for good.', 'dead', { ...args, action: 'purge' }, (r) => `${fmt(r.count)} job purged`) }, 'Purge'),
    ];
  }
  if (j.state === 'pending' || j.state === 'delayed') {
    return [h('button', { type: 'button', class: 'danger', 'data-action': 'remove', onclick: () => act('Remove ' + j.job + '?', `The ${j.state} job and its row are deleted.`, 'remove', args, (r) => `removed (it was ${r.state})`) }, 'Remove')];
  }
  return [];
}

// The jobs of one state of a queue (the flat backlog, leases, delayed,
// dead letters), paged with peek; dead letters can be retried or purged
// one by one or all at once.
views.jobs = {
  async render(main, p) {
    this.q = p.queue;
    this.state = p.state;
    this.cursors = [null];
    const title = { pending: 'Flat backlog', active: 'Active (leases)', delayed: 'Delayed', dead: 'Dead letters' }[this.state] || this.state;
    main.append(
      h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Queues'), ' / ', h('a', { href: qhref(this.q) }, this.q), ' / ', title),
      h('h1', {}, title, ' of ', h('span', { class: 'name' }, this.q)),
      this.state === 'dead' ? h('div', { class: 'toolbar' },
        h('button', { type: 'button', id: 'retry-all', onclick: () => act('Retry all dead jobs?', `Up to 10,000 dead jobs of ${this.q}, oldest first, go back to their lanes.`, 'dead', { queue: this.q, action: 'retry', limit: 10000 }, (r) => `${fmt(r.count)} jobs retried`) }, 'Retry all'),
        h('button', { type: 'button', class: 'danger', id: 'purge-all', onclick: () => act('Purge all dead jobs?', `Up to 10,000 dead jobs of ${this.q}, oldest first, are deleted for good.`, 'dead', { queue: this.q, action: 'purge', limit: 10000 }, (r) => `${fmt(r.count)} jobs purged`) }, 'Purge all')) : '',
      this.state === 'pending' ? h('div', { class: 'toolbar' },
        h('button', { type: 'button', class: 'danger', id: 'drain-flat', onclick: () => act('Drain the flat backlog?', `Deletes every pending ungrouped job of ${this.q}.`, 'drain', { queue: this.q }, (r) => `${fmt(r.drained)} jobs deleted`) }, 'Drain flat backlog')) : '',
      jobTable('state-jobs'),
      h('div', { class: 'pager', id: 'state-pager' }));
  },
  async refresh() {
    const cursor = this.cursors[this.cursors.length - 1];
    const r = await api('peek', { queue: this.q, state: this.state, count: PEEK_COUNT, ...(cursor ? { cursor } : {}) });
    fillJobs('#state-jobs', this.q, r.jobs);
    const pager = $('#state-pager');
    if (!pager) return;
    pager.replaceChildren(
      h('button', { type: 'button', disabled: this.cursors.length < 2, onclick: () => { this.cursors.pop(); refreshSoon(); } }, '‹ Previous'),
      h('span', {}, ` page ${this.cursors.length} `),
      h('button', { type: 'button', disabled: !r.cursor, onclick: () => { this.cursors.push(r.cursor); refreshSoon(); } }, 'Next ›'));
  },
};

// A job by id: its row, as the job op reads it.
views.job = {
  async render(main, p) {
    this.q = p.queue || '';
    this.id = p.job || '';
    main.append(h('h1', {}, 'Find a job'),
      h('form', { class: 'toolbar', id: 'job-form', onsubmit: (e) => { e.preventDefault(); location.hash = '#/job/' + encodeURIComponent($('#job-queue').value.trim()) + '/' + encodeURIComponent($('#job-id').value.trim()); } },
        h('input', { id: 'job-queue', placeholder: 'queue', value: this.q, required: true }),
        h('input', { id: 'job-id', class: 'mono wide', placeholder: 'JOB…', value: this.id, required: true }),
        h('button', { type: 'submit' }, 'Look up')),
      h('div', { id: 'job-row' }));
  },
  async refresh() {
    const box = $('#job-row');
    if (!box || !this.q || !this.id) return;
    let r;
    try {
      r = await api('job', { queue: this.q, job: this.id });
    } catch (e) {
      if (e.code === 'ENOJOB' || e.code === 'EKIND' || e.code === 'EQUEUE' || e.code === 'EARG') {
        box.replaceChildren(h('p', { class: 'bad', id: 'job-missing' }, `${e.code}: ${e.message}`));
        return;
      }
      throw e;
    }
    const j = r.job;
    const rows = Object.entries(j).filter(([k]) => k !== 'payload').map(([k, v]) =>
      h('tr', {}, h('th', {}, k), h('td', { class: 'mono', 'data-field': k }, /_ms$|lease_until/.test(k) && typeof v === 'number' ? `${when(v)} (${v})` : v === null ? 'null' : String(v))));
    box.replaceChildren(
      h('table', { class: 'kv', id: 'job-table' }, h('tbody', {}, rows)),
      j.payload === undefined ? '' : h('div', {}, h('h2', {}, 'Payload'), h('pre', { class: 'payload-full' }, JSON.stringify(j.payload, null, 2))),
      h('div', { class: 'toolbar' }, jobActions(this.q, j), j.group ? h('a', { href: ghref(this.q, j.group) }, 'its group') : ''));
  },
};

// The connections of this emqd: the clients op (its workers, their streams
// and leases).
views.workers = {
  async render(main) {
    main.append(h('h1', {}, 'Workers'),
      h('p', { class: 'hint' }, 'The connections of this emqd (other daemons on the same Redis have their own). Select one to see the jobs it holds.'),
      h('table', { class: 'grid', id: 'workers-table' },
        h('thead', {}, h('tr', {}, ['Id', 'Name', 'Address', 'Connected', 'Idle', 'Streams (credit)', 'Leases'].map((c) => h('th', {}, c)))),
        h('tbody', { id: 'workers-body' })),
      h('div', { id: 'worker-held' }));
  },
  async refresh() {
    let rows;
    try {
      rows = await allClients();
    } catch (e) {
      if (e.code !== 'EUNKNOWN') throw e;
      $('#workers-body').replaceChildren(h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'This emqd has no clients op.')));
      return;
    }
    const body = $('#workers-body');
    if (!body) return;
    body.replaceChildren(...(rows.length ? rows.map((c) => h('tr', { 'data-client': c.id, class: c.id === this.sel ? 'selected' : '' },
      h('td', {}, h('a', { href: '#/workers', onclick: (e) => { e.preventDefault(); this.sel = c.id; refreshSoon(); } }, String(c.id))),
      h('td', {}, c.name ?? h('span', { class: 'hint' }, '—')), h('td', { class: 'mono' }, c.addr),
      h('td', {}, ago(c.age_ms)), h('td', {}, ago(c.idle_ms)),
      h('td', {}, (c.streams || []).map((st) => `${st.queue}${st.flat ? ' (flat)' : ''}: ${st.credit} credit, ${st.outstanding} out`).join('; ') || (c.parked ? `${c.parked} parked claim(s)` : '—')),
      h('td', { class: 'num' }, fmt(c.leases)))) : [h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'No connections.'))]));
    const held = $('#worker-held');
    if (this.sel === undefined) return held.replaceChildren();
    let one;
    try {
      one = (await api('clients', { id: this.sel })).client;
    } catch (e) {
      if (e.code !== 'ENOTFOUND') throw e;
      this.sel = undefined;
      return held.replaceChildren(h('p', { class: 'hint' }, 'That connection has closed.'));
    }
    held.replaceChildren(h('h2', {}, `Jobs held by connection ${one.id}${one.name ? ' (' + one.name + ')' : ''}`),
      h('table', { class: 'grid', id: 'held-table' },
        h('thead', {}, h('tr', {}, ['Queue', 'Job', 'Group', 'Lease deadline'].map((c) => h('th', {}, c)))),
        h('tbody', {}, one.held.length ? one.held.map((x) => h('tr', { 'data-job': x.job },
          h('td', {}, h('a', { href: qhref(x.queue) }, x.queue)),
          h('td', {}, h('a', { class: 'mono', href: '#/job/' + encodeURIComponent(x.queue) + '/' + encodeURIComponent(x.job) }, x.job)),
          h('td', {}, x.group ?? '(flat)'), h('td', {}, when(x.deadline_ms)))) : h('tr', {}, h('td', { colspan: 4, class: 'empty' }, 'None.')))));
  },
};

// Every connection, newest first: the clients op, page by page (at most
// 20 pages of 1000).
async function allClients() {
  const out = [];
  let cursor = '0';
  for (let pages = 0; pages < 20; pages++) {
    const r = await api('clients', cursor === '0' ? { count: 1000 } : { cursor, count: 1000 });
    out.push(...r.clients);
    cursor = r.cursor;
    if (cursor === '0') break;
  }
  return out;
}

// --- routing and the refresh loop ---------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'queue' && parts[1]) {
    if (parts[2] === 'group' && parts[3]) return ['group', { queue: parts[1], group: parts[3] }];
    if (parts[2] === 'jobs' && parts[3]) return ['jobs', { queue: parts[1], state: parts[3] }];
    return ['queue', { queue: parts[1] }];
  }
  if (parts[0] === 'job') return ['job', { queue: parts[1], job: parts[2] }];
  if (parts[0] === 'workers') return ['workers', {}];
  return ['queues', {}];
}

let refreshing = false;
let again = false;

async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  const v = current;
  try {
    await v.refresh();
    $('#live').className = 'live ok';
    $('#live').textContent = 'live · ' + new Date().toLocaleTimeString();
  } catch (e) {
    $('#live').className = 'live bad';
    $('#live').textContent = `${e.code}: ${e.message}`;
  } finally {
    refreshing = false;
    if (again) { again = false; refresh(); }
  }
}

function refreshSoon() {
  setTimeout(refresh, 0);
}

async function show() {
  const [name, params] = route();
  const main = $('#main');
  main.replaceChildren();
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('here', a.dataset.nav === (name === 'queue' || name === 'group' || name === 'jobs' ? 'queues' : name));
  current = views[name];
  main.dataset.view = name;
  await current.render(main, params);
  refresh();
}

window.addEventListener('hashchange', show);
// Poll while visible: a tab in the background asks nothing.
setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(); });
show();
