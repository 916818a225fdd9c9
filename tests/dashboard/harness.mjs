// What the dashboard's browser tests share: a liveprof server in a child
// process, Debian's Chromium through playwright-core, /api reads, and a CSV
// parser. Paths come from the environment ctest sets (see CMakeLists.txt),
// with the repository's defaults.
import {spawn} from 'node:child_process';
import {existsSync, mkdirSync, mkdtempSync, rmSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {chromium} from 'playwright-core';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
export const LIVEPROF = process.env.LIVEPROF_BIN ?? path.join(root, 'build/bin/liveprof');
export const SCREENSHOTS = process.env.LIVEPROF_SCREENSHOTS ?? path.join(root, 'build/screenshots');
export const CHROMIUM = process.env.LIVEPROF_CHROMIUM ?? '/usr/bin/chromium';

// A file of ../shared/data (LIVEPROF_SHARED_DATA, when set, replaces that
// folder): its path, and whether it is absent. Absent under CI=true, the
// test file fails; absent otherwise, the tests that need it skip, and if
// nothing else failed the file ends with the marker by which ctest reports
// it Skipped rather than Passed (tests/CMakeLists.txt, docs/testing.md).
export function sharedData(relative) {
  const base = process.env.LIVEPROF_SHARED_DATA || path.join(root, '..', 'shared', 'data');
  const file = path.join(base, relative);
  const absent = !existsSync(file);
  if (absent && process.env.CI === 'true') {
    throw new Error(`${file} is absent, and CI=true: CI must read ../shared/data/${relative.split('/')[0]}`);
  }
  if (absent) {
    process.on('exit', (code) => {
      if (code === 0) console.log(`LIVEPROF-SKIP: ${file} is absent`);
    });
  }
  return {file, absent};
}

// Starts `liveprof <args>` and resolves when it prints its URL.
export function startServer(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(LIVEPROF, args, {stdio: ['ignore', 'pipe', 'pipe']});
    let out = '';
    const timer = setTimeout(() => reject(new Error(`liveprof ${args.join(' ')}: no URL in 10 s:\n${out}`)), 10000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:(\d+)\/)/);
      if (m && !child.url) {
        clearTimeout(timer);
        child.url = m[1];
        child.port = +m[2];
        resolve(child);
      }
    });
    child.stderr.on('data', (d) => { out += d; });
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (!child.url) reject(new Error(`liveprof ${args.join(' ')} exited with ${code}:\n${out}`));
    });
  });
}

export function stopServer(child) {
  return new Promise((resolve) => {
    if (!child || child.exitCode !== null) return resolve();
    child.on('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

// A 503 is the server's "no snapshot published yet" (a just-started server,
// slow in a sanitizer build): asked again for up to 15 s; any other failure
// at once.
export async function api(base, pathAndQuery, format = 'json') {
  for (let i = 0; ; i++) {
    const r = await fetch(new URL(pathAndQuery, base));
    if (r.status === 503 && i < 150) {
      await r.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    if (!r.ok) throw new Error(`GET ${pathAndQuery}: HTTP ${r.status}`);
    return format === 'json' ? r.json() : r.text();
  }
}

// Resolves to f()'s first truthy answer, asked every 100 ms; after
// `seconds`, fails naming `what`.
export async function until(what, f, seconds = 60) {
  for (let i = 0; i < seconds * 10; i++) {
    const v = await f();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not within ${seconds} s`);
}

// Until a `liveprof demo --steps N` has all its steps in and nothing moves
// (90 s at most: the suites run beside other tests): the views and the
// store a test compares must hold the same events.
export async function waitForDemo(base, steps) {
  for (let i = 0; i < 900; i++) {
    const s = await api(base, '/api/status');
    if (s.steps_closed === steps && s.steps_open === 0) {
      await new Promise((r) => setTimeout(r, 500));
      const again = await api(base, '/api/status');
      if (again.events_consumed === s.events_consumed && again.seq > s.seq) break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Chromium's flags for a headless run in a container: no sandbox (root),
// no GPU, no background traffic (the network is closed).
export async function launchBrowser() {
  const profile = mkdtempSync(path.join(tmpdir(), 'liveprof-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: {width: 1400, height: 1000},
    acceptDownloads: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  context.close = ((close) => async () => {
    await close();
    rmSync(profile, {recursive: true, force: true});
  })(context.close.bind(context));
  return context;
}

// A page that records its errors: tests assert there were none.
export async function openPage(context, url) {
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') page.errors.push(`console: ${m.text()}`);
  });
  await page.goto(url);
  return page;
}

export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, {recursive: true});
  await page.screenshot({path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true});
}

// RFC 4180: fields separated by commas, quoted fields may hold commas,
// newlines and doubled quotes. Throws on a malformed file.
export function parseCsv(text) {
  const rows = [];
  let row = [];
  let field = '';
  let i = 0;
  let quoted = false;
  while (i < text.length) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 2;
        continue;
      }
      if (c === '"') quoted = false;
      else field += c;
      i++;
      continue;
    }
    if (c === '"') {
      if (field !== '') throw new Error(`CSV: a quote inside an unquoted field at offset ${i}`);
      quoted = true;
    } else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else {
      field += c;
    }
    i++;
  }
  if (quoted) throw new Error('CSV: a quoted field is not closed');
  if (field !== '' || row.length) {
    row.push(field);
    rows.push(row);
  }
  const width = rows[0]?.length;
  rows.forEach((r, n) => {
    if (r.length !== width) throw new Error(`CSV: row ${n} has ${r.length} fields, the header ${width}`);
  });
  return rows;
}

// The number shown in an element's text ("84.24 ms", "1,234", "47.6%").
export function shownNumber(text) {
  const m = String(text).replace(/,/g, '').match(/-?\d+(\.\d+)?/);
  if (!m) throw new Error(`no number in '${text}'`);
  return {value: Number(m[0]), decimals: m[1] ? m[1].length - 1 : 0};
}

// Equal to `expected` at the precision shown.
export function assertShown(assert, text, expected, what) {
  const {value, decimals} = shownNumber(text);
  const tolerance = 0.5 * 10 ** -decimals + 1e-9;
  assert.ok(Math.abs(value - expected) <= tolerance,
    `${what}: the page shows ${text} (${value}), /api says ${expected}`);
}

// A time shown in the unit of its magnitude (format.js's us(): "269.6 ms",
// "812.0 µs", "3.20 s", "450 ns") equal to `expectedUs` at the precision
// shown, in that unit.
const MICROS = {ns: 1e-3, 'µs': 1, ms: 1e3, s: 1e6};
export function assertShownUs(assert, text, expectedUs, what) {
  const unit = String(text).trim().match(/(ns|µs|ms|s)$/)?.[1];
  assert.ok(unit, `${what}: '${text}' has no time unit`);
  assertShown(assert, text, expectedUs / MICROS[unit], `${what} (in ${unit})`);
}

// Until the element's number equals what `expected()` (re-read each try, an
// /api call) says, at the precision shown: a page draws each publication a
// moment after /api has it, and a header figure comes with the status
// topic, not the page's. After `seconds`, fails with the last difference.
export async function assertShownSoon(assert, page, selector, expected, what, seconds = 15) {
  for (let i = 0; ; i++) {
    const want = await expected();
    const text = await page.locator(selector).first().innerText();
    try {
      assertShown(assert, text, want, what);
      return;
    } catch (e) {
      if (i >= seconds * 10) throw e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
