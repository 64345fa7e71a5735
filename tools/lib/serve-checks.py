"""The checks of tools/test-serve: `handset serve` and `guest serve` driven by the official clients.

Run by tools/test-serve with the venv's Python (tools/bootstrap pins openai, ollama and llm), against a stack it
started: a relay, ollama-emulator, a Homebase, a handset paired with it (its serve has a token) and a guest
joined to it with a grant (its serve has none). Every check prints `PASS name  figure` or `FAIL name  figure`;
the exit status is the number of failures (capped at 1).

The order matters: answers and models first, then the llm CLI, a client that drops mid-stream, hostile input
while answers keep flowing, and last the Homebase killed with -9 and the same calls answered on-device.
"""
import argparse
import http.client
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import ollama
import openai

p = argparse.ArgumentParser()
p.add_argument("--handset", required=True, help="handset serve base URL (http://127.0.0.1:PORT)")
p.add_argument("--token", required=True, help="the handset serve's token")
p.add_argument("--guest", required=True, help="guest serve base URL")
p.add_argument("--host-name", required=True, help="the Homebase's name")
p.add_argument("--host-key", required=True, help="the Homebase's key (a guest that never learnt the name shows it)")
p.add_argument("--emulator", required=True, help="ollama-emulator base URL (the straight answer)")
p.add_argument("--model", required=True)
p.add_argument("--thinking-model", required=True, help="a model the emulator reasons with before answering")
p.add_argument("--homebase-status", required=True, help="command printing `homebase status --json`")
p.add_argument("--homebase-pid", required=True, type=int)
p.add_argument("--llm", required=True, help="the llm CLI")
args = p.parse_args()

failures = []


def check(name, ok, figure=""):
    print(f"{'PASS' if ok else 'FAIL'}  {name}{'  ' + figure if figure else ''}", flush=True)
    if not ok:
        failures.append(name)
    return ok


def guarded(name, fn):
    """Runs a group of checks; an exception (a client refusing a shape, a timeout) is that group's FAIL."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - every client error is a finding here
        check(name, False, f"{type(e).__name__}: {str(e)[:300]}")


def host_port(url):
    h, port = url.split("//", 1)[1].rsplit(":", 1)
    return h, int(port)


M = args.model
SERVES = [  # name, base URL, token, the route's provider kind, owned_by
    ("handset", args.handset, args.token, "remote", "homebase"),
    ("guest", args.guest, None, "cross-account", (f"friend:{args.host_name}", f"friend:{args.host_key[:8]}")),
]
emu = ollama.Client(host=args.emulator, timeout=30)


def straight(prompt):
    """The emulator's own answer to the prompt (deterministic: a hash of the prompt seeds it)."""
    return emu.chat(model=M, messages=[{"role": "user", "content": prompt}])["message"]["content"]


def oa(base, token):
    return openai.OpenAI(base_url=base + "/v1", api_key=token or "unused", timeout=30, max_retries=0)


def ol(base, token):
    return ollama.Client(host=base, timeout=30, headers={"Authorization": f"Bearer {token}"} if token else None)


def homebase_status():
    out = subprocess.run(args.homebase_status, shell=True, capture_output=True, text=True, timeout=10)
    return json.loads(out.stdout)


def raw(base, data, timeout=10.0, read_all=True):
    """Sends bytes on a fresh connection; returns (status, headers dict, body bytes). Status 0: closed, no answer."""
    h, port = host_port(base)
    s = socket.create_connection((h, port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # a server may answer and close before reading an oversized body
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            buf += chunk
            if not read_all and b"\r\n\r\n" in buf:
                break
    finally:
        s.close()
    return parse_response(buf)


def oversized(base, data):
    """Sends an oversized request as an app would, but stops sending once the answer has come (a server that
    refuses early and closes would otherwise reset the connection under the unsent rest, and its answer with it).
    Returns (status, body bytes sent)."""
    h, port = host_port(base)
    s = socket.create_connection((h, port), timeout=10)
    head_len = data.index(b"\r\n\r\n") + 4
    sent, buf = 0, b""
    try:
        while True:
            readable, writable, _ = select.select([s], [s] if sent < len(data) else [], [], 10)
            if readable:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                buf += chunk
                if b"\r\n\r\n" in buf:
                    break
            elif writable:
                try:
                    sent += s.send(data[sent:sent + 65536])
                except (BrokenPipeError, ConnectionResetError):
                    sent = len(data)
            else:
                break
    finally:
        s.close()
    return parse_response(buf)[0], max(0, sent - head_len)


def parse_response(buf):
    if b"\r\n\r\n" not in buf:
        return 0, {}, buf
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while b"\r\n" in rest:
            size, rest = rest.split(b"\r\n", 1)
            n = int(size.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, headers, body


def request(method, path, body=None, host="127.0.0.1", token=None, extra=""):
    payload = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n{extra}\r\n").encode() + payload


def openai_error(body):
    try:
        e = json.loads(body)["error"]
        return e if all(k in e for k in ("message", "type", "param", "code")) else None
    except Exception:  # noqa: BLE001
        return None


# ---------------------------------------------------------------------------------------------------------------
# Answers, models, headers: both serves, the official clients.

def answers(name, base, token, provider, owned_by):
    c = oa(base, token)
    ids = {m.id: m for m in c.models.list().data}
    owners = owned_by if isinstance(owned_by, tuple) else (owned_by,)
    check(f"{name}: openai models.list() lists {M}, owned_by {' or '.join(owners)}",
          M in ids and ids[M].owned_by in owners and ids[M].object == "model",
          f"{len(ids)} models: " + ", ".join(f"{i} ({m.owned_by})" for i, m in list(ids.items())[:6]))

    prompt = f"Say hello to the {name} from an app"
    want = straight(prompt)
    t0 = time.monotonic()
    first, parts, last = None, [], None
    for chunk in c.chat.completions.create(model=M, messages=[{"role": "user", "content": prompt}], stream=True):
        last = chunk
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.monotonic()
            parts.append(chunk.choices[0].delta.content)
    text = "".join(parts)
    check(f"{name}: openai streamed answer is the emulator's, chunk by chunk",
          text == want and len(parts) > 1,
          f"{len(parts)} chunks, first after {(first - t0) * 1000:.0f} ms" if first else f"got {text!r}")
    hb = (last.model_extra or {}).get("homebase") if last else None
    check(f"{name}: last chunk's homebase object names the route ({provider}, no fallback)",
          isinstance(hb, dict) and hb.get("provider") == provider and hb.get("fallback") is None
          and hb.get("model") == M and last.choices and last.choices[0].finish_reason == "stop", json.dumps(hb))

    raw_resp = c.chat.completions.with_raw_response.create(model=M, messages=[{"role": "user", "content": prompt}])
    done = raw_resp.parse()
    hdr = raw_resp.headers
    check(f"{name}: openai non-streamed answer is the emulator's",
          done.object == "chat.completion" and done.choices[0].message.content == want
          and done.choices[0].finish_reason == "stop" and done.usage.completion_tokens > 0,
          f"{done.usage.completion_tokens} completion tokens")
    check(f"{name}: route headers on a plain answer (with_raw_response)",
          hdr.get("x-homebase-provider") == provider and bool(hdr.get("x-homebase-route"))
          and "x-homebase-fallback" not in hdr,
          f"route={hdr.get('x-homebase-route')} provider={hdr.get('x-homebase-provider')}")
    hb = (done.model_extra or {}).get("homebase")
    check(f"{name}: body's homebase object matches the headers",
          isinstance(hb, dict) and hb.get("route") == hdr.get("x-homebase-route") and hb.get("provider") == provider
          and hb.get("fallback") is None, json.dumps(hb))
    check(f"{name}: no CORS headers without --cors", not any(k.startswith("access-control-") for k in hdr),
          ",".join(k for k in hdr if k.startswith("access-control-")) or "none")

    with c.chat.completions.with_streaming_response.create(
            model=M, messages=[{"role": "user", "content": prompt}], stream=True,
            stream_options={"include_usage": True}) as r:
        h2 = r.headers
        chunks = list(r.parse())
    usage = chunks[-1].usage if chunks else None
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check(f"{name}: stream_options.include_usage gives a last chunk with usage and no choices",
          usage is not None and not chunks[-1].choices and usage.completion_tokens > 0 and text == want,
          f"usage {usage.prompt_tokens}+{usage.completion_tokens}" if usage else "no usage")
    check(f"{name}: route headers on a stream (with_streaming_response)",
          h2.get("x-homebase-provider") == provider and h2.get("content-type", "").startswith("text/event-stream"),
          f"{h2.get('content-type')} provider={h2.get('x-homebase-provider')}")

    o = ol(base, token)
    parts = [p["message"]["content"] for p in o.chat(model=M, messages=[{"role": "user", "content": prompt}],
                                                    stream=True)]
    check(f"{name}: ollama chat streamed is the emulator's", "".join(parts) == want and len(parts) > 1,
          f"{len(parts)} NDJSON lines")
    one = o.chat(model=M, messages=[{"role": "user", "content": prompt}], stream=False)
    check(f"{name}: ollama chat stream=False is the emulator's",
          one["message"]["content"] == want and one["done"] and (one.eval_count or 0) > 0,
          f"eval_count {one.eval_count}, done_reason {one.done_reason}")
    names = [m.model for m in o.list().models]
    check(f"{name}: ollama list() has {M}", M in names, ", ".join(names))
    s = o.show(M)
    check(f"{name}: ollama show({M}) has details and capabilities",
          s.details is not None and "completion" in (s.capabilities or []),
          f"family {s.details.family if s.details else None}, capabilities {s.capabilities}")
    ps = o.ps()
    check(f"{name}: ollama ps() answers in Ollama's shape", isinstance(ps.models, (list, tuple)),
          ", ".join(m.model or "?" for m in ps.models) or "no model loaded")
    # The homebase object on the last NDJSON line (the ollama client drops unknown fields: read it raw).
    st, _, body = raw(base, request("POST", "/api/chat", {"model": M, "messages": [{"role": "user", "content": prompt}]},
                                    token=token))
    lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
    hb = lines[-1].get("homebase") if lines else None
    check(f"{name}: last NDJSON line (done) carries the homebase object",
          st == 200 and lines[-1].get("done") is True and isinstance(hb, dict) and hb.get("provider") == provider,
          json.dumps(hb))


for s in SERVES:
    guarded(f"{s[0]}: answers", lambda s=s: answers(*s))


# ---------------------------------------------------------------------------------------------------------------
# Per-call model, reasoning, tools, several apps at once.

def per_call_and_reasoning():
    # The handset is set to M; the request's model picks a thinking model for this call only.
    prompt = "Think first, then answer"
    ref = emu.chat(model=args.thinking_model, messages=[{"role": "user", "content": prompt}])["message"]
    c = oa(args.handset, args.token)
    thought, text, last = [], [], None
    for ch in c.chat.completions.create(model=args.thinking_model, stream=True,
                                        messages=[{"role": "user", "content": prompt}]):
        last = ch
        if ch.choices:
            d = ch.choices[0].delta
            thought.append((d.model_extra or {}).get("reasoning_content") or "")
            text.append(d.content or "")
    hb = (last.model_extra or {}).get("homebase") if last else None
    check(f"handset: model {args.thinking_model} per call (configured {M}), reasoning in delta.reasoning_content",
          "".join(thought) == ref.thinking and "".join(text) == ref.content and bool(ref.thinking)
          and isinstance(hb, dict) and hb.get("model") == args.thinking_model,
          f"{len(''.join(thought))} characters of reasoning, model {hb.get('model') if hb else None}")
    one = ol(args.handset, args.token).chat(model=args.thinking_model, messages=[{"role": "user", "content": prompt}])
    check("handset: ollama chat gives the reasoning in message.thinking",
          one.message.thinking == ref.thinking and one.message.content == ref.content,
          f"{len(one.message.thinking or '')} characters of thinking")


def tools_refused():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]
    for name, base, token, _, _ in SERVES:
        try:
            oa(base, token).chat.completions.create(model=M, tools=tools, messages=[{"role": "user", "content": "Weather?"}])
            check(f"{name}: a request with tools is refused (never sent to a Homebase)", False, "it was answered")
        except openai.BadRequestError as e:
            code = (e.body or {}).get("code") if isinstance(e.body, dict) else None
            check(f"{name}: a request with tools is refused (never sent to a Homebase)",
                  e.status_code == 400 and code == "tools_not_supported", f"{e.status_code} {code}")


def several_apps(name, base, token, n):
    results = {}

    def one(i):
        prompt = f"App number {i} asks {name} at the same time"
        parts, last = [], None
        for ch in oa(base, token).chat.completions.create(model=M, stream=True,
                                                          messages=[{"role": "user", "content": prompt}]):
            last = ch
            if ch.choices:
                parts.append(ch.choices[0].delta.content or "")
        results[i] = "".join(parts) == straight(prompt)
        if not results[i]:
            print(f"      app {i}: {json.dumps((last.model_extra or {}).get('homebase') if last else None)}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(f"{name}: {n} apps streaming at once each get their own whole answer",
          len(results) == n and all(results.values()),
          f"{sum(results.values())}/{n} right in {(time.monotonic() - t0) * 1000:.0f} ms")


guarded("reasoning", per_call_and_reasoning)
guarded("tools", tools_refused)
# The Homebase runs 4 requests at once; a guest may have 2 in flight (GuestLimits.defaults), more are `busy`.
guarded("several apps", lambda: several_apps("handset", args.handset, args.token, 4))
guarded("several apps", lambda: several_apps("guest", args.guest, None, 2))


# ---------------------------------------------------------------------------------------------------------------
# The llm CLI, a third-party app, configured as README.md says (extra-openai-models.yaml).

def llm_cli():
    home = tempfile.mkdtemp(prefix="llm-user-")
    hh, hp = host_port(args.handset)
    gh, gp = host_port(args.guest)
    with open(os.path.join(home, "extra-openai-models.yaml"), "w") as f:
        f.write(f"""- model_id: homebase
  model_name: auto
  api_base: "http://{hh}:{hp}/v1"
  api_key_name: homebase
- model_id: homebase-friend
  model_name: {M}
  api_base: "http://{gh}:{gp}/v1"
""")
    env = dict(os.environ, LLM_USER_PATH=home)
    subprocess.run([args.llm, "keys", "set", "homebase", "--value", args.token], env=env, check=True, timeout=60)
    for model_id, what in (("homebase", "handset, auto model, key"), ("homebase-friend", "guest, no key")):
        prompt = f"Hello from the llm CLI via {model_id}"
        t0 = time.monotonic()
        out = subprocess.run([args.llm, "-m", model_id, "--no-log", prompt], env=env, capture_output=True,
                             text=True, timeout=60)
        took = (time.monotonic() - t0) * 1000
        want = straight(prompt)
        check(f"llm CLI ({what}) gets the answer", out.returncode == 0 and out.stdout.strip() == want.strip(),
              f"{took:.0f} ms" if out.returncode == 0 else f"exit {out.returncode}: {out.stderr.strip()[:200]}")


guarded("llm CLI", llm_cli)


# ---------------------------------------------------------------------------------------------------------------
# A client that drops mid-stream frees the Homebase's stream within 1 s (the relay client sends infer.cancel).

def dropped_client():
    # The emulator answers 3 tokens, then stalls with the connection open: only a cancel ends that stream.
    body = {"model": M, "stream": True,
            "messages": [{"role": "user", "content": "A long answer please [[fault:stall-after=3]]"}]}
    h, port = host_port(args.guest)
    s = socket.create_connection((h, port), timeout=20)
    s.sendall(request("POST", "/v1/chat/completions", body))
    buf = b""
    while b"data: {" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    got_chunk = b"data: {" in buf
    live = []
    for _ in range(50):  # the Homebase's status shows the stream
        live = homebase_status()["streams"]
        if live:
            break
        time.sleep(0.1)
    check("drop: the stream is live on the Homebase before the client drops", got_chunk and len(live) == 1,
          f"{len(live)} stream(s): " + ", ".join(f"{x['peer_name']} {x['state']} {x['tokens']} tokens" for x in live))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST, as a killed app
    s.close()
    t0 = time.monotonic()
    gone = None
    while time.monotonic() - t0 < 5:
        st = homebase_status()
        if not st["streams"]:
            gone = time.monotonic() - t0
            break
        time.sleep(0.05)
    outcome = st["finished"][0]["outcome"] if st.get("finished") else "?"
    check("drop: the Homebase's stream is gone within 1 s (homebase status --json: streams)",
          gone is not None and gone <= 1.0,
          f"{gone * 1000:.0f} ms, outcome {outcome}" if gone is not None else "still streaming after 5 s")


guarded("drop", dropped_client)


# ---------------------------------------------------------------------------------------------------------------
# Hostile input on the API port while answers keep flowing.

def hostile():
    stop = threading.Event()
    flow = {"ok": 0, "bad": [], "gap": 0.0}
    prompt = "Keep talking while someone misbehaves"
    want = straight(prompt)

    def keep_answering():
        c = oa(args.handset, args.token)
        while not stop.is_set():
            try:
                last, parts = time.monotonic(), []
                for ch in c.chat.completions.create(model=M, stream=True,
                                                    messages=[{"role": "user", "content": prompt}]):
                    now = time.monotonic()
                    flow["gap"] = max(flow["gap"], now - last)
                    last = now
                    if ch.choices and ch.choices[0].delta.content:
                        parts.append(ch.choices[0].delta.content)
                if "".join(parts) == want:
                    flow["ok"] += 1
                else:
                    flow["bad"].append("".join(parts)[:80])
            except Exception as e:  # noqa: BLE001
                flow["bad"].append(f"{type(e).__name__}: {e}"[:120])
                time.sleep(0.2)

    flowing = threading.Thread(target=keep_answering, daemon=True)
    flowing.start()

    slow = {}

    def slowloris():
        # Half a request head, then one byte a second: the server must close it (10 s for head and body). Sent to
        # the handset's serve, the one whose answers keep flowing meanwhile.
        h, port = host_port(args.handset)
        s = socket.create_connection((h, port), timeout=30)
        t0 = time.monotonic()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        buf = b""
        s.settimeout(1.0)
        try:
            while time.monotonic() - t0 < 25:
                try:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                except socket.timeout:
                    try:
                        s.sendall(b"X")
                    except OSError:
                        break
                except ConnectionResetError:
                    break
        finally:
            s.close()
        slow["s"] = time.monotonic() - t0
        slow["status"] = parse_response(buf)[0]

    lori = threading.Thread(target=slowloris, daemon=True)
    lori.start()

    h, g = args.handset, args.guest
    chat = {"model": M, "messages": [{"role": "user", "content": "hi"}]}
    big = json.dumps({"model": M, "messages": [{"role": "user", "content": "x" * (1 << 20)}]}).encode()
    st, sent = oversized(h, request("POST", "/v1/chat/completions", big))
    check("hostile: a body over 1 MiB gets 413", st == 413, f"{st}, {sent} of {len(big)} body bytes sent")
    st, _, body = raw(g, request("POST", "/v1/chat/completions", b'{"model": "x", "messages": [{"role": '))
    e = openai_error(body)
    check("hostile: malformed JSON gets 400 invalid_request_error",
          st == 400 and e is not None and e["type"] == "invalid_request_error", f"{st} {body[:120]!r}")
    st, _, body = raw(h, request("POST", "/v1/chat/completions", chat, token="wrong-" + args.token))
    e = openai_error(body)
    check("hostile: a wrong token gets 401 invalid_api_key", st == 401 and e is not None and e["code"] == "invalid_api_key",
          f"{st} {body[:120]!r}")
    st, _, body = raw(h, request("GET", "/v1/models"))
    check("hostile: no token gets 401", st == 401 and openai_error(body) is not None, f"{st}")
    st, _, body = raw(g, request("GET", "/v1/models", host="attacker.example:11436"))
    e = openai_error(body)
    check("hostile: a foreign Host gets 403 host_not_allowed",
          st == 403 and e is not None and e["code"] == "host_not_allowed", f"{st} {body[:120]!r}")
    st, _, _ = raw(g, request("GET", "/v1/models", host="localhost:1"))
    check("hostile: Host localhost (any port) is allowed", st == 200, f"{st}")
    st, _, _ = raw(g, request("GET", "/v1/models", extra="X-Filler: " + "a" * (256 * 1024) + "\r\n"))
    check("hostile: an oversized head gets 431 (or is closed)", st in (431, 0), f"{st}")
    st, _, _ = raw(g, request("GET", "/v1/nothing-here"))
    check("hostile: an unknown path gets 404", st == 404, f"{st}")
    st, _, _ = raw(g, request("GET", "/v1/chat/completions"))
    check("hostile: a wrong method gets 405", st == 405, f"{st}")
    st, _, _ = raw(g, request("POST", "/v1/chat/completions", {"model": M, "messages": "not a list"}))
    check("hostile: a wrong type gets 400", st == 400, f"{st}")

    lori.join(30)
    check("hostile: a slowloris request gets 408 and is closed after about 10 s",
          8 <= slow.get("s", 99) <= 20 and slow.get("status") == 408,
          f"closed after {slow.get('s', 0):.1f} s, status {slow.get('status')}")
    stop.set()
    flowing.join(30)
    check("hostile: answers kept flowing meanwhile, whole and right",
          flow["ok"] >= 3 and not flow["bad"] and flow["gap"] < 3.0,
          f"{flow['ok']} answers, longest gap between chunks {flow['gap'] * 1000:.0f} ms, bad: {flow['bad'][:2]}")


guarded("hostile", hostile)


# ---------------------------------------------------------------------------------------------------------------
# The Homebase killed with -9: the same calls answer on-device, same shape, headers saying so.

def fallback():
    os.kill(args.homebase_pid, signal.SIGKILL)
    for name, base, token, _, _ in SERVES:
        c = oa(base, token)
        prompt = f"Are you still there, {name}?"
        with c.chat.completions.with_streaming_response.create(
                model=M, messages=[{"role": "user", "content": prompt}], stream=True) as r:
            hdr = r.headers
            chunks = list(r.parse())
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        hb = (chunks[-1].model_extra or {}).get("homebase") if chunks else None
        check(f"{name}, Homebase killed: openai stream answers on-device with the fallback headers",
              r.status_code == 200 and text != "" and hdr.get("x-homebase-provider") == "on-device"
              and bool(hdr.get("x-homebase-fallback")),
              f"{r.status_code} provider={hdr.get('x-homebase-provider')} fallback={hdr.get('x-homebase-fallback')}"
              f" {len(chunks)} chunks")
        check(f"{name}, Homebase killed: the last chunk's homebase object has the fallback",
              isinstance(hb, dict) and hb.get("provider") == "on-device" and isinstance(hb.get("fallback"), dict)
              and hb["fallback"].get("reason") == hdr.get("x-homebase-fallback"), json.dumps(hb))
        rr = c.chat.completions.with_raw_response.create(model=M, messages=[{"role": "user", "content": prompt}])
        done = rr.parse()
        check(f"{name}, Homebase killed: openai non-streamed answer, same shape",
              rr.status_code == 200 and done.object == "chat.completion" and done.choices[0].message.content
              and rr.headers.get("x-homebase-provider") == "on-device" and bool(rr.headers.get("x-homebase-fallback")),
              f"fallback={rr.headers.get('x-homebase-fallback')} model={done.model}")
        one = ol(base, token).chat(model=M, messages=[{"role": "user", "content": prompt}], stream=False)
        check(f"{name}, Homebase killed: ollama chat answers, same shape", one["done"] and one["message"]["content"] != "",
              f"{len(one['message']['content'])} characters")


guarded("fallback", fallback)

print(f"serve checks: {len(failures)} failed" + (": " + "; ".join(failures) if failures else ""), flush=True)
sys.exit(1 if failures else 0)
