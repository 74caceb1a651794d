// Test harness for the npm client suites: starts the replay server (the scripted upstream) and
// the real daemon as child processes, finds their ports, stops them and checks that they exited
// cleanly, and reads what the upstream received.
//
// Environment (set by CTest, see CMakeLists.txt):
//   QR_TEST_DAEMON  the quantum-runtime executable (default: build/release/quantum-runtime)
//   QR_TEST_REPLAY  the qr-replay executable       (default: build/release/tests/qr-replay)
//   QR_TEST_CASES   tests/cases of the source tree (default: ../cases next to this file)
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');

export const DAEMON = process.env.QR_TEST_DAEMON || path.join(ROOT, 'build/release/quantum-runtime');
export const REPLAY = process.env.QR_TEST_REPLAY || path.join(ROOT, 'build/release/tests/qr-replay');
export const CASES = process.env.QR_TEST_CASES || path.join(ROOT, 'tests/cases');
export const TRANSCRIPTS = path.join(CASES, 'npm-replay');
export const TOKEN = 'npm-test-token-4f1c2b';
export const START_TIMEOUT_MS = 20000;
export const STOP_TIMEOUT_MS = 15000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const live = new Set();
function killAll() {
  for (const c of live) {
    try {
      c.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    killAll();
    process.exit(130);
  });
}

// The clients must be exactly the pinned versions (package.json): anything else means
// node_modules is stale or missing.
for (const [pkg, want] of Object.entries(JSON.parse(fs.readFileSync(path.join(HERE, 'package.json'), 'utf8')).dependencies)) {
  let got = null;
  try {
    got = JSON.parse(fs.readFileSync(path.join(HERE, 'node_modules', pkg, 'package.json'), 'utf8')).version;
  } catch {
    /* missing */
  }
  if (got !== want) {
    throw new Error(`tests/npm/node_modules has ${pkg}@${got ?? '(none)'}, package.json pins ${want}: run scripts/setup`);
  }
}

for (const [what, file] of [['QR_TEST_DAEMON', DAEMON], ['QR_TEST_REPLAY', REPLAY]]) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    throw new Error(`${what}: ${file} is not an executable (build it, or set ${what})`);
  }
}

class Child {
  constructor(tag, argv, env) {
    this.tag = tag;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `qr-npm-${tag}-`));
    this.logPath = path.join(this.dir, 'out.log');
    const fd = fs.openSync(this.logPath, 'w');
    this.proc = spawn(argv[0], argv.slice(1), {env, stdio: ['ignore', fd, fd]});
    fs.closeSync(fd);
    this.exit = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        live.delete(this.proc);
        resolve({code, signal});
      });
      this.proc.on('error', (err) => {
        live.delete(this.proc);
        resolve({code: null, signal: null, error: err});
      });
    });
    this.exited = null;
    this.exit.then((r) => (this.exited = r));
    live.add(this.proc);
  }

  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
    }
  }

  // Bounded wait for a port that `probe` extracts from a file; fails when the child dies first.
  async waitPort(probe) {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      const port = probe();
      if (port) return port;
      if (this.exited) {
        throw new Error(`${this.tag} exited early (${JSON.stringify(this.exited)}); log:\n${this.log()}`);
      }
      await sleep(20);
    }
    this.proc.kill('SIGKILL');
    throw new Error(`${this.tag}: no port within ${START_TIMEOUT_MS} ms; log:\n${this.log()}`);
  }

  // SIGTERM, bounded wait; returns a problem description or null when it exited 0 and its log
  // shows no sanitizer report.
  async stop() {
    if (this.exited) {
      // nobody here signalled it: it crashed, or something outside the suite stopped it
      return `${this.tag} had already exited before the end of the suite (${JSON.stringify(this.exited)}); log tail:\n${this.log().slice(-4000)}`;
    }
    this.proc.kill('SIGTERM');
    let timer;
    const r = await Promise.race([
      this.exit,
      new Promise((resolve) => (timer = setTimeout(() => resolve(null), STOP_TIMEOUT_MS))),
    ]);
    clearTimeout(timer);
    if (!r) {
      this.proc.kill('SIGKILL');
      await this.exit;
      return `${this.tag} did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM`;
    }
    const log = this.log();
    if (r.code !== 0) return `${this.tag} exited with ${JSON.stringify(r)}; log tail:\n${log.slice(-4000)}`;
    if (/ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:/.test(log)) {
      return `${this.tag} exited 0 but its log has a sanitizer report:\n${log.slice(-4000)}`;
    }
    return null;
  }
}

/** A free loopback port right now (another process may still take it before it is used). */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const {port} = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A plain llama-server this suite starts itself, NOT managed by the Runtime: an external
 * OpenAI-compatible engine (`backend=openai` fronts it). `args` are the engine's flags besides
 * --host/--port; the API key travels in LLAMA_API_KEY as the Runtime passes it. Ready once
 * /health answers 200.
 */
export class LlamaServer extends Child {
  constructor(bin, port, args, apiKey) {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('LLAMA_')) env[k] = v;
    env.LLAMA_API_KEY = apiKey;
    super('llama-server', [bin, ...args, '--host', '127.0.0.1', '--port', String(port)], env);
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
  }

  async start() {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (this.exited) throw new Error(`llama-server exited early (${JSON.stringify(this.exited)}); log:\n${this.log()}`);
      try {
        const r = await fetch(`${this.url}/health`, {signal: AbortSignal.timeout(1000)});
        if (r.status === 200) return this;
      } catch {
        /* not listening yet */
      }
      await sleep(20);
    }
    this.proc.kill('SIGKILL');
    throw new Error(`llama-server not healthy within ${START_TIMEOUT_MS} ms; log:\n${this.log()}`);
  }
}

/** The scripted upstream on an ephemeral loopback port, loaded with tests/cases/npm-replay. */
export class Replay extends Child {
  constructor() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-npm-replay-files-'));
    const portFile = path.join(dir, 'port');
    super('qr-replay', [REPLAY, '--listen', '127.0.0.1:0', '--port-file', portFile,
      '--log', path.join(dir, 'requests.jsonl'), TRANSCRIPTS], process.env);
    this.portFile = portFile;
    this.extraDirs = [dir];
  }

  async start() {
    this.port = await this.waitPort(() => {
      try {
        const n = parseInt(fs.readFileSync(this.portFile, 'utf8'), 10);
        return n > 0 && n < 65536 ? n : 0;
      } catch {
        return 0;
      }
    });
    this.url = `http://127.0.0.1:${this.port}`;
    return this;
  }

  /** Every request the upstream received, oldest first (see tests/replay/README.md). */
  async requests() {
    const r = await fetch(`${this.url}/__replay/requests`, {signal: AbortSignal.timeout(5000)});
    if (!r.ok) throw new Error(`/__replay/requests answered ${r.status}`);
    return r.json();
  }

  /** The requests whose body contains `needle` (a per-test nonce). */
  async requestsWith(needle) {
    return (await this.requests()).filter((q) => typeof q.body === 'string' && q.body.includes(needle));
  }
}

/**
 * The daemon with `backend` ("ollama" or "openai") pointed at `replay`, auth token TOKEN.
 * Port from its JSON "quantum-runtime listening" log line.
 */
export class Daemon extends Child {
  /** backend null: none set (a `backends` list in a --config file given in extraArgs). */
  constructor(backend, replay, extraEnv = {}, extraArgs = []) {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('QUANTUM_RUNTIME_')) env[k] = v;
    const state = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-npm-state-'));
    Object.assign(env, {
      QUANTUM_RUNTIME_LISTEN: '127.0.0.1:0',
      QUANTUM_RUNTIME_STATE_DIR: state,
      QUANTUM_RUNTIME_LOG_LEVEL: 'info',
      ...(backend ? {QUANTUM_RUNTIME_BACKEND: backend} : {}),
      QUANTUM_RUNTIME_AUTH_TOKEN: TOKEN,
      // the unused URL points at the discard port: nothing listens there in a sandbox
      QUANTUM_RUNTIME_OLLAMA_URL: backend === 'ollama' ? replay.url : 'http://127.0.0.1:9',
      QUANTUM_RUNTIME_OPENAI_URL: backend === 'openai' ? replay.url : 'http://127.0.0.1:9',
      ...extraEnv,
    });
    super(`quantum-runtime(${backend ?? 'configured'})`, [DAEMON, 'serve', ...extraArgs], env);
    this.backend = backend;
    this.extraDirs = [state];
  }

  async start() {
    this.port = await this.waitPort(() => {
      for (const ln of this.log().split('\n')) {
        if (!ln.includes('quantum-runtime listening')) continue;
        try {
          const o = JSON.parse(ln);
          if (o.port > 0) return o.port;
        } catch {
          const m = /"port":(\d+)/.exec(ln);
          if (m) return parseInt(m[1], 10);
        }
      }
      return 0;
    });
    this.url = `http://127.0.0.1:${this.port}`;
    return this;
  }

  /** JSON log lines (non-JSON lines are skipped). */
  logLines() {
    const out = [];
    for (const ln of this.log().split('\n')) {
      if (!ln.startsWith('{')) continue;
      try {
        out.push(JSON.parse(ln));
      } catch {
        /* not a log object */
      }
    }
    return out;
  }

  /** Bounded wait until `pred(line)` holds for a log line numbered >= `from`; returns it or null. */
  async waitLog(pred, from = 0, timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.logLines().slice(from).find(pred);
      if (hit || Date.now() > deadline) return hit || null;
      await sleep(25);
    }
  }
}

/** One replay + one daemon for `backend`; `stop()` checks both exit codes. */
export async function startStack(backend, extraEnv) {
  const replay = await new Replay().start();
  let daemon;
  try {
    daemon = await new Daemon(backend, replay, extraEnv).start();
  } catch (e) {
    await replay.stop();
    throw e;
  }
  return {
    replay,
    daemon,
    async stop() {
      const problems = [await daemon.stop(), await replay.stop()].filter(Boolean);
      if (problems.length) throw new Error(problems.join('\n\n')); // logs are kept for a look
      for (const c of [daemon, replay]) {
        for (const d of [c.dir, ...(c.extraDirs ?? [])]) fs.rmSync(d, {recursive: true, force: true});
      }
    },
  };
}

/** A unique nonce for a test: lets the test find its own upstream request in the replay log. */
let nonceSeq = 0;
export function nonce(tag) {
  return `${tag}-${process.pid}-${++nonceSeq}`;
}

/** Reject when `promise` takes longer than `ms`. */
export async function within(ms, promise, what = 'operation') {
  let timer;
  try {
    return await Promise.race([
      promise,
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

// The replay transcripts' fixed content (tests/cases/npm-replay).
export const FIX = {
  model: 'npm-model',
  embedModel: 'npm-embed',
  text: 'Grüße ß 😀 – fertig.',
  textParts: ['Grü', 'ße ', 'ß ', '😀', ' – fertig.'],
  thinking: 'Der Nutzer grüßt. Ich antworte kurz.',
  answer: 'Die Antwort ist 4. Grüße ß 😀',
  weatherArgs: {
    city: 'München', street: 'Königstraße 1', days: 3, temperature: -4.5, detailed: true, metric: false,
    tags: ['Größe', 'Übermaß', 'ß'], location: {lat: 48.137, lon: 11.575, country: 'DE'}, note: null,
  },
  timeArgs: {timezone: 'Europe/Berlin', format: '24h'},
  openaiIds: ['Qx7LmN2pR4sT6vW8yZ0bC3dF5gH9jK1a', 'Hb5Tz8Kq2Wm4Xr6Pn0Lc3Vd7Fs9Gj1Ye'],
  ollamaIds: ['call_k3x9q2ab', 'call_p4r7t1zz'],
  embeddings: [[0.5, -0.25, 0.125, 0.1], [1.5, -2, 0.0625, -0.3]],
  usage: {prompt_tokens: 12, completion_tokens: 7, total_tokens: 19},
};

export const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: {
        type: 'object',
        required: ['city'],
        properties: {
          city: {type: 'string'}, street: {type: 'string'}, days: {type: 'integer'}, temperature: {type: 'number'},
          detailed: {type: 'boolean'}, metric: {type: 'boolean'}, tags: {type: 'array', items: {type: 'string'}},
          location: {type: 'object'}, note: {type: ['string', 'null']},
        },
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'Current time in a zone',
      parameters: {type: 'object', properties: {timezone: {type: 'string'}, format: {type: 'string'}}},
    },
  },
];
