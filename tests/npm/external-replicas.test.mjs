// openai@7.59.0 and ollama@0.6.4 against the daemon with ONE configured backend of two replicas
// (a `backends` entry with two `urls`), each a REAL llama-server this suite starts itself as a
// plain external OpenAI-compatible engine on the scripted model (tests/fixtures/SCRIPT.md).
// Requests are balanced over both; one replica is killed with -9 while it streams: that stream,
// and only that one, ends with an error; every later request is served by the other replica
// under the same model name (retried there when it first picked the dead one, before any byte
// reached the client); the dead replica is ejected after its failures and re-admitted by the
// health probe once it serves again on its address.
//
// Environment (CTest): QR_TEST_DAEMON (harness.mjs), QR_TEST_GEN_SCRIPTED, QR_TEST_LLAMA_SERVER.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, before, describe, it} from 'node:test';
import {fileURLToPath} from 'node:url';

import {Ollama} from 'ollama';
import OpenAI, {APIError} from 'openai';

import {Daemon, LlamaServer, TOKEN, freePort, within} from './harness.mjs';
import {S} from './scripted.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const GEN_SCRIPTED = process.env.QR_TEST_GEN_SCRIPTED || path.join(ROOT, 'build/release/tests/fixtures/qr-gen-scripted');
const ENGINE = process.env.QR_TEST_LLAMA_SERVER || path.join(ROOT, '.deps/llama/bin/llama-server');
const T = {timeout: 40000};
const MODEL = 'scripted-pool'; // both engines' alias (-a): the one name clients use
const ENGINE_KEY = 'pool-key-91c7e2';
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

for (const [what, file] of [['QR_TEST_GEN_SCRIPTED', GEN_SCRIPTED], ['QR_TEST_LLAMA_SERVER', ENGINE]]) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    throw new Error(`${what}: ${file} is not an executable (build it / run scripts/setup, or set ${what})`);
  }
}

describe('npm clients -> daemon -> one backend with two real llama-server replicas', () => {
  let models, dir, engines = [], daemon, openai, ollama;
  const user = (text) => [{role: 'user', content: text}];
  const OFF = {reasoning_effort: 'none'};
  const engineArgs = () => ['-m', path.join(models, 'scripted.gguf'), '-a', MODEL, '-c', '4096', '-np', '2',
    '-t', '1', '-tb', '1', '--no-webui', '--jinja', '--reasoning-format', 'deepseek'];

  /** The backend's replicas as /v1/backends shows them, by URL. */
  const replicas = async () => {
    const r = await fetch(`${daemon.url}/v1/backends`, {headers: {Authorization: `Bearer ${TOKEN}`}});
    assert.equal(r.status, 200);
    const b = (await r.json()).backends.find((x) => x.id === 'pool');
    assert.ok(b, 'backend pool listed');
    return Object.fromEntries(b.replicas.map((x) => [x.url, x]));
  };

  before(async () => {
    models = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-npm-poolmodels-'));
    execFileSync(GEN_SCRIPTED, [models], {timeout: 60000, stdio: 'pipe'});
    for (let i = 0; i < 2; i++)
      engines.push(await new LlamaServer(ENGINE, await freePort(), engineArgs(), ENGINE_KEY).start());
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-npm-poolcfg-'));
    const cfg = path.join(dir, 'config.json');
    fs.writeFileSync(cfg, JSON.stringify({backends: [{
      id: 'pool', kind: 'openai', urls: engines.map((e) => e.url), dialect: 'llama-server',
      api_key_env: 'QR_TEST_POOL_KEY', reasoning_field: 'reasoning_content',
    }]}));
    daemon = await new Daemon(null, null, {QR_TEST_POOL_KEY: ENGINE_KEY}, ['--config', cfg]).start();
    openai = new OpenAI({baseURL: `${daemon.url}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 20000});
    ollama = new Ollama({host: daemon.url, headers: {Authorization: `Bearer ${TOKEN}`}});
    const r = await within(10000, (async () => {
      for (;;) {
        const x = await fetch(`${daemon.url}/readyz`, {signal: AbortSignal.timeout(5000)});
        if (x.status === 200) return x;
        await sleep(50);
      }
    })(), 'readyz');
    assert.equal(r.status, 200);
  });

  after(async () => {
    const problems = [];
    if (daemon) problems.push(await daemon.stop());
    for (const e of engines) {
      if (!e.exited) {
        e.proc.kill('SIGKILL');
        await e.exit;
      }
    }
    if (models) fs.rmSync(models, {recursive: true, force: true});
    if (dir) fs.rmSync(dir, {recursive: true, force: true});
    const p = problems.filter(Boolean);
    if (!p.length && daemon) {
      for (const d of [daemon.dir, ...(daemon.extraDirs ?? []), ...engines.map((e) => e.dir)]) if (d) fs.rmSync(d, {recursive: true, force: true});
    }
    if (p.length) throw new Error(p.join('\n'));
  });

  it('requests are balanced over both replicas under one model name and one backend id', T, async () => {
    for (let i = 0; i < 4; i++) {
      const r = await fetch(`${daemon.url}/v1/chat/completions`, {
        method: 'POST',
        headers: {Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json'},
        body: JSON.stringify({model: MODEL, messages: user('hi'), ...OFF}),
      });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('x-quantum-backend'), 'pool');
      const j = await r.json();
      assert.equal(j.model, MODEL);
      assert.equal(j.choices[0].message.content, S.greeting);
    }
    const reps = await replicas();
    for (const e of engines) {
      assert.equal(reps[e.url].state, 'admitted');
      assert.equal(reps[e.url].requests, 2, JSON.stringify(reps));
      assert.equal(reps[e.url].outstanding, 0);
    }
    const o = await ollama.chat({model: MODEL, messages: user('hi'), think: false});
    assert.equal(o.message.content, S.greeting);
  });

  it('kill -9 of the replica that streams: that stream errors; later requests fail over, same model', T, async () => {
    const stream = await openai.chat.completions.create(
      {model: MODEL, messages: user('[[long]]'), stream: true, max_tokens: 100000, ...OFF});
    let chunks = 0, killedAt = 0, caught = null, finish = null, victim = null;
    const loop = (async () => {
      for await (const c of stream) {
        finish = c.choices[0]?.finish_reason ?? finish;
        if (++chunks === 5 && !killedAt) {
          const reps = await replicas();
          victim = engines.find((e) => reps[e.url].outstanding === 1);
          assert.ok(victim, `no replica with the stream: ${JSON.stringify(reps)}`);
          killedAt = Date.now();
          victim.proc.kill('SIGKILL');
        }
      }
    })();
    try {
      await within(10000, loop, 'iteration after the kill');
    } catch (e) {
      caught = e;
    }
    assert.ok(killedAt > 0, 'never saw 5 chunks');
    assert.ok(caught instanceof APIError, `got ${caught?.constructor?.name}: ${caught?.message}`);
    assert.equal(finish, null, 'a broken stream must not finish cleanly');
    assert.ok(Date.now() - killedAt < 1000, `error ${Date.now() - killedAt} ms after the kill`);
    await victim.exit;
    const alive = engines.find((e) => e !== victim);
    // every later request succeeds on the live replica, under the same name, from both clients;
    // those that picked the dead replica first were retried before any byte reached the client
    for (let i = 0; i < 6; i++) {
      const r = await openai.chat.completions.create({model: MODEL, messages: user('hi'), ...OFF});
      assert.equal(r.model, MODEL);
      assert.equal(r.choices[0].message.content, S.greeting);
      const s = await openai.chat.completions.create({model: MODEL, messages: user('hi'), stream: true, ...OFF});
      let text = '';
      for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
      assert.equal(text, S.greeting);
    }
    const o = await ollama.chat({model: MODEL, messages: user('hi'), think: false});
    assert.equal(o.message.content, S.greeting);
    const reps = await replicas();
    assert.equal(reps[victim.url].state, 'ejected', JSON.stringify(reps));
    assert.ok(reps[victim.url].failures >= 3, JSON.stringify(reps));
    assert.ok(reps[victim.url].last_error.length > 0);
    assert.equal(reps[alive.url].state, 'admitted');
    assert.equal(reps[alive.url].failures, 0, JSON.stringify(reps));
  });

  it('the ejected replica is re-admitted by the probe once it serves again, and takes requests', T, async () => {
    let reps = await replicas();
    const deadIdx = engines.findIndex((e) => reps[e.url].state === 'ejected');
    assert.ok(deadIdx >= 0);
    const old = engines[deadIdx];
    engines[deadIdx] = await new LlamaServer(ENGINE, old.port, engineArgs(), ENGINE_KEY).start();
    const url = engines[deadIdx].url;
    const deadline = Date.now() + 20000;
    for (;;) {
      reps = await replicas();
      if (reps[url].state === 'admitted') break;
      assert.ok(Date.now() < deadline, `not re-admitted: ${JSON.stringify(reps[url])}`);
      await sleep(100);
    }
    assert.ok(reps[url].readmissions >= 1);
    const before = reps[url].requests;
    for (let i = 0; i < 4; i++) {
      const r = await openai.chat.completions.create({model: MODEL, messages: user('hi'), ...OFF});
      assert.equal(r.choices[0].message.content, S.greeting);
    }
    reps = await replicas();
    assert.ok(reps[url].requests > before, JSON.stringify(reps));
  });
});
