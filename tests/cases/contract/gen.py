#!/usr/bin/env python3
"""Authoring tool for the data-driven translation cases (not run by the tests).

Writes one directory per (scenario x client protocol x upstream protocol x stream) with
case.json, request.json and upstream.txt. expected.txt is then produced by the runner with
QR_UPDATE_GOLDEN=1 and reviewed by hand before it is committed:

    python3 tests/cases/contract/gen.py
    QR_UPDATE_GOLDEN=1 build/debug/tests/unit_contract_test_contract_cases
    git diff tests/cases/contract   # read every expected.txt

Upstream transcripts follow ../shared/reference/wire-protocols.md: llama-server style SSE for the
OpenAI upstream, Ollama NDJSON for the Ollama upstream."""
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "qwen3:0.6b"
CREATED = 1700000000

TEXT_PIECES = ["Grüße", ", ß und ", "😀", " — fertig."]
ARGS_ALL_TYPES = {"city": "München", "days": 3, "metric": True, "ratio": 0.5,
                  "tags": ["a", "b"], "opts": {"x": None}}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "Time in a zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}


def j(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# ---- scenarios: what the engine produces -------------------------------------------------------
# Each scenario: request knobs, and the engine's output as a list of steps:
#   ("content", text) ("reasoning", text) ("call", id_or_None, name, args_dict)
#   ("finish", reason) ("usage", prompt, completion) ("error", message)

SCENARIOS = {
    "plain_utf8": dict(req={}, steps=[("content", p) for p in TEXT_PIECES]
                       + [("finish", "stop"), ("usage", 12, 7)]),
    "reasoning_on": dict(req={"think": True}, steps=[
        ("reasoning", "Let me "), ("reasoning", "think."), ("content", "Answer: 42"),
        ("finish", "stop"), ("usage", 20, 9)]),
    "reasoning_off": dict(req={"think": False}, steps=[
        ("content", "Short answer."), ("finish", "stop"), ("usage", 10, 3)]),
    "tool_all_types": dict(req={"tools": [WEATHER_TOOL]}, steps=[
        ("call", "call_abc123", "get_weather", ARGS_ALL_TYPES), ("finish", "tool_calls"),
        ("usage", 30, 20)]),
    "tool_parallel": dict(req={"tools": [WEATHER_TOOL, TIME_TOOL]}, steps=[
        ("call", "call_w1", "get_weather", {"city": "Paris"}),
        ("call", "call_t2", "get_time", {"tz": "Europe/Berlin"}),
        ("finish", "tool_calls"), ("usage", 40, 25)]),
    "tool_ids_synthesized": dict(req={"tools": [WEATHER_TOOL, TIME_TOOL]}, steps=[
        ("call", None, "get_weather", {"city": "Oslo"}),
        ("call", None, "get_time", {"tz": "UTC"}),
        ("finish", "tool_calls"), ("usage", 41, 26)]),
    "length_finish": dict(req={"max_tokens": 4}, steps=[
        ("content", "One two three four"), ("finish", "length"), ("usage", 8, 4)]),
    "structured_output": dict(req={"format": "schema"}, steps=[
        ("content", "{\"n\":5,"), ("content", "\"ok\":true}"), ("finish", "stop"),
        ("usage", 15, 8)]),
    "error_mid_stream": dict(req={}, steps=[
        ("content", "Partial "), ("error", "model runner crashed")]),
    "tool_result_round_trip": dict(req={"tools": [WEATHER_TOOL], "history": True}, steps=[
        ("content", "It is sunny in Paris."), ("finish", "stop"), ("usage", 60, 8)]),
}

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
          "required": ["n", "ok"]}


def history_openai():
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_p1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_p1", "content": "{\"sky\":\"sunny\"}"},
    ]


def history_ollama():
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_p1", "function": {"name": "get_weather",
                                           "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_name": "get_weather", "content": "{\"sky\":\"sunny\"}"},
    ]


def client_request(client, knobs, stream):
    hist = knobs.get("history")
    if client == "openai":
        req = {"model": MODEL, "stream": stream,
               "messages": history_openai() if hist else [
                   {"role": "user", "content": "Sag etwas über München."}]}
        if stream:
            req["stream_options"] = {"include_usage": True}
        if "tools" in knobs:
            req["tools"] = knobs["tools"]
        if knobs.get("think") is True:
            req["reasoning_effort"] = "medium"
        elif knobs.get("think") is False:
            req["reasoning_effort"] = "none"
        if "max_tokens" in knobs:
            req["max_tokens"] = knobs["max_tokens"]
        if knobs.get("format") == "schema":
            req["response_format"] = {"type": "json_schema",
                                      "json_schema": {"name": "answer", "schema": SCHEMA,
                                                      "strict": True}}
        return req
    req = {"model": MODEL, "stream": stream,
           "messages": history_ollama() if hist else [
               {"role": "user", "content": "Sag etwas über München."}]}
    if "tools" in knobs:
        req["tools"] = knobs["tools"]
    if "think" in knobs:
        req["think"] = knobs["think"]
    if "max_tokens" in knobs:
        req["options"] = {"num_predict": knobs["max_tokens"]}
    if knobs.get("format") == "schema":
        req["format"] = SCHEMA
    return req


# ---- upstream transcripts -----------------------------------------------------------------------

def openai_sse(steps):
    out = []
    base = {"id": "chatcmpl-up1", "object": "chat.completion.chunk", "created": CREATED,
            "model": MODEL}

    def chunk(delta, finish=None):
        c = dict(base)
        c["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        out.append("data: " + j(c) + "\n\n")

    chunk({"role": "assistant", "content": None})
    idx = 0
    for st in steps:
        if st[0] == "content":
            chunk({"content": st[1]})
        elif st[0] == "reasoning":
            chunk({"reasoning_content": st[1]})
        elif st[0] == "call":
            first = {"index": idx, "type": "function", "function": {"name": st[2],
                                                                    "arguments": ""}}
            if st[1]:
                first["id"] = st[1]
            chunk({"tool_calls": [first]})
            args = j(st[3])
            cut = max(1, len(args) // 2)
            for frag in (args[:cut], args[cut:]):
                chunk({"tool_calls": [{"index": idx, "function": {"arguments": frag}}]})
            idx += 1
        elif st[0] == "finish":
            chunk({}, st[1])
        elif st[0] == "usage":
            c = dict(base)
            c["choices"] = []
            c["usage"] = {"prompt_tokens": st[1], "completion_tokens": st[2],
                          "total_tokens": st[1] + st[2]}
            c["timings"] = {"prompt_n": st[1], "prompt_ms": 12.5, "predicted_n": st[2],
                            "predicted_ms": 40.25}
            out.append("data: " + j(c) + "\n\n")
        elif st[0] == "error":
            out.append("data: " + j({"error": {"code": 500, "message": st[1],
                                               "type": "server_error"}}) + "\n\n")
            return "".join(out)
    out.append("data: [DONE]\n\n")
    return "".join(out)


def openai_json(steps):
    content, reasoning, calls, finish, usage = "", "", [], None, None
    for st in steps:
        if st[0] == "content":
            content += st[1]
        elif st[0] == "reasoning":
            reasoning += st[1]
        elif st[0] == "call":
            c = {"type": "function", "function": {"name": st[2], "arguments": j(st[3])}}
            if st[1]:
                c["id"] = st[1]
            calls.append(c)
        elif st[0] == "finish":
            finish = st[1]
        elif st[0] == "usage":
            usage = {"prompt_tokens": st[1], "completion_tokens": st[2],
                     "total_tokens": st[1] + st[2]}
        elif st[0] == "error":
            return None
    msg = {"role": "assistant", "content": content if content or not calls else None}
    if reasoning:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = calls
    body = {"id": "chatcmpl-up1", "object": "chat.completion", "created": CREATED,
            "model": MODEL, "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": usage}
    return j(body)


def ollama_ndjson(steps):
    out = []
    ts = "2026-12-02T10:00:00.000000001Z"

    def line(msg, **extra):
        o = {"model": MODEL, "created_at": ts, "message": dict({"role": "assistant",
                                                                  "content": ""}, **msg),
             "done": False}
        o.update(extra)
        out.append(j(o) + "\n")

    finish, usage = "stop", None
    for st in steps:
        if st[0] == "content":
            line({"content": st[1]})
        elif st[0] == "reasoning":
            line({"thinking": st[1]})
        elif st[0] == "call":
            call = {"function": {"index": 0, "name": st[2], "arguments": st[3]}}
            if st[1]:
                call["id"] = st[1]
            line({"tool_calls": [call]})
        elif st[0] == "finish":
            finish = "stop" if st[1] == "tool_calls" else st[1]
        elif st[0] == "usage":
            usage = st
        elif st[0] == "error":
            out.append(j({"error": st[1]}) + "\n")
            return "".join(out)
    final = {"model": MODEL, "created_at": ts, "message": {"role": "assistant", "content": ""},
             "done": True, "done_reason": finish, "total_duration": 90000000,
             "load_duration": 1000000}
    if usage:
        final.update({"prompt_eval_count": usage[1], "prompt_eval_duration": 12500000,
                      "eval_count": usage[2], "eval_duration": 40250000})
    out.append(j(final) + "\n")
    return "".join(out)


def ollama_json(steps):
    content, thinking, calls, finish, usage = "", "", [], "stop", None
    for st in steps:
        if st[0] == "content":
            content += st[1]
        elif st[0] == "reasoning":
            thinking += st[1]
        elif st[0] == "call":
            c = {"function": {"index": 0, "name": st[2], "arguments": st[3]}}
            if st[1]:
                c["id"] = st[1]
            calls.append(c)
        elif st[0] == "finish":
            finish = "stop" if st[1] == "tool_calls" else st[1]
        elif st[0] == "usage":
            usage = st
        elif st[0] == "error":
            return None
    msg = {"role": "assistant", "content": content}
    if thinking:
        msg["thinking"] = thinking
    if calls:
        msg["tool_calls"] = calls
    body = {"model": MODEL, "created_at": "2026-12-02T10:00:00.000000001Z", "message": msg,
            "done": True, "done_reason": finish, "total_duration": 90000000,
            "load_duration": 1000000}
    if usage:
        body.update({"prompt_eval_count": usage[1], "prompt_eval_duration": 12500000,
                     "eval_count": usage[2], "eval_duration": 40250000})
    return j(body)


def main():
    out_root = HERE
    for name in os.listdir(out_root):
        p = os.path.join(out_root, name)
        if os.path.isdir(p) and name.startswith("gen-"):
            shutil.rmtree(p)
    count = 0
    for sname, sc in SCENARIOS.items():
        for client in ("openai", "ollama"):
            for up in ("openai", "ollama"):
                for stream in (True, False):
                    steps = sc["steps"]
                    is_error = any(s[0] == "error" for s in steps)
                    if up == "openai":
                        body = openai_sse(steps) if stream else openai_json(steps)
                        ctype = "text/event-stream" if stream else "application/json"
                    else:
                        body = ollama_ndjson(steps) if stream else ollama_json(steps)
                        ctype = "application/x-ndjson" if stream else \
                            "application/json; charset=utf-8"
                    status = 200
                    if body is None:  # a non-streamed upstream failure is an HTTP error
                        status = 500
                        ctype = "application/json"
                        body = j({"error": {"message": "model runner crashed", "code": 500}}) \
                            if up == "openai" else j({"error": "model runner crashed"})
                    d = os.path.join(out_root, "gen-%s-%s-to-%s-%s" % (
                        sname, client, up, "stream" if stream else "whole"))
                    os.makedirs(d)
                    case = {"client": client, "op": "chat", "upstream": up,
                            "upstream_status": status, "upstream_content_type": ctype,
                            "transport": "ok",
                            "expected_status": 502 if (is_error and not stream) else 200}
                    with open(os.path.join(d, "case.json"), "w") as f:
                        f.write(json.dumps(case, indent=1) + "\n")
                    with open(os.path.join(d, "request.json"), "w") as f:
                        f.write(j(client_request(client, sc["req"], stream)))
                    with open(os.path.join(d, "upstream.txt"), "w") as f:
                        f.write(body)
                    count += 1
    print("wrote %d cases" % count)


if __name__ == "__main__":
    main()
