// ollama@0.6.4 (the public npm client) against the real daemon's /api routes, once per backend:
// backend=ollama (passed through byte for byte to the replay server's /api/*) and backend=openai
// (translated to an OpenAI-compatible engine, llama-server style, on the replay server).
import assert from 'node:assert/strict';
import {after, before, describe, it} from 'node:test';

import {Ollama} from 'ollama';

import {FIX, TOKEN, TOOLS, nonce, sleep, startStack, within} from './harness.mjs';

const T = {timeout: 30000};

for (const backend of ['ollama', 'openai']) {
  describe(`ollama@0.6.4 -> /api -> backend=${backend}`, () => {
    let stack, client;
    const passthrough = backend === 'ollama';
    const upstreamChatPath = passthrough ? '/api/chat' : '/v1/chat/completions';
    const toolIds = passthrough ? FIX.ollamaIds : FIX.openaiIds;

    const mk = (token = TOKEN) =>
      new Ollama({host: stack.daemon.url, headers: {Authorization: `Bearer ${token}`}});
    const user = (text) => [{role: 'user', content: text}];

    async function upstream(n, count = 1) {
      const reqs = await stack.replay.requestsWith(n);
      assert.equal(reqs.length, count, `upstream requests carrying ${n}: ${JSON.stringify(reqs, null, 1)}`);
      for (const r of reqs) {
        for (const [name, value] of r.headers) {
          assert.ok(!value.includes(TOKEN), `client token leaked upstream in header ${name}`);
        }
      }
      return reqs.map((r) => ({...r, json: JSON.parse(r.body)}));
    }

    async function collect(stream) {
      const parts = [];
      for await (const p of stream) parts.push(p);
      return parts;
    }

    before(async () => {
      stack = await startStack(backend);
      client = mk();
    });
    after(async () => {
      await stack?.stop(); // throws when the daemon or replay did not exit 0 on SIGTERM
    });

    it('chat, not streamed', T, async () => {
      const n = nonce('plain-whole-please');
      const r = await client.chat({model: FIX.model, messages: user(n)});
      assert.equal(r.model, FIX.model);
      assert.equal(r.message.role, 'assistant');
      assert.equal(r.message.content, FIX.text);
      assert.equal(r.done, true);
      assert.equal(r.done_reason, 'stop');
      assert.equal(r.prompt_eval_count, FIX.usage.prompt_tokens);
      assert.equal(r.eval_count, FIX.usage.completion_tokens);
      assert.equal(typeof r.created_at, 'string');
      const [up] = await upstream(n);
      assert.equal(up.path, upstreamChatPath);
      assert.equal(up.json.stream, false);
      assert.equal(up.json.model, FIX.model);
      if (passthrough) {
        // the canonical path to Ollama: the object ollama-js sent; "think" is stated explicitly
        // once the model's /api/show capabilities are known (this replay has none to offer)
        const {think, ...rest} = up.json;
        assert.deepStrictEqual(rest, {model: FIX.model, messages: user(n), stream: false});
        assert.ok(think === undefined || typeof think === 'boolean', `think: ${think}`);
      }
    });

    it('chat, streamed: parts, UTF-8 text, final done line', T, async () => {
      const n = nonce('plain-stream-please');
      const parts = await collect(await client.chat({model: FIX.model, messages: user(n), stream: true}));
      assert.ok(parts.length >= 2, JSON.stringify(parts));
      assert.equal(parts.map((p) => p.message.content).join(''), FIX.text);
      for (const p of parts) assert.equal(p.message.role, 'assistant');
      for (const p of parts.slice(0, -1)) assert.equal(p.done, false);
      const last = parts.at(-1);
      assert.equal(last.done, true);
      assert.equal(last.done_reason, 'stop');
      assert.equal(last.prompt_eval_count, FIX.usage.prompt_tokens);
      assert.equal(last.eval_count, FIX.usage.completion_tokens);
      const [up] = await upstream(n);
      assert.equal(up.json.stream, true);
      if (!passthrough) assert.equal(up.json.stream_options?.include_usage, true);
    });

    it('thinking, not streamed: message.thinking with think:true', T, async () => {
      const n = nonce('think-whole-please');
      const r = await client.chat({model: FIX.model, messages: user(n), think: true});
      assert.equal(r.message.thinking, FIX.thinking);
      assert.equal(r.message.content, FIX.answer);
      const [up] = await upstream(n);
      if (passthrough) assert.equal(up.json.think, true);
    });

    it('thinking, streamed: thinking parts before content parts', T, async () => {
      const n = nonce('think-stream-please');
      const parts = await collect(await client.chat({model: FIX.model, messages: user(n), think: true, stream: true}));
      assert.equal(parts.map((p) => p.message.thinking ?? '').join(''), FIX.thinking);
      assert.equal(parts.map((p) => p.message.content).join(''), FIX.answer);
      const firstContent = parts.findIndex((p) => p.message.content);
      const lastThinking = parts.findLastIndex((p) => p.message.thinking);
      assert.ok(lastThinking < firstContent, 'thinking comes before content');
      assert.equal(parts.at(-1).done, true);
    });

    function checkWeather(call, id) {
      assert.equal(call.function.name, 'get_weather');
      const args = call.function.arguments;
      assert.equal(typeof args, 'object', 'arguments are an object, not a string');
      assert.deepStrictEqual(args, FIX.weatherArgs);
      assert.deepEqual(Object.keys(args), Object.keys(FIX.weatherArgs), 'argument key order kept');
      assert.equal(typeof args.days, 'number');
      assert.equal(Number.isInteger(args.days), true);
      assert.equal(args.temperature, -4.5);
      assert.equal(args.note, null);
      assert.equal(call.id, id, 'the upstream tool-call id is kept');
    }

    it('tools, not streamed: arguments as an object with every JSON type', T, async () => {
      const n = nonce('tools-whole-please');
      const r = await client.chat({model: FIX.model, messages: user(n), tools: TOOLS});
      assert.equal(r.message.content, '');
      assert.equal(r.message.tool_calls.length, 1);
      checkWeather(r.message.tool_calls[0], toolIds[0]);
      assert.equal(r.done_reason, 'stop', 'Ollama has no tool_calls finish reason');
      const [up] = await upstream(n);
      assert.equal(up.json.tools?.[0]?.function?.name, 'get_weather');
      assert.deepEqual(up.json.tools?.[0]?.function?.parameters, TOOLS[0].function.parameters);
    });

    it('tools, streamed: the call arrives whole', T, async () => {
      const n = nonce('tools-stream-please');
      const parts = await collect(await client.chat({model: FIX.model, messages: user(n), tools: TOOLS, stream: true}));
      const calls = parts.flatMap((p) => p.message.tool_calls ?? []);
      assert.equal(calls.length, 1, JSON.stringify(parts));
      checkWeather(calls[0], toolIds[0]);
      assert.equal(parts.at(-1).done, true);
      assert.equal(parts.at(-1).done_reason, 'stop');
    });

    it('tools: two parallel calls, not streamed and streamed', T, async () => {
      for (const stream of [false, true]) {
        const n = nonce(stream ? 'parallel-stream-please' : 'parallel-whole-please');
        const r = await client.chat({model: FIX.model, messages: user(n), tools: TOOLS, stream});
        const calls = stream ? (await collect(r)).flatMap((p) => p.message.tool_calls ?? []) : r.message.tool_calls;
        assert.equal(calls.length, 2, `stream=${stream}: ${JSON.stringify(calls)}`);
        checkWeather(calls[0], toolIds[0]);
        assert.equal(calls[1].function.name, 'get_time');
        assert.deepStrictEqual(calls[1].function.arguments, FIX.timeArgs);
        assert.equal(calls[1].id, toolIds[1]);
        // normalized on both engines (Ollama repeats index 0)
        assert.deepEqual(calls.map((c) => c.function.index), [0, 1], `stream=${stream}`);
      }
    });

    it('tool result round trip is accepted (assistant tool_calls + tool message in history)', T, async () => {
      const n = nonce('plain-whole-please');
      const r = await client.chat({
        model: FIX.model,
        tools: TOOLS,
        messages: [
          {role: 'user', content: 'Wetter?'},
          {role: 'assistant', content: '', tool_calls: [{function: {name: 'get_weather', arguments: FIX.weatherArgs}}]},
          {role: 'tool', content: '21 °C, sonnig', tool_name: 'get_weather'},
          {role: 'user', content: n},
        ],
      });
      assert.equal(r.message.content, FIX.text);
      const [up] = await upstream(n);
      const asst = up.json.messages.find((m) => m.role === 'assistant');
      assert.ok(asst?.tool_calls?.length === 1, `assistant history upstream: ${up.body}`);
      const fn = asst.tool_calls[0].function;
      const upArgs = typeof fn.arguments === 'string' ? JSON.parse(fn.arguments) : fn.arguments;
      assert.deepStrictEqual(upArgs, FIX.weatherArgs);
      if (!passthrough) {
        // an OpenAI engine needs ids tying the tool message to the call
        assert.equal(typeof asst.tool_calls[0].id, 'string');
        const tool = up.json.messages.find((m) => m.role === 'tool');
        assert.equal(tool?.tool_call_id, asst.tool_calls[0].id);
        assert.equal(tool?.content, '21 °C, sonnig');
      }
    });

    it('embed: the vectors', T, async () => {
      const n = nonce('embed');
      const r = await client.embed({model: FIX.embedModel, input: [n, 'zweiter Text']});
      assert.equal(r.embeddings.length, 2);
      r.embeddings.forEach((v, i) => {
        assert.equal(v.length, FIX.embeddings[i].length);
        if (passthrough) assert.deepStrictEqual(v, FIX.embeddings[i]);
        else assert.deepStrictEqual(v.map(Math.fround), FIX.embeddings[i].map(Math.fround));
      });
      const [up] = await upstream(n);
      assert.equal(up.path, passthrough ? '/api/embed' : '/v1/embeddings');
      assert.deepEqual(up.json.input, [n, 'zweiter Text']);
      if (!passthrough) assert.ok(up.json.encoding_format === undefined || up.json.encoding_format === 'float',
        `the daemon asked the engine for ${up.json.encoding_format}`);
    });

    it('list and version', T, async () => {
      const list = await client.list();
      const names = list.models.map((m) => m.name);
      assert.ok(names.includes(passthrough ? `${FIX.model}:latest` : FIX.model), `names: ${names}`);
      const v = await client.version();
      assert.equal(typeof v.version, 'string');
      if (passthrough) assert.equal(v.version, '0.12.5');
    });

    it('upstream 404 -> ResponseError status_code 404 (not streamed and streamed)', T, async () => {
      for (const stream of [false, true]) {
        const n = nonce('error404-please');
        await assert.rejects(client.chat({model: 'nope', messages: user(n), stream}), (e) => {
          assert.equal(e.name, 'ResponseError', `stream=${stream}: got ${e?.name}: ${e?.message}`);
          assert.equal(e.status_code, 404);
          assert.equal(typeof e.error, 'string', `Ollama error shape is {"error":"<text>"}; got ${JSON.stringify(e.error)}`);
          assert.match(e.error, /model 'nope' not found/);
          return true;
        });
        await upstream(n, 1);
      }
    });

    it('upstream 500 -> ResponseError with a 5xx status_code', T, async () => {
      for (const stream of [false, true]) {
        const n = nonce('error500-please');
        await assert.rejects(client.chat({model: FIX.model, messages: user(n), stream}), (e) => {
          assert.equal(e.name, 'ResponseError', `stream=${stream}: got ${e?.name}: ${e?.message}`);
          // the engine failed: 502 upstream_error (docs/API.md), its message relayed
          assert.equal(e.status_code, 502);
          assert.equal(typeof e.error, 'string', `Ollama error shape is {"error":"<text>"}; got ${JSON.stringify(e.error)}`);
          assert.match(e.error, passthrough ? /llama runner process has terminated/ : /engine crashed: out of memory/);
          return true;
        });
        await upstream(n, 1);
      }
    });

    it('auth: wrong token -> ResponseError 401, nothing reaches the upstream', T, async () => {
      const n = nonce('plain-whole-please');
      const bad = mk('wrong-token');
      for (const call of [() => bad.chat({model: FIX.model, messages: user(n)}), () => bad.list()]) {
        await assert.rejects(call(), (e) => {
          assert.equal(e.name, 'ResponseError', `got ${e?.name}: ${e?.message}`);
          assert.equal(e.status_code, 401);
          return true;
        });
      }
      const none = new Ollama({host: stack.daemon.url});
      await assert.rejects(none.chat({model: FIX.model, messages: user(n)}), (e) => e.status_code === 401);
      await upstream(n, 0);
    });

    it('abort mid-stream: the client stops at once and the daemon drops the exchange', T, async () => {
      const n = nonce('slow-stream-please');
      const from = stack.daemon.logLines().length;
      const stream = await client.chat({model: FIX.model, messages: user(n), stream: true});
      let text = '', abortedAt = 0;
      const loop = (async () => {
        for await (const p of stream) {
          text += p.message.content;
          if (text === 'eins zwei ' && !abortedAt) {
            abortedAt = Date.now();
            stream.abort();
          }
        }
      })();
      await assert.rejects(within(10000, loop, 'iteration after abort'), (e) => e?.name === 'AbortError');
      assert.ok(abortedAt > 0, `never saw two content parts; got ${JSON.stringify(text)}`);
      assert.ok(Date.now() - abortedAt < 2000, `iteration ended ${Date.now() - abortedAt} ms after abort`);
      const gone = await stack.daemon.waitLog((l) => /client went away/.test(l.msg ?? ''), from, 5000);
      assert.ok(gone, `no "client went away" log line after the abort; log tail:\n${stack.daemon.log().slice(-3000)}`);
      await upstream(n, 1);
    });

    it('abort of every stream via client.abort()', T, async () => {
      const n = nonce('slow-stream-please');
      const from = stack.daemon.logLines().length;
      const stream = await client.chat({model: FIX.model, messages: user(n), stream: true});
      const it1 = stream[Symbol.asyncIterator]();
      const first = await within(5000, it1.next(), 'first part');
      assert.equal(first.value.message.content, 'eins ');
      client.abort();
      await assert.rejects(within(5000, (async () => {
        for (;;) if ((await it1.next()).done) return;
      })(), 'iteration after abort'), (e) => e?.name === 'AbortError');
      const gone = await stack.daemon.waitLog((l) => /client went away/.test(l.msg ?? ''), from, 5000);
      assert.ok(gone, 'no "client went away" log line after client.abort()');
    });

    it('the daemon is still healthy after all of the above', T, async () => {
      await sleep(50);
      const r = await fetch(`${stack.daemon.url}/healthz`);
      assert.equal(r.status, 200);
    });
  });
}
