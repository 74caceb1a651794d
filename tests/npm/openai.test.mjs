// openai@7.59.0 (the public npm client) against the real daemon's /v1 API, once per backend:
// backend=ollama (translated to Ollama's /api/* on the replay server) and backend=openai
// (translated to an OpenAI-compatible engine, llama-server style, on the replay server).
import assert from 'node:assert/strict';
import {after, before, describe, it} from 'node:test';

import OpenAI, {
  APIUserAbortError,
  AuthenticationError,
  InternalServerError,
  NotFoundError,
} from 'openai';

import {FIX, TOKEN, TOOLS, nonce, sleep, startStack, within} from './harness.mjs';

const T = {timeout: 30000};

for (const backend of ['ollama', 'openai']) {
  describe(`openai@7.59.0 -> /v1 -> backend=${backend}`, () => {
    let stack, client;
    const upstreamChatPath = backend === 'openai' ? '/v1/chat/completions' : '/api/chat';
    const upstreamEmbedPath = backend === 'openai' ? '/v1/embeddings' : '/api/embed';
    const toolIds = backend === 'openai' ? FIX.openaiIds : FIX.ollamaIds;

    const mk = (opts = {}) =>
      new OpenAI({baseURL: `${stack.daemon.url}/v1`, apiKey: TOKEN, maxRetries: 0, timeout: 20000, ...opts});
    const user = (text) => [{role: 'user', content: text}];

    // The one upstream request this test caused (found by its nonce), parsed.
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

    before(async () => {
      stack = await startStack(backend);
      client = mk();
    });
    after(async () => {
      await stack?.stop(); // throws when the daemon or replay did not exit 0 on SIGTERM
    });

    it('chat, not streamed', T, async () => {
      const n = nonce('plain-whole-please');
      const r = await client.chat.completions.create({model: FIX.model, messages: user(n)});
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.choices.length, 1);
      assert.equal(r.choices[0].index, 0);
      assert.equal(r.choices[0].message.role, 'assistant');
      assert.equal(r.choices[0].message.content, FIX.text);
      assert.equal(r.choices[0].finish_reason, 'stop');
      assert.equal(r.model, FIX.model);
      assert.equal(r.usage.prompt_tokens, FIX.usage.prompt_tokens);
      assert.equal(r.usage.completion_tokens, FIX.usage.completion_tokens);
      assert.equal(r.usage.total_tokens, FIX.usage.total_tokens);
      const [up] = await upstream(n);
      assert.equal(up.method, 'POST');
      assert.equal(up.path, upstreamChatPath);
      assert.equal(up.json.stream, false);
      assert.equal(up.json.model, FIX.model);
      assert.equal(up.json.messages.at(-1).content, n);
    });

    it('chat, streamed with include_usage: text, role, finish, usage chunk, [DONE]', T, async () => {
      const n = nonce('plain-stream-please');
      const stream = await client.chat.completions.create({
        model: FIX.model, messages: user(n), stream: true, stream_options: {include_usage: true},
      });
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      assert.ok(chunks.length >= 3, `chunks: ${JSON.stringify(chunks)}`);
      const ids = new Set(chunks.map((c) => c.id));
      assert.equal(ids.size, 1, 'one id for every chunk');
      for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
      const withChoice = chunks.filter((c) => c.choices.length > 0);
      assert.equal(withChoice[0].choices[0].delta.role, 'assistant');
      const text = withChoice.map((c) => c.choices[0].delta.content ?? '').join('');
      assert.equal(text, FIX.text);
      assert.equal(withChoice.at(-1).choices[0].finish_reason, 'stop');
      for (const c of withChoice.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
      const last = chunks.at(-1);
      assert.deepEqual(last.choices, [], 'the usage chunk comes last and has no choices');
      assert.equal(last.usage.prompt_tokens, FIX.usage.prompt_tokens);
      assert.equal(last.usage.completion_tokens, FIX.usage.completion_tokens);
      assert.equal(last.usage.total_tokens, FIX.usage.total_tokens);
      for (const c of chunks.slice(0, -1)) assert.ok(c.usage == null, 'usage only on the last chunk');
      const [up] = await upstream(n);
      assert.equal(up.path, upstreamChatPath);
      assert.equal(up.json.stream, true);
      if (backend === 'openai') assert.equal(up.json.stream_options?.include_usage, true);
    });

    it('chat, streamed without include_usage: no usage chunk', T, async () => {
      const n = nonce('plain-stream-please');
      const stream = await client.chat.completions.create({model: FIX.model, messages: user(n), stream: true});
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), FIX.text);
      for (const c of chunks) {
        assert.equal(c.choices.length, 1, `unexpected chunk ${JSON.stringify(c)}`);
        assert.ok(c.usage == null, `usage without include_usage: ${JSON.stringify(c)}`);
      }
    });

    it('chat.completions.stream() helper: finalChatCompletion and UTF-8 text', T, async () => {
      const n = nonce('plain-stream-please');
      const s = client.chat.completions.stream({model: FIX.model, messages: user(n)});
      const deltas = [];
      s.on('content', (d) => deltas.push(d));
      const fin = await s.finalChatCompletion();
      assert.equal(fin.choices[0].message.content, FIX.text);
      assert.equal(deltas.join(''), FIX.text);
      assert.equal(fin.choices[0].finish_reason, 'stop');
    });

    it('thinking, streamed: reasoning_content deltas before content', T, async () => {
      const n = nonce('think-stream-please');
      const stream = await client.chat.completions.create({model: FIX.model, messages: user(n), stream: true});
      let reasoning = '', content = '', contentSeen = false, reasoningAfterContent = false;
      for await (const c of stream) {
        const d = c.choices[0]?.delta ?? {};
        if (d.reasoning_content) {
          reasoning += d.reasoning_content;
          if (contentSeen) reasoningAfterContent = true;
        }
        if (d.content) {
          content += d.content;
          contentSeen = true;
        }
      }
      assert.equal(reasoning, FIX.thinking);
      assert.equal(content, FIX.answer);
      assert.equal(reasoningAfterContent, false);
    });

    it('thinking, not streamed: message.reasoning_content', T, async () => {
      const n = nonce('think-whole-please');
      const r = await client.chat.completions.create({model: FIX.model, messages: user(n)});
      assert.equal(r.choices[0].message.reasoning_content, FIX.thinking);
      assert.equal(r.choices[0].message.content, FIX.answer);
    });

    // Checks the raw tool-call deltas: the first delta of each call carries id, type, name and
    // arguments "", later ones only index + an arguments fragment.
    function checkToolDeltas(chunks, count) {
      const seen = new Map();
      for (const c of chunks) {
        for (const tc of c.choices[0]?.delta?.tool_calls ?? []) {
          assert.ok(Number.isInteger(tc.index), `tool delta without integer index: ${JSON.stringify(tc)}`);
          if (!seen.has(tc.index)) {
            seen.set(tc.index, tc);
            assert.equal(typeof tc.id, 'string', `first delta of call ${tc.index} has no id: ${JSON.stringify(tc)}`);
            assert.equal(tc.type, 'function');
            assert.equal(typeof tc.function?.name, 'string');
            assert.equal(tc.function?.arguments, '', `first delta of call ${tc.index}: ${JSON.stringify(tc)}`);
          } else {
            assert.equal(tc.id, undefined, `later delta repeats the id: ${JSON.stringify(tc)}`);
            assert.equal(tc.function?.name, undefined, `later delta repeats the name: ${JSON.stringify(tc)}`);
            assert.equal(typeof tc.function?.arguments, 'string');
          }
        }
      }
      assert.deepEqual([...seen.keys()], [...Array(count).keys()], 'call indices 0..n-1 in order');
    }

    it('tools, streamed via chat.completions.stream(): one call, all JSON types', T, async () => {
      const n = nonce('tools-stream-please');
      const s = client.chat.completions.stream({model: FIX.model, messages: user(n), tools: TOOLS});
      const chunks = [];
      s.on('chunk', (c) => chunks.push(c));
      const fin = await s.finalChatCompletion();
      checkToolDeltas(chunks, 1);
      const ch = fin.choices[0];
      assert.equal(ch.finish_reason, 'tool_calls');
      assert.equal(ch.message.tool_calls.length, 1);
      const tc = ch.message.tool_calls[0];
      assert.equal(tc.id, toolIds[0]);
      assert.equal(tc.type, 'function');
      assert.equal(tc.function.name, 'get_weather');
      const args = JSON.parse(tc.function.arguments);
      assert.deepStrictEqual(args, FIX.weatherArgs);
      assert.deepEqual(Object.keys(args), Object.keys(FIX.weatherArgs), 'argument key order kept');
      const [up] = await upstream(n);
      assert.equal(up.json.stream, true);
      assert.equal(up.json.tools?.[0]?.function?.name, 'get_weather');
      assert.deepEqual(up.json.tools?.[0]?.function?.parameters, TOOLS[0].function.parameters);
    });

    it('tools, not streamed: one call', T, async () => {
      const n = nonce('tools-whole-please');
      const r = await client.chat.completions.create({model: FIX.model, messages: user(n), tools: TOOLS});
      const ch = r.choices[0];
      assert.equal(ch.finish_reason, 'tool_calls');
      assert.equal(ch.message.tool_calls.length, 1);
      const tc = ch.message.tool_calls[0];
      assert.equal(tc.id, toolIds[0]);
      assert.equal(tc.type, 'function');
      assert.equal(tc.function.name, 'get_weather');
      assert.equal(typeof tc.function.arguments, 'string');
      assert.deepStrictEqual(JSON.parse(tc.function.arguments), FIX.weatherArgs);
    });

    it('tools, streamed: two parallel calls with indices 0 and 1', T, async () => {
      const n = nonce('parallel-stream-please');
      const s = client.chat.completions.stream({model: FIX.model, messages: user(n), tools: TOOLS});
      const chunks = [];
      s.on('chunk', (c) => chunks.push(c));
      const fin = await s.finalChatCompletion();
      checkToolDeltas(chunks, 2);
      const calls = fin.choices[0].message.tool_calls;
      assert.equal(fin.choices[0].finish_reason, 'tool_calls');
      assert.equal(calls.length, 2);
      assert.deepEqual(calls.map((c) => c.id), toolIds);
      assert.deepEqual(calls.map((c) => c.function.name), ['get_weather', 'get_time']);
      assert.deepStrictEqual(JSON.parse(calls[0].function.arguments), FIX.weatherArgs);
      assert.deepStrictEqual(JSON.parse(calls[1].function.arguments), FIX.timeArgs);
    });

    it('tools, not streamed: two parallel calls', T, async () => {
      const n = nonce('parallel-whole-please');
      const r = await client.chat.completions.create({model: FIX.model, messages: user(n), tools: TOOLS});
      const calls = r.choices[0].message.tool_calls;
      assert.equal(calls.length, 2);
      assert.deepEqual(calls.map((c) => c.id), toolIds);
      assert.deepStrictEqual(JSON.parse(calls[0].function.arguments), FIX.weatherArgs);
      assert.deepStrictEqual(JSON.parse(calls[1].function.arguments), FIX.timeArgs);
    });

    it('tool result round trip is accepted (history with tool_calls and a tool message)', T, async () => {
      const n = nonce('plain-whole-please');
      const r = await client.chat.completions.create({
        model: FIX.model,
        tools: TOOLS,
        messages: [
          {role: 'user', content: 'Wetter?'},
          {role: 'assistant', content: null, tool_calls: [{id: toolIds[0], type: 'function',
            function: {name: 'get_weather', arguments: JSON.stringify(FIX.weatherArgs)}}]},
          {role: 'tool', tool_call_id: toolIds[0], content: '21 °C, sonnig'},
          {role: 'user', content: n},
        ],
      });
      assert.equal(r.choices[0].message.content, FIX.text);
      const [up] = await upstream(n);
      const asst = up.json.messages.find((m) => m.role === 'assistant');
      assert.ok(asst?.tool_calls?.length === 1, `assistant history upstream: ${up.body}`);
      const fn = asst.tool_calls[0].function;
      const upArgs = typeof fn.arguments === 'string' ? JSON.parse(fn.arguments) : fn.arguments;
      assert.deepStrictEqual(upArgs, FIX.weatherArgs);
      const tool = up.json.messages.find((m) => m.role === 'tool');
      assert.equal(tool?.content, '21 °C, sonnig');
    });

    it('embeddings, default (base64 on the wire): float32 values of the upstream vectors', T, async () => {
      const n = nonce('embed');
      const r = await client.embeddings.create({model: FIX.embedModel, input: [n, 'zweiter Text']});
      assert.equal(r.object, 'list');
      assert.equal(r.data.length, 2);
      r.data.forEach((d, i) => {
        assert.equal(d.object, 'embedding');
        assert.equal(d.index, i);
        // exact float32 values: only true when the daemon sent base64 float32 (the client's default)
        assert.deepStrictEqual(d.embedding, FIX.embeddings[i].map(Math.fround));
      });
      const [up] = await upstream(n);
      assert.equal(up.path, upstreamEmbedPath);
      assert.deepEqual(up.json.input, [n, 'zweiter Text']);
    });

    it('embeddings, encoding_format "float": plain numbers', T, async () => {
      const n = nonce('embed');
      const r = await client.embeddings.create({model: FIX.embedModel, input: [n, 'zwei'], encoding_format: 'float'});
      assert.equal(r.data.length, 2);
      r.data.forEach((d, i) => {
        assert.ok(Array.isArray(d.embedding));
        assert.deepStrictEqual(d.embedding.map(Math.fround), FIX.embeddings[i].map(Math.fround));
      });
    });

    it('models: list, retrieve, unknown id -> NotFoundError 404', T, async () => {
      const page = await client.models.list();
      const ids = page.data.map((m) => m.id);
      const want = backend === 'openai' ? FIX.model : `${FIX.model}:latest`;
      assert.ok(ids.includes(want), `model ids: ${ids}`);
      for (const m of page.data) assert.equal(m.object, 'model');
      const one = await client.models.retrieve(want);
      assert.equal(one.id, want);
      assert.equal(one.object, 'model');
      await assert.rejects(client.models.retrieve('no-such-model'), (e) => {
        assert.ok(e instanceof NotFoundError, `got ${e?.constructor?.name}: ${e?.message}`);
        assert.equal(e.status, 404);
        assert.equal(typeof e.error?.message, 'string');
        return true;
      });
    });

    it('upstream 404 -> NotFoundError (not streamed and streamed)', T, async () => {
      for (const stream of [false, true]) {
        const n = nonce('error404-please');
        await assert.rejects(
          client.chat.completions.create({model: 'nope', messages: user(n), stream}),
          (e) => {
            assert.ok(e instanceof NotFoundError, `stream=${stream}: got ${e?.constructor?.name}: ${e?.message}`);
            assert.equal(e.status, 404);
            assert.match(e.message, /not found/);
            assert.equal(typeof e.error?.message, 'string', `OpenAI error shape: ${JSON.stringify(e.error)}`);
            assert.ok('type' in e.error && 'param' in e.error && 'code' in e.error, JSON.stringify(e.error));
            return true;
          },
        );
        await upstream(n, 1);
      }
    });

    // The daemon answers an upstream 5xx as 502 upstream_error (docs/API.md), naming the upstream
    // status and message; the client maps every status >= 500 to InternalServerError.
    it('upstream 500 -> InternalServerError (maxRetries 0: one upstream call)', T, async () => {
      for (const stream of [false, true]) {
        const n = nonce('error500-please');
        await assert.rejects(client.chat.completions.create({model: FIX.model, messages: user(n), stream}), (e) => {
          assert.ok(e instanceof InternalServerError, `stream=${stream}: got ${e?.constructor?.name}: ${e?.message}`);
          assert.equal(e.status, 502);
          assert.equal(e.code, 'upstream_error');
          assert.match(e.message, /HTTP 500/);
          assert.match(e.message, backend === 'openai' ? /engine crashed: out of memory/ : /llama runner process has terminated/);
          return true;
        });
        await upstream(n, 1);
      }
    });

    it('upstream 500 with default retries -> three upstream calls, then InternalServerError', T, async () => {
      const n = nonce('error500-please');
      const c = new OpenAI({baseURL: `${stack.daemon.url}/v1`, apiKey: TOKEN, timeout: 20000}); // maxRetries 2
      await assert.rejects(c.chat.completions.create({model: FIX.model, messages: user(n)}), (e) => {
        assert.ok(e instanceof InternalServerError, `got ${e?.constructor?.name}: ${e?.message}`);
        return true;
      });
      await upstream(n, 3);
    });

    it('auth: wrong key -> AuthenticationError 401, nothing reaches the upstream', T, async () => {
      const n = nonce('plain-whole-please');
      const bad = mk({apiKey: 'wrong-key'});
      for (const call of [() => bad.chat.completions.create({model: FIX.model, messages: user(n)}), () => bad.models.list()]) {
        await assert.rejects(call(), (e) => {
          assert.ok(e instanceof AuthenticationError, `got ${e?.constructor?.name}: ${e?.message}`);
          assert.equal(e.status, 401);
          return true;
        });
      }
      await upstream(n, 0);
    });

    // Abort mid-stream on an upstream that stalls after three events: the client stops at once,
    // the daemon notices ("client went away") and drops the upstream exchange.
    async function abortCase(how) {
      const n = nonce('slow-stream-please');
      const from = stack.daemon.logLines().length;
      const ac = new AbortController();
      const stream = await client.chat.completions.create(
        {model: FIX.model, messages: user(n), stream: true},
        how === 'signal' ? {signal: ac.signal} : {},
      );
      let text = '', abortedAt = 0;
      const loop = (async () => {
        for await (const c of stream) {
          text += c.choices[0]?.delta?.content ?? '';
          if (text === 'eins zwei ' && !abortedAt) {
            abortedAt = Date.now();
            if (how === 'signal') ac.abort();
            else stream.controller.abort();
          }
        }
      })();
      try {
        await within(10000, loop, 'iteration after abort');
      } catch (e) {
        if (!(e instanceof APIUserAbortError) && e?.name !== 'AbortError') throw e;
      }
      assert.ok(abortedAt > 0, `never saw two content deltas; got ${JSON.stringify(text)}`);
      assert.ok(Date.now() - abortedAt < 2000, `iteration ended ${Date.now() - abortedAt} ms after abort`);
      assert.ok(text.startsWith('eins zwei '), text);
      const gone = await stack.daemon.waitLog((l) => /client went away/.test(l.msg ?? ''), from, 5000);
      assert.ok(gone, `no "client went away" log line after the abort; log tail:\n${stack.daemon.log().slice(-3000)}`);
      await upstream(n, 1);
    }

    it('abort: stream.controller.abort() mid-stream', T, () => abortCase('controller'));
    it('abort: AbortController signal mid-stream', T, () => abortCase('signal'));

    it('the daemon is still healthy after all of the above', T, async () => {
      await sleep(50);
      const r = await fetch(`${stack.daemon.url}/healthz`);
      assert.equal(r.status, 200);
    });
  });
}
