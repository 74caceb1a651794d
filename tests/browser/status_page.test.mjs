// The status page in a real browser: headless Chromium (Debian's chromium package, pinned in
// scripts/setup.lock) driven over the Chrome DevTools protocol on --remote-debugging-pipe, node's
// stdlib only. The daemon (auth token set, the replay server as its Ollama backend) has routed one
// chat request; the page must show nothing but a token prompt until the token is typed in, then
// fill its tables (backend row, model row, the routing decision) and draw the throughput plot. A
// screenshot is written to $QR_TEST_OUT/status_page.png and checked: a valid PNG of the window's
// size with enough distinct colours not to be blank.
//
// Environment (set by CTest, tests/CMakeLists.txt): QR_TEST_DAEMON, QR_TEST_REPLAY, QR_TEST_CASES,
// QR_TEST_OUT (the directory for the screenshot), QR_CHROMIUM (default: chromium on PATH).
// Fails (never skips) when chromium is missing. Whole run bounded by DEADLINE_MS.
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

const DEADLINE_MS = 28000;
const WIDTH = 1280;
const HEIGHT = 900;
const TOKEN = 'browser-status-token';
const MODEL = 'llama3.2:1b';

const env = (k) => {
  const v = process.env[k];
  if (!v) fail(`${k} is not set (run through ctest)`);
  return v;
};
const children = [];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-browser-'));

function cleanup() {
  for (const c of children) {
    try {
      // chromium runs in its own process group: its renderer and utility processes go with it
      if (c.qrGroup) process.kill(-c.pid, 'SIGKILL');
      else c.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
  try {
    fs.rmSync(tmp, {recursive: true, force: true, maxRetries: 10, retryDelay: 100});
  } catch (e) {
    console.error(`status_page: warning: cannot remove ${tmp}: ${e.message}`);
  }
}
function fail(msg) {
  console.error(`status_page: FAIL: ${msg}`);
  cleanup();
  process.exit(1);
}
const timer = setTimeout(() => fail(`not done within ${DEADLINE_MS} ms`), DEADLINE_MS);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function start(tag, argv, extraEnv) {
  const log = path.join(tmp, `${tag}.log`);
  const fd = fs.openSync(log, 'w');
  const p = spawn(argv[0], argv.slice(1), {env: {...process.env, ...extraEnv}, stdio: ['ignore', fd, fd]});
  fs.closeSync(fd);
  p.on('error', (e) => fail(`${tag}: ${e.message}`));
  children.push(p);
  return {proc: p, log: () => fs.readFileSync(log, 'utf8')};
}

async function waitFor(what, probe, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

// ---- the daemon and its scripted Ollama upstream ----

async function startServers() {
  const portFile = path.join(tmp, 'replay.port');
  start('replay', [env('QR_TEST_REPLAY'), '--listen', '127.0.0.1:0', '--port-file', portFile,
    '--log', path.join(tmp, 'requests.jsonl'), path.join(env('QR_TEST_CASES'), 'replay')], {});
  const replayPort = await waitFor('the replay port', () => {
    try {
      return parseInt(fs.readFileSync(portFile, 'utf8'), 10) || 0;
    } catch {
      return 0;
    }
  });
  const cleanEnv = {};
  for (const k of Object.keys(process.env)) if (k.startsWith('QUANTUM_RUNTIME_')) cleanEnv[k] = '';
  const state = path.join(tmp, 'state');
  fs.mkdirSync(state);
  const d = start('daemon', [env('QR_TEST_DAEMON'), 'serve'], {
    ...cleanEnv,
    QUANTUM_RUNTIME_LISTEN: '127.0.0.1:0',
    QUANTUM_RUNTIME_STATE_DIR: state,
    QUANTUM_RUNTIME_AUTH_TOKEN: TOKEN,
    QUANTUM_RUNTIME_OLLAMA_URL: `http://127.0.0.1:${replayPort}`,
  });
  const port = await waitFor('the daemon port', () => {
    const m = /quantum-runtime listening.*?"port":(\d+)/.exec(d.log());
    return m ? parseInt(m[1], 10) : 0;
  });
  return `http://127.0.0.1:${port}`;
}

// ---- Chrome DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-framed) ----

class Cdp {
  constructor(bin) {
    const profile = path.join(tmp, 'profile');
    this.proc = spawn(bin, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
      '--no-first-run', '--no-default-browser-check', '--disable-extensions', '--mute-audio',
      '--hide-scrollbars', `--window-size=${WIDTH},${HEIGHT}`, `--user-data-dir=${profile}`,
      '--remote-debugging-pipe', 'about:blank'],
    {stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], detached: true});
    this.proc.qrGroup = true;
    children.push(this.proc);
    this.stderr = '';
    this.proc.stderr.on('data', (b) => (this.stderr = (this.stderr + b).slice(-4000)));
    this.proc.on('error', (e) => fail(`cannot start ${bin}: ${e.message}`));
    this.proc.on('exit', (code, sig) => {
      if (!this.closing) fail(`chromium exited (${code ?? sig}): ${this.stderr}`);
    });
    this.id = 0;
    this.pending = new Map();
    this.buf = Buffer.alloc(0);
    this.proc.stdio[4].on('data', (chunk) => this.onData(chunk));
  }

  onData(chunk) {
    this.buf = Buffer.concat([this.buf, chunk]);
    for (let i; (i = this.buf.indexOf(0)) >= 0;) {
      const msg = JSON.parse(this.buf.subarray(0, i).toString('utf8'));
      this.buf = this.buf.subarray(i + 1);
      const p = msg.id !== undefined && this.pending.get(msg.id);
      if (!p) continue;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
      else p.resolve(msg.result);
    }
  }

  send(method, params = {}, sessionId) {
    const id = ++this.id;
    const msg = {id, method, params, ...(sessionId ? {sessionId} : {})};
    return new Promise((resolve, reject) => {
      this.pending.set(id, {resolve, reject, method});
      this.proc.stdio[3].write(JSON.stringify(msg) + '\0');
    });
  }

  close() {
    this.closing = true;
  }
}

async function evaluate(cdp, sid, expr) {
  const r = await cdp.send('Runtime.evaluate', {expression: expr, returnByValue: true}, sid);
  if (r.exceptionDetails) fail(`page script error: ${JSON.stringify(r.exceptionDetails).slice(0, 400)}`);
  return r.result.value;
}

// ---- PNG check: signature, IHDR size, then inflate and unfilter to count distinct colours ----

function checkPng(png) {
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (png.length < 33 || !png.subarray(0, 8).equals(sig)) fail('the screenshot is not a PNG');
  if (png.toString('latin1', 12, 16) !== 'IHDR') fail('the PNG has no IHDR first');
  const w = png.readUInt32BE(16), h = png.readUInt32BE(20), depth = png[24], type = png[25];
  if (w !== WIDTH || h !== HEIGHT) fail(`the screenshot is ${w}x${h}, want ${WIDTH}x${HEIGHT}`);
  if (depth !== 8 || (type !== 2 && type !== 6)) fail(`unexpected PNG format: depth ${depth} type ${type}`);
  const idat = [];
  let sawEnd = false;
  for (let off = 8; off + 8 <= png.length;) {
    const len = png.readUInt32BE(off), kind = png.toString('latin1', off + 4, off + 8);
    if (kind === 'IDAT') idat.push(png.subarray(off + 8, off + 8 + len));
    if (kind === 'IEND') sawEnd = true;
    off += 12 + len;
  }
  if (!sawEnd) fail('the PNG has no IEND chunk');
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const bpp = type === 6 ? 4 : 3, stride = w * bpp;
  if (raw.length !== h * (stride + 1)) fail(`the PNG's image data is ${raw.length} bytes, want ${h * (stride + 1)}`);
  const out = Buffer.alloc(h * stride);
  for (let y = 0; y < h; y++) {
    const f = raw[y * (stride + 1)], src = y * (stride + 1) + 1, dst = y * stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? out[dst + x - bpp] : 0;
      const b = y ? out[dst - stride + x] : 0;
      const c = x >= bpp && y ? out[dst - stride + x - bpp] : 0;
      let pred = 0;
      if (f === 1) pred = a;
      else if (f === 2) pred = b;
      else if (f === 3) pred = (a + b) >> 1;
      else if (f === 4) {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (f !== 0) fail(`bad PNG filter ${f}`);
      out[dst + x] = (raw[src + x] + pred) & 0xff;
    }
  }
  const counts = new Map();
  for (let i = 0; i < out.length; i += bpp) {
    const k = (out[i] << 16) | (out[i + 1] << 8) | out[i + 2];
    counts.set(k, (counts.get(k) || 0) + 1);
  }
  const top = Math.max(...counts.values()) / (w * h);
  if (counts.size < 32) fail(`the screenshot has only ${counts.size} distinct colours: blank?`);
  if (top > 0.97) fail(`one colour covers ${(top * 100).toFixed(1)}% of the screenshot: blank?`);
  return {colours: counts.size, top};
}

// ---- the test ----

async function main() {
  const bin = process.env.QR_CHROMIUM || 'chromium';
  const outDir = env('QR_TEST_OUT');
  const base = await startServers();
  const auth = {Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json'};

  // one routed request, so the page has a decision and throughput to show
  const chat = await fetch(`${base}/v1/chat/completions`, {method: 'POST', headers: auth,
    body: JSON.stringify({model: MODEL, stream: false, messages: [{role: 'user', content: 'hi'}]})});
  if (chat.status !== 200) fail(`the chat request answered ${chat.status}: ${await chat.text()}`);

  const cdp = new Cdp(bin);
  const {targetInfos} = await cdp.send('Target.getTargets');
  const page = targetInfos.find((t) => t.type === 'page');
  if (!page) fail('chromium has no page target');
  const {sessionId: sid} = await cdp.send('Target.attachToTarget', {targetId: page.targetId, flatten: true});
  await cdp.send('Page.enable', {}, sid);
  await cdp.send('Runtime.enable', {}, sid);
  await cdp.send('Emulation.setDeviceMetricsOverride', {width: WIDTH, height: HEIGHT,
    deviceScaleFactor: 1, mobile: false}, sid);
  await cdp.send('Page.navigate', {url: `${base}/`}, sid);

  // without a token: the shell loads (a browser's Accept gets HTML at /) but shows no data
  await waitFor('the token prompt', () => evaluate(cdp, sid,
    `!!document.getElementById('msg') && document.getElementById('msg').textContent.includes('token')`));
  const bare = await evaluate(cdp, sid, `document.querySelector('main').innerText`);
  if (bare.includes('ollama') || bare.includes(MODEL) || !bare.includes('enter the token'))
    fail(`the page shows data without a token:\n${bare}`);

  // type the token in: the tables fill
  await evaluate(cdp, sid, `document.getElementById('token').value = ${JSON.stringify(TOKEN)};
    document.getElementById('save').click(); true`);
  const filled = await waitFor('the tables to fill', () => evaluate(cdp, sid, `(() => {
    const q = (s) => document.querySelector(s);
    const b = q('#backends tr[data-backend="ollama"]');
    const m = [...document.querySelectorAll('#models tbody tr')].find((r) => r.dataset.model === ${JSON.stringify(MODEL)});
    const d = [...document.querySelectorAll('#decisions tbody tr')].find((r) => r.dataset.outcome === 'routed');
    return b && m && d && document.body.dataset.loaded === '1' ?
      {backend: b.innerText, model: m.innerText, decision: d.innerText,
       token: sessionStorage.getItem('qr_status_token')} : null;
  })()`));
  if (!/ready/.test(filled.backend)) fail(`the backend row shows no health: ${filled.backend}`);
  if (!filled.decision.includes('/v1/chat/completions') || !filled.decision.includes(MODEL) ||
      !filled.decision.includes("backend 'ollama'"))
    fail(`the decision row lacks route, model or reason: ${filled.decision}`);
  if (filled.token !== TOKEN) fail('the token is not kept in sessionStorage');

  const shot = await cdp.send('Page.captureScreenshot', {format: 'png', captureBeyondViewport: false}, sid);
  const png = Buffer.from(shot.data, 'base64');
  fs.mkdirSync(outDir, {recursive: true});
  const file = path.join(outDir, 'status_page.png');
  fs.writeFileSync(file, png);
  const {colours, top} = checkPng(png);
  cdp.close();
  console.log(`status_page: ok: ${file} ${WIDTH}x${HEIGHT}, ${colours} colours, ` +
    `most common ${(top * 100).toFixed(1)}%`);
  console.log(`backend row: ${filled.backend.replace(/\s+/g, ' ')}`);
  console.log(`model row: ${filled.model.replace(/\s+/g, ' ').slice(0, 200)}`);
  console.log(`decision row: ${filled.decision.replace(/\s+/g, ' ')}`);
}

main().then(() => {
  clearTimeout(timer);
  cleanup();
  process.exit(0);
}, (e) => fail(e.stack || String(e)));
