#!/usr/bin/env python3
"""Python `websockets` (a third-party RFC 6455 implementation) as a client of our relay (Protocol/relay.md).

Usage: relay_client.py URL SCENARIO
Runs one scenario and prints one JSON object of observations on stdout; the Swift test
(Tests/RelayServiceTests/InteropTests.swift) asserts on them. It asserts nothing itself, so a wrong relay shows up
as a wrong value in the test, not as a crash here. Every receive is bounded (TIMEOUT).
"""
import json, os, struct, sys, time

from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed
from nacl.signing import SigningKey

SUBPROTOCOL = "homebase-relay.v1"
CONTEXT = b"homebase-relay-auth-v1"
TIMEOUT = 5


def open_ws(url, **kw):
    # proxy=None: a proxy from the environment must not sit between the test and the loopback relay.
    return connect(url, subprotocols=[SUBPROTOCOL], proxy=None, open_timeout=TIMEOUT, close_timeout=TIMEOUT,
                   ping_interval=None, max_size=2 * 1024 * 1024, **kw)


def login(url, key=None, **kw):
    """Connects and logs in; returns (ws, key, observations of the login)."""
    key = key or SigningKey.generate()
    ws = open_ws(url, **kw)
    challenge = ws.recv(timeout=TIMEOUT)
    obs = {"subprotocol": ws.subprotocol, "challenge_len": len(challenge), "challenge_type": challenge[0],
           "challenge_version": challenge[1]}
    nonce = challenge[2:34]
    relay_time_ms = struct.unpack(">Q", challenge[34:42])[0]
    obs["relay_time_skew_ms"] = abs(relay_time_ms - int(time.time() * 1000))
    sig = key.sign(CONTEXT + nonce).signature
    ws.send(b"\x02" + bytes(key.verify_key) + sig)
    ready = ws.recv(timeout=TIMEOUT)
    obs["ready_len"] = len(ready)
    obs["ready_type"] = ready[0]
    obs["stored"], obs["max_payload"] = struct.unpack(">II", ready[1:9])
    return ws, key, obs


def send_frame(send_id, recipient, payload, flags=0):
    return b"\x10" + struct.pack(">I", send_id) + bytes(recipient) + bytes([flags]) + payload


def parse_deliver(frame):
    return {"type": frame[0], "sender": frame[1:33].hex(), "delivery_id": struct.unpack(">Q", frame[33:41])[0],
            "payload_len": len(frame) - 41, "payload_sha": __import__("hashlib").sha256(frame[41:]).hexdigest()}


def receipt(ws):
    frame = ws.recv(timeout=TIMEOUT)
    if frame[0] != 0x13 or len(frame) != 6:
        return {"unexpected": frame[:8].hex(), "len": len(frame)}
    send_id, status = struct.unpack(">IB", frame[1:6])
    return {"send_id": send_id, "status": status}


def close_code_after(ws):
    """Reads until the relay closes; the close code the relay sent, as websockets saw it."""
    try:
        while True:
            ws.recv(timeout=TIMEOUT)
    except ConnectionClosed as e:
        return e.rcvd.code if e.rcvd is not None else None
    except TimeoutError:
        return "timeout"


def scenario_login(url):
    ws, key, obs = login(url)  # websockets offers permessage-deflate by default; the relay must not take it
    obs["extensions"] = [type(e).__name__ for e in ws.protocol.extensions]
    ws.close()
    return obs


def scenario_forward(url):
    a, ka, _ = login(url)
    b, kb, _ = login(url)
    out = {}
    payload = os.urandom(300)
    a.send(send_frame(7, kb.verify_key, payload))
    d = b.recv(timeout=TIMEOUT)
    out["deliver"] = parse_deliver(d)
    out["expected_sender"] = bytes(ka.verify_key).hex()
    out["expected_sha"] = __import__("hashlib").sha256(payload).hexdigest()
    out["receipt_live"] = receipt(a)
    offline = SigningKey.generate().verify_key
    a.send(send_frame(8, offline, b"x"))
    out["receipt_offline"] = receipt(a)
    a.send(send_frame(9, offline, b"y", flags=0x01))
    out["receipt_stored"] = receipt(a)
    a.send(send_frame(10, kb.verify_key, b"z", flags=0x02))
    out["receipt_bad_flags"] = receipt(a)
    a.send(send_frame(11, kb.verify_key, b"\x00" * (out_max := 256 * 1024 + 1)))
    out["receipt_too_large"] = receipt(a)
    # send_id 0: delivered, no receipt. B echoes back to A, so A's next frame shows whether a RECEIPT slipped in.
    a.send(send_frame(0, kb.verify_key, b"quiet"))
    d = b.recv(timeout=TIMEOUT)
    b.send(send_frame(0, ka.verify_key, d[41:]))
    nxt = a.recv(timeout=TIMEOUT)
    out["after_send_id_0"] = {"type": nxt[0], "payload": nxt[41:].decode(errors="replace")}
    a.close()
    b.close()
    return out


def scenario_fragmented(url):
    a, ka, _ = login(url)
    b, kb, _ = login(url)
    payload = os.urandom(10_000)
    frame = send_frame(21, kb.verify_key, payload)
    # An iterable makes websockets send one message as several frames (a first frame, then continuations).
    chunks = [frame[:1], frame[1:20], frame[20:5000], frame[5000:]]
    a.send(iter(chunks))
    d = b.recv(timeout=TIMEOUT)
    out = {"deliver": parse_deliver(d), "expected_sha": __import__("hashlib").sha256(payload).hexdigest(),
           "receipt": receipt(a)}
    a.close()
    b.close()
    return out


def scenario_ping(url):
    a, _, _ = login(url)
    t0 = time.monotonic()
    waiter = a.ping(b"hello-ping")
    ok = waiter.wait(TIMEOUT)
    out = {"pong": ok, "pong_ms": (time.monotonic() - t0) * 1000}
    a.close()
    return out


def scenario_text(url):
    a, _, _ = login(url)
    a.send("a text message")
    return {"close_code": close_code_after(a)}


def scenario_oversize(url):
    a, kb, obs = login(url)
    # Over the hard message size (max payload + 64 KiB + 38): the relay closes 1009 without buffering it.
    a.send(send_frame(1, kb.verify_key, b"\x00" * (obs["max_payload"] + 128 * 1024)))
    return {"close_code": close_code_after(a)}


def scenario_large(url):
    a, ka, _ = login(url)
    b, kb, _ = login(url)
    payload = os.urandom(200 * 1024)
    a.send(send_frame(31, kb.verify_key, payload))
    d = b.recv(timeout=TIMEOUT)
    out = {"deliver": parse_deliver(d), "expected_sha": __import__("hashlib").sha256(payload).hexdigest(),
           "receipt": receipt(a)}
    a.close()
    b.close()
    return out


def scenario_client_close(url):
    a, _, _ = login(url)
    a.close(1000, "bye")
    # websockets waits for the relay's closing frame; what it received tells whether the relay echoed it.
    return {"rcvd_code": a.protocol.close_rcvd.code if a.protocol.close_rcvd else None,
            "state": a.protocol.state.name}


SCENARIOS = {name[len("scenario_"):]: f for name, f in globals().items() if name.startswith("scenario_")}

if __name__ == "__main__":
    url, name = sys.argv[1], sys.argv[2]
    try:
        result = SCENARIOS[name](url)
    except Exception as e:  # reported, not raised: the Swift side prints it in the failing expectation
        result = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(result), flush=True)
