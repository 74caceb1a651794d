// ollama@0.6.4 and openai@7.59.0 (the public npm clients) against the real daemon with
// backend=llama.cpp: the daemon runs the real llama-server itself on generated GGUF models in a
// temporary models_dir: the scripted chat model and its draft (qr-gen-scripted, exact outputs in
// tests/fixtures/SCRIPT.md) and bert-embed-tiny (qr-gen-fixtures). One daemon for the whole file,
// llama_threads=1 (SCRIPT.md "Threads on a busy machine").
//
// Environment (set by CTest, see CMakeLists.txt), besides harness.mjs's QR_TEST_DAEMON:
//   QR_TEST_GEN_SCRIPTED  qr-gen-scripted (default: build/release/tests/fixtures/qr-gen-scripted)
//   QR_TEST_GEN_FIXTURES  qr-gen-fixtures (default: build/release/tests/fixtures/qr-gen-fixtures)
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, before, describe, it} from 'node:test';
import {fileURLToPath} from 'node:url';

import {Ollama} from 'ollama';
import OpenAI, {APIError, APIUserAbortError, NotFoundError} from 'openai';

import {Daemon, TOKEN, sleep, within} from './harness.mjs';
import {PERSON_SCHEMA, S, TOOLS} from './scripted.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const GEN_SCRIPTED = process.env.QR_TEST_GEN_SCRIPTED || path.join(ROOT, 'build/release/tests/fixtures/qr-gen-scripted');
const GEN_FIXTURES = process.env.QR_TEST_GEN_FIXTURES || path.join(ROOT, 'build/release/tests/fixtures/qr-gen-fixtures');

const T = {timeout: 30000};

const CHAT = 'scripted-chat';
const EMBED = 'bert-embed-tiny';


for (const [what, file] of [['QR_TEST_GEN_SCRIPTED', GEN_SCRIPTED], ['QR_TEST_GEN_FIXTURES', GEN_FIXTURES]]) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
  } catch {
    throw new Error(`${what}: ${file} is not an executable (build it, or set ${what})`);
  }
}

/** The daemon's direct children (the llama-server engines it spawned). */
function childrenOf(ppid) {
  const out = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === ppid) out.push(Number(e));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** The engine pid among the daemon's children whose model file (-m) ends in name. */
function engineFor(ppid, name) {
  for (const pid of childrenOf(ppid)) {
    try {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const m = argv.indexOf('-m');
      if (m >= 0 && argv[m + 1]?.endsWith(`/${name}`)) return pid;
    } catch {
      /* gone */
    }
  }
  return 0;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('npm clients -> daemon backend=llama.cpp (real llama-server, scripted model)', () => {
  let models, daemon;
  const engines = new Set(); // every engine pid seen, killed in after() if the daemon left one

  before(async () => {
    models = fs.mkdtempSync(path.join(os.tmpdir(), 'qr-npm-llmodels-'));
    execFileSync(GEN_SCRIPTED, [models], {timeout: 60000, stdio: 'pipe'});
    execFileSync(GEN_FIXTURES, [models, 'bert-embed-tiny.gguf'], {timeout: 60000, stdio: 'pipe'});
    for (const f of ['scripted.gguf', 'scripted-draft.gguf', 'bert-embed-tiny.gguf']) {
      assert.ok(fs.existsSync(path.join(models, f)), `generator did not write ${f}`);
    }
    daemon = await new Daemon('llama.cpp', null, {
      QUANTUM_RUNTIME_MODELS_DIR: models,
      QUANTUM_RUNTIME_LLAMA_THREADS: '1',
      QUANTUM_RUNTIME_LLAMA_CTX: '4096',
    }).start();
    const r = await fetch(`${daemon.url}/readyz`, {signal: AbortSignal.timeout(5000)});
    assert.equal(r.status, 200, `readyz: ${await r.text()}`);
  });

  // Remember the engines as they appear (the daemon reaps and restarts them itself).
  const noteEngines = () => {
    if (daemon?.proc?.pid) for (const p of childrenOf(daemon.proc.pid)) engines.add(p);
  };

  after(async () => {
    noteEngines();
    let problem = null;
    if (daemon) problem = await daemon.stop(); // SIGTERM, bounded; the daemon stops its engines
    // an engine the daemon left behind is a bug: kill it (only pids this daemon spawned)
    const left = [];
    for (const pid of engines) {
      if (alive(pid)) {
        left.push(pid);
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone meanwhile */
        }
      }
    }
    if (models) fs.rmSync(models, {recursive: true, force: true});
    if (!problem && daemon) {
      for (const d of [daemon.dir, ...(daemon.extraDirs ?? [])]) fs.rmSync(d, {recursive: true, force: true});
    }
    if (problem) throw new Error(problem);
    assert.deepEqual(left, [], 'engines still running after the daemon stopped');
  });

  describe('openai@7.59.0 -> /v1', () => {
    let client;
    const user = (text) => [{role: 'user', content: text}];
    const OFF = {reasoning_effort: 'none'}; // docs/API.md: `none` turns reasoning off

    before(() => {
      client = new OpenAI({baseURL: `${daemon.url}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 20000});
    });
    after(noteEngines);

    it('chat, not streamed, thinking off (reasoning_effort none): the exact greeting', T, async () => {
      const r = await client.chat.completions.create({model: CHAT, messages: user('hi'), ...OFF});
      noteEngines();
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.model, CHAT);
      assert.equal(r.choices[0].message.role, 'assistant');
      assert.equal(r.choices[0].message.content, S.greeting);
      assert.equal(r.choices[0].message.reasoning_content ?? '', '');
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.ok(r.usage.completion_tokens > 0);
    });

    it('chat, not streamed, thinking off via chat_template_kwargs', T, async () => {
      const r = await client.chat.completions.create({
        model: CHAT, messages: user('hi'), chat_template_kwargs: {enable_thinking: false},
      });
      assert.equal(r.choices[0].message.content, S.greeting);
    });

    it('chat, streamed: the content deltas joined are the greeting', T, async () => {
      const stream = await client.chat.completions.create({model: CHAT, messages: user('hi'), stream: true, ...OFF});
      let text = '', chunks = 0, finish = null;
      for await (const c of stream) {
        chunks++;
        text += c.choices[0]?.delta?.content ?? '';
        assert.equal(c.choices[0]?.delta?.reasoning_content ?? '', '');
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      assert.ok(chunks >= 2, `chunks: ${chunks}`);
      assert.equal(text, S.greeting);
      assert.equal(finish, 'stop');
    });

    it('thinking on: reasoning_content, then the content', T, async () => {
      const r = await client.chat.completions.create({model: CHAT, messages: user('hi')});
      assert.equal(r.choices[0].message.reasoning_content, S.greetReasoning);
      assert.equal(r.choices[0].message.content, S.greetContent);
      assert.equal(r.choices[0].finish_reason, 'stop');

      const stream = await client.chat.completions.create({model: CHAT, messages: user('hi'), stream: true});
      const seq = [];
      for await (const c of stream) {
        const d = c.choices[0]?.delta ?? {};
        if (d.reasoning_content) seq.push(['r', d.reasoning_content]);
        if (d.content) seq.push(['c', d.content]);
      }
      assert.equal(seq.filter(([k]) => k === 'r').map(([, v]) => v).join(''), S.greetReasoning);
      assert.equal(seq.filter(([k]) => k === 'c').map(([, v]) => v).join(''), S.greetContent);
      const lastR = seq.findLastIndex(([k]) => k === 'r');
      const firstC = seq.findIndex(([k]) => k === 'c');
      assert.ok(lastR < firstC, 'reasoning deltas come before content deltas');
    });

    it('reasoning budget: llama.cpp\'s thinking_budget_tokens passes through and cuts the reasoning', T, async () => {
      // an engine-specific extension field: the Runtime passes unknown fields to OpenAI-compatible
      // engines unchanged (docs/API.md); the engine forces </think> after 3 reasoning tokens
      const r = await client.chat.completions.create({model: CHAT, messages: user('hi'), thinking_budget_tokens: 3});
      assert.equal(r.choices[0].message.reasoning_content, 'Der Nutzer ');
      assert.equal(r.choices[0].message.content, S.greetContent);
      const z = await client.chat.completions.create({model: CHAT, messages: user('hi'), thinking_budget_tokens: 0});
      assert.ok(!z.choices[0].message.reasoning_content, JSON.stringify(z.choices[0].message));
      assert.equal(z.choices[0].message.content, S.greetContent);
    });

    it('tools: one call with an id and the script arguments (every JSON type)', T, async () => {
      const r = await client.chat.completions.create({model: CHAT, messages: user('Wetter?'), tools: TOOLS, ...OFF});
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      const calls = r.choices[0].message.tool_calls;
      assert.equal(calls?.length, 1, JSON.stringify(r.choices[0].message));
      assert.equal(calls[0].type, 'function');
      assert.equal(typeof calls[0].id, 'string');
      assert.ok(calls[0].id.length > 0);
      assert.equal(calls[0].function.name, 'get_weather');
      const args = JSON.parse(calls[0].function.arguments);
      assert.deepStrictEqual(args, S.weather);
      assert.deepEqual(Object.keys(args), Object.keys(S.weather), 'key order kept');
      assert.ok(!r.choices[0].message.content, `content: ${JSON.stringify(r.choices[0].message.content)}`);
    });

    it('tools, streamed: the call reassembles from the deltas', T, async () => {
      const stream = await client.chat.completions.create({
        model: CHAT, messages: user('Wetter?'), tools: TOOLS, stream: true, ...OFF,
      });
      const calls = [];
      let finish = null;
      for await (const c of stream) {
        for (const tc of c.choices[0]?.delta?.tool_calls ?? []) {
          const slot = (calls[tc.index] ??= {id: '', name: '', args: ''});
          if (tc.id) slot.id = tc.id;
          if (tc.function?.name) slot.name += tc.function.name;
          if (tc.function?.arguments) slot.args += tc.function.arguments;
        }
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(calls.length, 1, JSON.stringify(calls));
      assert.ok(calls[0].id.length > 0);
      assert.equal(calls[0].name, 'get_weather');
      assert.deepStrictEqual(JSON.parse(calls[0].args), S.weather);
      assert.equal(finish, 'tool_calls');
    });

    it('[[parallel]]: two calls with distinct ids', T, async () => {
      const r = await client.chat.completions.create({
        model: CHAT, messages: user('Wetter und Uhrzeit [[parallel]]'), tools: TOOLS, ...OFF,
      });
      const calls = r.choices[0].message.tool_calls;
      assert.equal(calls?.length, 2, JSON.stringify(r.choices[0].message));
      assert.equal(calls[0].function.name, 'get_weather');
      assert.deepStrictEqual(JSON.parse(calls[0].function.arguments), S.weather);
      assert.equal(calls[1].function.name, 'get_time');
      assert.deepStrictEqual(JSON.parse(calls[1].function.arguments), S.time);
      for (const c of calls) assert.ok(typeof c.id === 'string' && c.id.length > 0);
      assert.notEqual(calls[0].id, calls[1].id);
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
    });

    it('tool result turn: the exact answer', T, async () => {
      const r = await client.chat.completions.create({
        model: CHAT,
        tools: TOOLS,
        ...OFF,
        messages: [
          {role: 'user', content: 'Wetter?'},
          {
            role: 'assistant', content: '',
            tool_calls: [{id: 'call_1', type: 'function',
              function: {name: 'get_weather', arguments: JSON.stringify(S.weather)}}],
          },
          {role: 'tool', tool_call_id: 'call_1', content: '21 °C, sonnig'},
        ],
      });
      assert.equal(r.choices[0].message.content, S.final);
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.ok(!r.choices[0].message.tool_calls?.length);
    });

    it('response_format json_schema with [[json]]: the document', T, async () => {
      const r = await client.chat.completions.create({
        model: CHAT, messages: user('Person bitte [[json]]'), ...OFF,
        response_format: {type: 'json_schema', json_schema: {name: 'person', strict: true, schema: PERSON_SCHEMA}},
      });
      assert.deepStrictEqual(JSON.parse(r.choices[0].message.content), S.json);
      assert.equal(r.choices[0].finish_reason, 'stop');
    });

    it('embeddings on bert-embed-tiny: 64 dimensions', T, async () => {
      const r = await client.embeddings.create({model: EMBED, input: ['Hallo Welt', 'zweiter Text']});
      noteEngines();
      assert.equal(r.data.length, 2);
      for (const [i, d] of r.data.entries()) {
        assert.equal(d.index, i);
        assert.equal(d.embedding.length, 64);
        assert.ok(d.embedding.every((x) => typeof x === 'number' && Number.isFinite(x)));
      }
      assert.notDeepEqual(r.data[0].embedding, r.data[1].embedding);
    });

    it('abort a [[long]] stream with an AbortController; the next request still works', T, async () => {
      const from = daemon.logLines().length;
      const ac = new AbortController();
      const stream = await client.chat.completions.create(
        {model: CHAT, messages: user('[[long]]'), stream: true, max_tokens: 100000, ...OFF},
        {signal: ac.signal},
      );
      let text = '', chunks = 0, abortedAt = 0, caught = null, finish = null;
      const loop = (async () => {
        for await (const c of stream) {
          text += c.choices[0]?.delta?.content ?? '';
          finish = c.choices[0]?.finish_reason ?? finish;
          if (++chunks === 5 && !abortedAt) {
            abortedAt = Date.now();
            ac.abort();
          }
        }
      })();
      try {
        await within(10000, loop, 'iteration after abort');
      } catch (e) {
        caught = e;
      }
      assert.ok(abortedAt > 0, `never saw 5 chunks; got ${JSON.stringify(text)}`);
      // openai@7.59.0 ends the iteration quietly on a user abort (or throws APIUserAbortError)
      assert.ok(caught === null || caught instanceof APIUserAbortError || caught?.name === 'AbortError',
        `got ${caught?.constructor?.name}: ${caught?.message}`);
      assert.equal(ac.signal.aborted, true);
      assert.equal(finish, null, 'the aborted stream did not finish');
      assert.ok(chunks <= 6, `iteration went on after the abort: ${chunks} chunks`);
      assert.ok(Date.now() - abortedAt < 2000, `iteration ended ${Date.now() - abortedAt} ms after abort`);
      assert.ok(S.longPrefix.startsWith(text) || text.startsWith('Zähle: '), JSON.stringify(text));
      const gone = await daemon.waitLog((l) => /client went away/.test(l.msg ?? ''), from, 5000);
      assert.ok(gone, `no "client went away" log line after the abort; log tail:\n${daemon.log().slice(-3000)}`);
      // The slot is free again: with one slot (llama_parallel 1) the next request would otherwise wait
      // for the endless answer to fill the 4096-token context (about 20 s with one thread).
      const r = await within(5000, client.chat.completions.create({model: CHAT, messages: user('hi'), ...OFF}),
        'request after the abort (is the engine slot still busy?)');
      assert.equal(r.choices[0].message.content, S.greeting);
    });

    it('kill -9 of the engine mid-stream: an APIError naming engine_crashed within 1 s; the next request succeeds', T,
      async () => {
        noteEngines();
        const stream = await client.chat.completions.create(
          {model: CHAT, messages: user('[[long]]'), stream: true, max_tokens: 100000, ...OFF});
        let chunks = 0, killedAt = 0, caught = null, finish = null;
        const pid = engineFor(daemon.proc.pid, 'scripted.gguf');
        assert.ok(pid > 0, 'no engine process for scripted.gguf among the daemon\'s children');
        const loop = (async () => {
          for await (const c of stream) {
            finish = c.choices[0]?.finish_reason ?? finish;
            if (++chunks === 5 && !killedAt) {
              killedAt = Date.now();
              process.kill(pid, 'SIGKILL');
            }
          }
        })();
        try {
          await within(10000, loop, 'iteration after the kill');
        } catch (e) {
          caught = e;
        }
        const took = Date.now() - killedAt;
        assert.ok(killedAt > 0, 'never saw 5 chunks');
        assert.ok(caught instanceof APIError, `got ${caught?.constructor?.name}: ${caught?.message}`);
        assert.match(String(caught.message), /crashed/);
        assert.match(JSON.stringify(caught.error ?? {}), /engine_crashed/);
        assert.equal(finish, null, 'a crashed stream must not finish cleanly');
        assert.ok(took < 1000, `error ${took} ms after the kill`);
        // the restarted engine serves the next request (the crash backoff is waited in the queue)
        const r = await within(15000, client.chat.completions.create({model: CHAT, messages: user('hi'), ...OFF}),
          'request after the crash');
        assert.equal(r.choices[0].message.content, S.greeting);
        const again = engineFor(daemon.proc.pid, 'scripted.gguf');
        assert.ok(again > 0 && again !== pid, `engine pid ${again} (was ${pid})`);
        noteEngines();
      });

    it('an unknown model: 404 APIError (NotFoundError)', T, async () => {
      for (const stream of [false, true]) {
        await assert.rejects(client.chat.completions.create({model: 'no-such-model', messages: user('x'), stream}),
          (e) => {
            assert.ok(e instanceof APIError, `stream=${stream}: got ${e?.constructor?.name}: ${e?.message}`);
            assert.ok(e instanceof NotFoundError, `stream=${stream}: got ${e?.constructor?.name}`);
            assert.equal(e.status, 404);
            assert.equal(e.code, 'model_not_found');
            return true;
          });
      }
    });
  });

  describe('ollama@0.6.4 -> /api', () => {
    let client;
    const user = (text) => [{role: 'user', content: text}];
    const mk = () => new Ollama({host: daemon.url, headers: {Authorization: `Bearer ${TOKEN}`}});
    async function collect(stream) {
      const parts = [];
      for await (const p of stream) parts.push(p);
      return parts;
    }

    before(() => {
      client = mk();
    });
    after(noteEngines);

    it('chat, not streamed, think:false: the exact greeting', T, async () => {
      const r = await client.chat({model: CHAT, messages: user('hi'), think: false});
      assert.equal(r.model, CHAT);
      assert.equal(r.message.role, 'assistant');
      assert.equal(r.message.content, S.greeting);
      assert.ok(!r.message.thinking, `thinking: ${JSON.stringify(r.message.thinking)}`);
      assert.equal(r.done, true);
      assert.equal(r.done_reason, 'stop');
      assert.ok(r.eval_count > 0);
    });

    it('chat, streamed, think:false: the parts joined are the greeting', T, async () => {
      const parts = await collect(await client.chat({model: CHAT, messages: user('hi'), think: false, stream: true}));
      assert.ok(parts.length >= 2, JSON.stringify(parts));
      assert.equal(parts.map((p) => p.message.content).join(''), S.greeting);
      for (const p of parts.slice(0, -1)) assert.equal(p.done, false);
      assert.equal(parts.at(-1).done, true);
      assert.equal(parts.at(-1).done_reason, 'stop');
    });

    it('think:true: message.thinking, then the content (not streamed and streamed)', T, async () => {
      const r = await client.chat({model: CHAT, messages: user('hi'), think: true});
      assert.equal(r.message.thinking, S.greetReasoning);
      assert.equal(r.message.content, S.greetContent);
      const parts = await collect(await client.chat({model: CHAT, messages: user('hi'), think: true, stream: true}));
      assert.equal(parts.map((p) => p.message.thinking ?? '').join(''), S.greetReasoning);
      assert.equal(parts.map((p) => p.message.content).join(''), S.greetContent);
      const lastThinking = parts.findLastIndex((p) => p.message.thinking);
      const firstContent = parts.findIndex((p) => p.message.content);
      assert.ok(lastThinking < firstContent, 'thinking comes before content');
    });

    function checkWeather(call) {
      assert.equal(call.function.name, 'get_weather');
      const args = call.function.arguments;
      assert.equal(typeof args, 'object', 'arguments are an object, not a string');
      assert.deepStrictEqual(args, S.weather);
      assert.deepEqual(Object.keys(args), Object.keys(S.weather), 'argument key order kept');
    }

    it('tools: message.tool_calls with the script arguments as objects', T, async () => {
      const r = await client.chat({model: CHAT, messages: user('Wetter?'), tools: TOOLS, think: false});
      assert.equal(r.message.tool_calls?.length, 1, JSON.stringify(r.message));
      checkWeather(r.message.tool_calls[0]);
      assert.equal(r.message.content, '');
      assert.equal(r.done_reason, 'stop', 'Ollama has no tool_calls finish reason');
    });

    it('show(): capabilities judged with the engine evidence; the extra quantum_runtime member passes through', T, async () => {
      const r = await client.show({model: CHAT});
      assert.ok(r.capabilities.includes('completion'), JSON.stringify(r.capabilities));
      assert.ok(r.capabilities.includes('tools'), JSON.stringify(r.capabilities));
      assert.ok(r.model_info, 'model_info');
      assert.match(r.quantum_runtime?.evidence?.tools?.source ?? '', /^engine \/props \(/,
        JSON.stringify(r.quantum_runtime));
    });

    it('tools, streamed: the call arrives whole', T, async () => {
      const parts = await collect(await client.chat({
        model: CHAT, messages: user('Wetter?'), tools: TOOLS, think: false, stream: true,
      }));
      const calls = parts.flatMap((p) => p.message.tool_calls ?? []);
      assert.equal(calls.length, 1, JSON.stringify(parts));
      checkWeather(calls[0]);
      assert.equal(parts.at(-1).done, true);
    });

    it('tools: [[parallel]] gives two calls', T, async () => {
      const r = await client.chat({model: CHAT, messages: user('[[parallel]]'), tools: TOOLS, think: false});
      assert.equal(r.message.tool_calls?.length, 2, JSON.stringify(r.message));
      checkWeather(r.message.tool_calls[0]);
      assert.equal(r.message.tool_calls[1].function.name, 'get_time');
      assert.deepStrictEqual(r.message.tool_calls[1].function.arguments, S.time);
    });

    it('tool result turn: the exact answer', T, async () => {
      const r = await client.chat({
        model: CHAT, tools: TOOLS, think: false,
        messages: [
          {role: 'user', content: 'Wetter?'},
          {role: 'assistant', content: '', tool_calls: [{function: {name: 'get_weather', arguments: S.weather}}]},
          {role: 'tool', content: '21 °C, sonnig', tool_name: 'get_weather'},
        ],
      });
      assert.equal(r.message.content, S.final);
    });

    it('embed on bert-embed-tiny: 64 dimensions', T, async () => {
      const r = await client.embed({model: EMBED, input: ['Hallo Welt', 'zweiter Text']});
      noteEngines();
      assert.equal(r.embeddings.length, 2);
      for (const v of r.embeddings) {
        assert.equal(v.length, 64);
        assert.ok(v.every((x) => typeof x === 'number' && Number.isFinite(x)));
      }
    });

    it('generate with an empty prompt and chat with no messages load the model (done_reason "load")', T, async () => {
      await client.generate({model: CHAT, prompt: '', keep_alive: 0}); // start from unloaded
      const deadline = Date.now() + 5000;
      while ((await client.ps()).models.some((m) => m.name === CHAT) && Date.now() < deadline) await sleep(50);
      assert.ok(!(await client.ps()).models.some((m) => m.name === CHAT), 'still listed after the unload');
      const g = await client.generate({model: CHAT, prompt: ''});
      assert.equal(g.done, true);
      assert.equal(g.done_reason, 'load');
      assert.equal(g.response, '');
      const c = await client.chat({model: CHAT, messages: [], keep_alive: '7m'});
      assert.equal(c.done_reason, 'load');
      assert.deepEqual(c.message, {role: 'assistant', content: ''});
      const row = (await client.ps()).models.find((m) => m.name === CHAT);
      assert.ok(row, 'not listed by ps after the load');
      assert.equal(row.state, 'ready', 'answered "load" before the model was ready');
      const ahead = new Date(row.expires_at).getTime() - Date.now();
      assert.ok(ahead > 6 * 60000 && ahead <= 7 * 60000 + 1000, `expires_at ${row.expires_at}: keep_alive 7m`);
      await assert.rejects(client.generate({model: 'no-such-model', prompt: ''}), (e) => {
        assert.equal(e.status_code, 404);
        return true;
      });
      // an embedding model cannot be loaded for generation
      await assert.rejects(client.generate({model: EMBED, prompt: ''}), (e) => {
        assert.equal(e.status_code, 422, `${e?.name}: ${e?.message}`);
        return true;
      });
    });

    it('ps() lists the loaded models', T, async () => {
      const r = await client.ps();
      const names = r.models.map((m) => m.name);
      assert.ok(names.includes(CHAT), `ps: ${names}`);
      assert.ok(names.includes(EMBED), `ps: ${names}`);
      for (const m of r.models) {
        assert.equal(m.model, m.name);
        assert.ok(m.size > 0, JSON.stringify(m));
        assert.equal(typeof m.digest, 'string');
        assert.equal(typeof m.details, 'object');
        assert.ok(!Number.isNaN(new Date(m.expires_at).getTime()), `expires_at: ${m.expires_at}`);
      }
    });

    it('generate with keep_alive:0 and an empty prompt unloads; ps no longer lists it', T, async () => {
      const r = await client.generate({model: EMBED, prompt: '', keep_alive: 0});
      assert.equal(r.done, true);
      assert.equal(r.done_reason, 'unload');
      let names = null;
      const deadline = Date.now() + 5000;
      do {
        names = (await client.ps()).models.map((m) => m.name);
        if (!names.includes(EMBED)) break;
        await sleep(50);
      } while (Date.now() < deadline);
      assert.ok(!names.includes(EMBED), `still listed after unload: ${names}`);
      assert.ok(names.includes(CHAT), `the chat model is still loaded: ${names}`);
    });

    it('abort a [[long]] stream; the next request still works', T, async () => {
      const from = daemon.logLines().length;
      const c = mk(); // abort() on this client only
      const stream = await c.chat({
        model: CHAT, messages: user('[[long]]'), think: false, stream: true, options: {num_predict: 100000},
      });
      let text = '', parts = 0, abortedAt = 0;
      const loop = (async () => {
        for await (const p of stream) {
          text += p.message.content;
          if (++parts === 5 && !abortedAt) {
            abortedAt = Date.now();
            stream.abort();
          }
        }
      })();
      await assert.rejects(within(10000, loop, 'iteration after abort'), (e) => e?.name === 'AbortError');
      assert.ok(abortedAt > 0, `never saw 5 parts; got ${JSON.stringify(text)}`);
      assert.ok(Date.now() - abortedAt < 2000, `iteration ended ${Date.now() - abortedAt} ms after abort`);
      assert.ok(text.startsWith('Zähle: ') || S.longPrefix.startsWith(text), JSON.stringify(text));
      const gone = await daemon.waitLog((l) => /client went away/.test(l.msg ?? ''), from, 5000);
      assert.ok(gone, `no "client went away" log line after the abort; log tail:\n${daemon.log().slice(-3000)}`);
      // the slot is free again (see the openai abort test)
      const r = await within(5000, client.chat({model: CHAT, messages: user('hi'), think: false}),
        'request after the abort (is the engine slot still busy?)');
      assert.equal(r.message.content, S.greeting);
    });

    it('keep_alive "1s" on a request: ps shows the expiry, the model unloads, the next request reloads it', T,
      async () => {
        const t0 = Date.now();
        const r = await client.embed({model: EMBED, input: 'Grüße', keep_alive: '1s'});
        assert.equal(r.embeddings[0].length, 64);
        const first = engineFor(daemon.proc.pid, 'bert-embed-tiny.gguf');
        assert.ok(first > 0, 'no engine for bert-embed-tiny.gguf');
        const row = (await client.ps()).models.find((m) => m.name === EMBED);
        assert.ok(row, 'not listed by ps after the request');
        const exp = new Date(row.expires_at).getTime();
        assert.ok(exp >= t0 + 900 && exp <= Date.now() + 1100, `expires_at ${row.expires_at}`);
        let names = null;
        const deadline = Date.now() + 6000;
        do {
          names = (await client.ps()).models.map((m) => m.name);
          if (!names.includes(EMBED)) break;
          await sleep(50);
        } while (Date.now() < deadline);
        assert.ok(!names.includes(EMBED), `still listed: ${names}`);
        assert.ok(Date.now() - t0 >= 1000, 'unloaded before its keep_alive');
        assert.ok(await within(3000, (async () => {
          while (alive(first)) await sleep(20);
          return true;
        })(), 'engine exit after the idle unload'));
        const r2 = await client.embed({model: EMBED, input: 'Grüße'});
        assert.deepEqual(r2.embeddings, r.embeddings);
        const second = engineFor(daemon.proc.pid, 'bert-embed-tiny.gguf');
        assert.ok(second > 0 && second !== first, `reloaded engine pid ${second} (was ${first})`);
        noteEngines();
      });

    it('kill -9 of the engine mid-stream: the iteration throws naming the crash within 1 s', T, async () => {
      noteEngines();
      const stream = await client.chat({
        model: CHAT, messages: user('[[long]]'), think: false, stream: true, options: {num_predict: 100000},
      });
      const pid = engineFor(daemon.proc.pid, 'scripted.gguf');
      assert.ok(pid > 0, 'no engine process for scripted.gguf');
      let parts = 0, killedAt = 0, done = false;
      const loop = (async () => {
        for await (const p of stream) {
          done = done || p.done;
          if (++parts === 5 && !killedAt) {
            killedAt = Date.now();
            process.kill(pid, 'SIGKILL');
          }
        }
      })();
      await assert.rejects(within(10000, loop, 'iteration after the kill'), (e) => {
        assert.match(String(e?.message ?? e), /crashed/, `got ${e?.name}: ${e?.message}`);
        return true;
      });
      assert.ok(killedAt > 0, 'never saw 5 parts');
      assert.ok(Date.now() - killedAt < 1000, `error ${Date.now() - killedAt} ms after the kill`);
      assert.equal(done, false, 'a crashed stream must not end with done');
      const r = await within(15000, client.chat({model: CHAT, messages: user('hi'), think: false}), 'request after the crash');
      assert.equal(r.message.content, S.greeting);
      noteEngines();
    });

    it('unknown model: ResponseError 404 in Ollama shape', T, async () => {
      await assert.rejects(client.chat({model: 'no-such-model', messages: user('x')}), (e) => {
        assert.equal(e.name, 'ResponseError', `got ${e?.name}: ${e?.message}`);
        assert.equal(e.status_code, 404);
        assert.match(e.error, /no-such-model/);
        return true;
      });
    });
  });

  it('the daemon is still healthy after all of the above', T, async () => {
    const r = await fetch(`${daemon.url}/healthz`, {signal: AbortSignal.timeout(5000)});
    assert.equal(r.status, 200);
  });
});
