// openai@7.59.0 and ollama@0.6.4 against the daemon with backend=openai fronting a REAL
// llama-server that this suite starts itself as a plain external OpenAI-compatible engine (not
// managed by the Runtime), on the scripted model (tests/fixtures/SCRIPT.md): the generic adapter's
// llama-server dialect with a real engine, not a replay. The engine's API key is the backend's
// (openai_api_key), never the client's token. Last, a kill -9 of the engine mid-stream: the
// stream ends with an error within a second (one engine, no replica to fail over to), the daemon
// stays healthy and the next request is a clean 502 in each client's shape.
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
import {PERSON_SCHEMA, S, TOOLS} from './scripted.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const GEN_SCRIPTED = process.env.QR_TEST_GEN_SCRIPTED || path.join(ROOT, 'build/release/tests/fixtures/qr-gen-scripted');
const ENGINE = process.env.QR_TEST_LLAMA_SERVER || path.join(ROOT, '.deps/llama/bin/llama-server');
const T = {timeout: 30000};
const MODEL = 'scripted-external'; // the engine's alias (-a): what its /v1/models lists
const ENGINE_KEY = 'engine-key-5d2e81';

for (const [what, file] of [['QR_TEST_GEN_SCRIPTED', GEN_SCRIPTED], ['QR_TEST_LLAMA_SERVER', ENGINE]]) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    throw new Error(`${what}: ${file} is not an executable (build it / run scripts/setup, or set ${what})`);
  }
}

describe('npm clients -> daemon backend=openai -> a real external llama-server', () => {
  let models, engine, daemon, openai, ollama;
  const user = (text) => [{role: 'user', content: text}];
  const OFF = {reasoning_effort: 'none'};

  before(async () => {
    models = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-npm-extmodels-'));
    execFileSync(GEN_SCRIPTED, [models], {timeout: 60000, stdio: 'pipe'});
    const args = ['-m', path.join(models, 'scripted.gguf'), '-a', MODEL, '-c', '4096', '-np', '1',
      '-t', '1', '-tb', '1', '--no-webui', '--jinja', '--reasoning-format', 'deepseek'];
    engine = await new LlamaServer(ENGINE, await freePort(), args, ENGINE_KEY).start();
    daemon = await new Daemon('openai', engine, {
      QUANTUM_RUNTIME_OPENAI_API_KEY: ENGINE_KEY,
      QUANTUM_RUNTIME_OPENAI_REASONING_FIELD: 'reasoning_content',
    }).start();
    openai = new OpenAI({baseURL: `${daemon.url}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 20000});
    ollama = new Ollama({host: daemon.url, headers: {Authorization: `Bearer ${TOKEN}`}});
    const r = await within(10000, (async () => {
      for (;;) {
        const x = await fetch(`${daemon.url}/readyz`, {signal: AbortSignal.timeout(5000)});
        if (x.status === 200) return x;
        await new Promise((res) => setTimeout(res, 50));
      }
    })(), 'readyz');
    assert.equal(r.status, 200);
  });

  after(async () => {
    const problems = [];
    if (daemon) problems.push(await daemon.stop());
    if (engine && !engine.exited) {
      engine.proc.kill('SIGKILL'); // killed by the last test already, normally
      await engine.exit;
    }
    if (models) fs.rmSync(models, {recursive: true, force: true});
    const p = problems.filter(Boolean);
    if (!p.length && daemon) {
      for (const d of [daemon.dir, ...(daemon.extraDirs ?? []), engine?.dir]) if (d) fs.rmSync(d, {recursive: true, force: true});
    }
    if (p.length) throw new Error(p.join('\n'));
  });

  it('the engine\'s model is listed, and the engine refuses the client\'s token (the backend key is used)', T, async () => {
    const list = await openai.models.list();
    assert.ok(list.data.some((m) => m.id === MODEL), JSON.stringify(list.data.map((m) => m.id)));
    const direct = await fetch(`${engine.url}/v1/models`, {headers: {Authorization: `Bearer ${TOKEN}`}});
    assert.equal(direct.status, 401);
  });

  it('openai: chat not streamed and streamed, thinking off: the exact greeting', T, async () => {
    const r = await openai.chat.completions.create({model: MODEL, messages: user('hi'), ...OFF});
    assert.equal(r.choices[0].message.content, S.greeting);
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.ok(r.usage.completion_tokens > 0);
    const stream = await openai.chat.completions.create({model: MODEL, messages: user('hi'), stream: true, ...OFF});
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    assert.equal(text, S.greeting);
  });

  it('openai: thinking on: reasoning_content, then the content', T, async () => {
    const r = await openai.chat.completions.create({model: MODEL, messages: user('hi')});
    assert.equal(r.choices[0].message.reasoning_content, S.greetReasoning);
    assert.equal(r.choices[0].message.content, S.greetContent);
  });

  it('openai: tools: one call with an id and every JSON type; [[parallel]] gives two ids', T, async () => {
    const r = await openai.chat.completions.create({model: MODEL, messages: user('Wetter?'), tools: TOOLS, ...OFF});
    const calls = r.choices[0].message.tool_calls;
    assert.equal(calls.length, 1);
    assert.ok(calls[0].id.length > 0);
    assert.equal(calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(calls[0].function.arguments), S.weather);
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const p = await openai.chat.completions.create({model: MODEL, messages: user('[[parallel]]'), tools: TOOLS, ...OFF});
    const pc = p.choices[0].message.tool_calls;
    assert.equal(pc.length, 2);
    assert.notEqual(pc[0].id, pc[1].id);
    assert.deepEqual(pc.map((c) => c.function.name), ['get_weather', 'get_time']);
    assert.deepEqual(JSON.parse(pc[1].function.arguments), S.time);
  });

  it('openai: response_format json_schema with [[json]]: the document', T, async () => {
    const r = await openai.chat.completions.create({
      model: MODEL, messages: user('[[json]]'), ...OFF,
      response_format: {type: 'json_schema', json_schema: {name: 'person', schema: PERSON_SCHEMA, strict: true}},
    });
    assert.deepEqual(JSON.parse(r.choices[0].message.content), S.json);
  });

  it('ollama: chat think:false and tools, translated to the engine\'s OpenAI API', T, async () => {
    const r = await ollama.chat({model: MODEL, messages: user('hi'), think: false});
    assert.equal(r.message.content, S.greeting);
    assert.equal(r.done_reason, 'stop');
    const t = await ollama.chat({model: MODEL, messages: user('Wetter?'), tools: TOOLS, think: false});
    assert.equal(t.message.tool_calls.length, 1);
    assert.deepEqual(t.message.tool_calls[0].function.arguments, S.weather);
  });

  it('kill -9 of the engine mid-stream: an error within 1 s, then a clean 502 in each client\'s shape', T, async () => {
    const stream = await openai.chat.completions.create(
      {model: MODEL, messages: user('[[long]]'), stream: true, max_tokens: 100000, ...OFF});
    let chunks = 0, killedAt = 0, caught = null, finish = null;
    const loop = (async () => {
      for await (const c of stream) {
        finish = c.choices[0]?.finish_reason ?? finish;
        if (++chunks === 5 && !killedAt) {
          killedAt = Date.now();
          engine.proc.kill('SIGKILL');
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
    await engine.exit;
    const h = await fetch(`${daemon.url}/healthz`, {signal: AbortSignal.timeout(5000)});
    assert.equal(h.status, 200);
    await assert.rejects(openai.chat.completions.create({model: MODEL, messages: user('hi'), ...OFF}), (e) => {
      assert.ok(e instanceof APIError, `${e?.constructor?.name}: ${e?.message}`);
      assert.equal(e.status, 502);
      return true;
    });
    await assert.rejects(ollama.chat({model: MODEL, messages: user('hi'), think: false}), (e) => {
      assert.equal(e.status_code, 502, `${e?.name}: ${e?.message}`);
      return true;
    });
  });
});
