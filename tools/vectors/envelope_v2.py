#!/usr/bin/env python3
"""Writes Fixtures/envelope-v2-vectors.json: the v2 envelope (Protocol/envelope.md §7), byte-exact.

Independent of the Swift code on purpose: Noise_IK_25519_ChaChaPoly_BLAKE2b is written here from the Noise spec
(revision 34) over libsodium through PyNaCl (X25519, ChaCha20-Poly1305 IETF, BLAKE2b), checked first against the
cacophony vector in Fixtures/noise-ik-cacophony.json, and only then used to make the Homebase vectors. The Swift
tests (SessionV2VectorTests) and `conformance vectors` replay every value.

Run with the repository's .venv: .venv/bin/python tools/vectors/envelope_v2.py [--check]
(--check compares with the file in Fixtures/ instead of writing it; exit 1 on a difference.)
"""
import json, struct, sys
from pathlib import Path

from nacl import bindings as b
from nacl.hash import blake2b
from nacl.encoding import RawEncoder

ROOT = Path(__file__).resolve().parents[2]
NAME = b"Noise_IK_25519_ChaChaPoly_BLAKE2b"
HASHLEN, BLOCKLEN = 64, 128
PROLOGUE = b"homebase-envelope-v2"


def H(data):
    return blake2b(data, digest_size=HASHLEN, encoder=RawEncoder)


def hmac(key, data):
    key = key + bytes(BLOCKLEN - len(key))
    inner = H(bytes(k ^ 0x36 for k in key) + data)
    return H(bytes(k ^ 0x5C for k in key) + inner)


def hkdf2(ck, ikm):
    temp = hmac(ck, ikm)
    o1 = hmac(temp, b"\x01")
    return o1, hmac(temp, o1 + b"\x02")


def nonce(n):
    return bytes(4) + struct.pack("<Q", n)


def encrypt(k, n, ad, p):
    return b.crypto_aead_chacha20poly1305_ietf_encrypt(p, ad, nonce(n), k)


def decrypt(k, n, ad, c):
    return b.crypto_aead_chacha20poly1305_ietf_decrypt(c, ad, nonce(n), k)


def rekey(k):
    return encrypt(k, 2**64 - 1, b"", bytes(32))[:32]


def dh(sk, pk):
    return b.crypto_scalarmult(sk, pk)


class Symmetric:
    def __init__(self):
        self.h = NAME + bytes(HASHLEN - len(NAME))
        self.ck = self.h
        self.k, self.n = None, 0

    def mix_hash(self, data):
        self.h = H(self.h + data)

    def mix_key(self, ikm):
        self.ck, t = hkdf2(self.ck, ikm)
        self.k, self.n = t[:32], 0

    def enc_hash(self, p):
        c = p if self.k is None else encrypt(self.k, self.n, self.h, p)
        if self.k is not None:
            self.n += 1
        self.mix_hash(c)
        return c

    def dec_hash(self, c):
        p = c if self.k is None else decrypt(self.k, self.n, self.h, c)
        if self.k is not None:
            self.n += 1
        self.mix_hash(c)
        return p

    def split(self):
        k1, k2 = hkdf2(self.ck, b"")
        return k1[:32], k2[:32]


def pub(sk):
    return b.crypto_scalarmult_base(sk)


def ik_message1(prologue, s, e, rs, payload):
    sym = Symmetric()
    sym.mix_hash(prologue)
    sym.mix_hash(rs)
    out = pub(e)
    sym.mix_hash(pub(e))
    sym.mix_key(dh(e, rs))
    out += sym.enc_hash(pub(s))
    sym.mix_key(dh(s, rs))
    out += sym.enc_hash(payload)
    return sym, out


def ik_respond(prologue, s, e, msg1, payload2):
    sym = Symmetric()
    sym.mix_hash(prologue)
    sym.mix_hash(pub(s))
    re = msg1[:32]
    sym.mix_hash(re)
    sym.mix_key(dh(s, re))
    rs = sym.dec_hash(msg1[32:80])
    sym.mix_key(dh(s, rs))
    payload1 = sym.dec_hash(msg1[80:])
    out = pub(e)
    sym.mix_hash(pub(e))
    sym.mix_key(dh(e, re))
    sym.mix_key(dh(e, rs))
    out += sym.enc_hash(payload2)
    k1, k2 = sym.split()
    return payload1, rs, out, sym.h, k1, k2


def ik_read2(sym, s, e, msg2):
    re = msg2[:32]
    sym.mix_hash(re)
    sym.mix_key(dh(e, re))
    sym.mix_key(dh(s, re))
    payload = sym.dec_hash(msg2[32:])
    k1, k2 = sym.split()
    return payload, sym.h, k1, k2


def check_cacophony():
    v = json.loads((ROOT / "Fixtures/noise-ik-cacophony.json").read_text())["vector"]
    x = bytes.fromhex
    s_i, e_i, s_r, e_r = x(v["init_static"]), x(v["init_ephemeral"]), x(v["resp_static"]), x(v["resp_ephemeral"])
    assert pub(s_r) == x(v["init_remote_static"])
    m = v["messages"]
    sym, msg1 = ik_message1(x(v["init_prologue"]), s_i, e_i, pub(s_r), x(m[0]["payload"]))
    assert msg1 == x(m[0]["ciphertext"]), "cacophony message 0"
    p1, rs, msg2, h_r, k1, k2 = ik_respond(x(v["resp_prologue"]), s_r, e_r, msg1, x(m[1]["payload"]))
    assert p1 == x(m[0]["payload"]) and rs == pub(s_i) and msg2 == x(m[1]["ciphertext"]), "cacophony message 1"
    p2, h_i, j1, j2 = ik_read2(sym, s_i, e_i, msg2)
    assert p2 == x(m[1]["payload"]) and h_i == h_r == x(v["handshake_hash"]) and (j1, j2) == (k1, k2)
    n1 = n2 = 0
    for i, msg in enumerate(m[2:]):
        if i % 2 == 0:
            c, n1 = encrypt(k1, n1, b"", x(msg["payload"])), n1 + 1
        else:
            c, n2 = encrypt(k2, n2, b"", x(msg["payload"])), n2 + 1
        assert c == x(msg["ciphertext"]), f"cacophony transport message {i + 2}"


def device(seed_hex):
    pk, sk = b.crypto_sign_seed_keypair(bytes.fromhex(seed_hex))
    return {"seed": seed_hex, "pk": pk, "x_sk": b.crypto_sign_ed25519_sk_to_curve25519(sk),
            "x_pk": b.crypto_sign_ed25519_pk_to_curve25519(pk)}


def header(channel, sender, recipient, message_id, sent_at, kind, session_id, counter):
    return (bytes([2, channel]) + sender + recipient + message_id + struct.pack(">Q", sent_at) + bytes([kind])
            + session_id + struct.pack(">Q", counter))


def pad(p):
    n = max(256, (len(p) + 255) // 256 * 256)
    return p + b" " * (n - len(p))


def epoch_key(k0, counter):
    k = k0
    for _ in range(counter >> 10):
        k = rekey(k)
    return k


def build():
    cross = json.loads((ROOT / "Fixtures/crosscheck-v1.json").read_text())
    a = device(cross["identity_a"]["ed25519_seed"])  # initiator: a handset
    bb = device(cross["identity_b"]["ed25519_seed"])  # responder: its Homebase
    c = device("03" * 32)  # a third device, for the key-mismatch vector
    e_a = bytes.fromhex("a1" * 32)
    e_b = bytes.fromhex("b2" * 32)
    sid = bytes.fromhex("5e5510f1d0000001")
    t0 = 1764400000000
    ch = 1  # sync_delta: the two are siblings
    mid = lambda n: bytes([n]) * 16

    h1 = header(ch, a["pk"], bb["pk"], mid(0x11), t0, 1, sid, 0)
    sym, body1 = ik_message1(PROLOGUE, a["x_sk"], e_a, bb["x_pk"], h1)
    env1 = h1 + body1
    h2 = header(ch, bb["pk"], a["pk"], mid(0x22), t0 + 5, 2, sid, 0)
    p1, rs, body2, hh, k1, k2 = ik_respond(PROLOGUE, bb["x_sk"], e_b, body1, h2)
    assert p1 == h1 and rs == a["x_pk"]
    env2 = h2 + body2
    p2, hh_i, j1, j2 = ik_read2(sym, a["x_sk"], e_a, body2)
    assert p2 == h2 and hh_i == hh and (j1, j2) == (k1, k2)

    def transport(name, comment, frm, counter, message_id, sent_at, text):
        sender, recipient, k0 = (a, bb, k1) if frm == "initiator" else (bb, a, k2)
        hdr = header(ch, sender["pk"], recipient["pk"], message_id, sent_at, 3, sid, counter)
        k = epoch_key(k0, counter)
        env = hdr + encrypt(k, counter, hdr, pad(text.encode()))
        return {"name": name, "comment": comment, "from": frm, "counter": counter, "message_id": message_id.hex(),
                "sent_at_ms": sent_at, "plaintext_utf8": text, "epoch_key": k.hex(), "envelope": env.hex()}

    req = '{"type":"infer.request","id":"7a1c0e36-6a53-4b8e-9b7e-2f9c3d1e8a01","model":"llama3.2:3b",' \
          '"messages":[{"role":"user","content":"Why is the sky blue?"}]}'
    transports = [
        transport("request", "the handset's first transport message: counter 0, epoch 0", "initiator", 0,
                  mid(0x31), t0 + 10, req),
        transport("accept", "the Homebase's first: its own direction's counter 0", "responder", 0, mid(0x41),
                  t0 + 12, '{"type":"infer.accept","id":"7a1c0e36-6a53-4b8e-9b7e-2f9c3d1e8a01","model":"llama3.2:3b"}'),
        transport("chunk_0", "counter 1", "responder", 1, mid(0x42), t0 + 13,
                  '{"type":"infer.chunk","id":"7a1c0e36-6a53-4b8e-9b7e-2f9c3d1e8a01","seq":0,"text":"Rayleigh"}'),
        transport("chunk_epoch_1", "counter 1024: the first message under REKEY(k0) (epoch 1)", "responder", 1024,
                  mid(0x43), t0 + 14,
                  '{"type":"infer.chunk","id":"7a1c0e36-6a53-4b8e-9b7e-2f9c3d1e8a01","seq":1023,"text":" scattering"}'),
    ]

    # Receiver vectors: each starts from its own `state` (never from the vectors before it): the handshake above
    # completed on both sides at t0 ("established") or only sent by the initiator ("initiation_pending"), then
    # the named transport messages (of `transport` or `setup_transport`) opened by the receiver in order at t0, then
    # the vector's envelope at the state's now_ms. The sender is a sibling (channel 1).
    def tamper(env_hex, offset):
        env = bytearray(bytes.fromhex(env_hex))
        env[offset] ^= 0x01
        return env.hex()

    def seal(frm, counter, message_id, sent_at, plaintext, channel=ch, padded=True):
        sender, recipient, k0 = (a, bb, k1) if frm == "initiator" else (bb, a, k2)
        hdr = header(channel, sender["pk"], recipient["pk"], message_id, sent_at, 3, sid, counter)
        return hdr + encrypt(epoch_key(k0, counter), counter, hdr, pad(plaintext) if padded else plaintext)

    # Epoch 127 reached from epoch 0 in steps of at most 8 (§7.3), for the reject_after vectors.
    walk = [8 * k for k in range(1, 16)] + [127]
    setup = []
    for epoch in walk:
        text = '{"type":"infer.chunk","id":"7a1c0e36-6a53-4b8e-9b7e-2f9c3d1e8a01","seq":%d,"text":"."}' % (epoch << 10)
        env = seal("responder", epoch << 10, mid(0x50), t0 + 20, text.encode())
        setup.append({"name": f"epoch_{epoch}", "from": "responder", "counter": epoch << 10,
                      "plaintext_utf8": text, "envelope": env.hex()})
    walked = [x["name"] for x in setup]
    cancel = b'{"type":"infer.cancel","id":"7a1c0e36-6a53-4b8e-9b7e-2f9c3d1e8a01"}'

    chunk0 = transports[2]["envelope"]
    other_sid = header(ch, bb["pk"], a["pk"], mid(0x44), t0 + 15, 3, bytes(8), 2) + bytes(272)
    h_c = header(ch, a["pk"], bb["pk"], mid(0x12), t0, 1, bytes.fromhex("5e5510f1d0000002"), 0)
    _, body_c = ik_message1(PROLOGUE, c["x_sk"], e_a, bb["x_pk"], h_c)
    h_x = header(ch, a["pk"], bb["pk"], mid(0x13), t0, 1, bytes.fromhex("5e5510f1d0000003"), 0)
    _, body_x = ik_message1(PROLOGUE, a["x_sk"], e_a, bb["x_pk"], h_x)
    h_n = header(ch, a["pk"], bb["pk"], mid(0x14), t0, 1, bytes.fromhex("5e5510f1d0000004"), 1)
    _, body_n = ik_message1(PROLOGUE, a["x_sk"], e_a, bb["x_pk"], h_n)
    h_r = header(ch, bb["pk"], a["pk"], mid(0x23), t0 + 5, 2, sid, 1)
    _, _, body_r, _, _, _ = ik_respond(PROLOGUE, bb["x_sk"], e_b, body1, h_r)
    far = seal("responder", 1024 * 10, mid(0x45), t0 + 16, cancel)
    erase_ms = 11 * 60 * 1000
    done = {"handshake": "established", "opened": ["accept"], "now_ms": t0 + 1000}
    fresh = {"handshake": "established", "opened": [], "now_ms": t0 + 1000}
    pending = {"handshake": "initiation_pending", "opened": [], "now_ms": t0 + 1000}
    receiver = [
        {"name": "chunk_0_opens", "receiver": "initiator", "state": done, "envelope": chunk0, "expect": "valid",
         "comment": "a transport message opens under the session"},
        {"name": "header_byte_changed", "receiver": "initiator", "state": done, "envelope": tamper(chunk0, 90 + 1 + 7),
         "expect": "no_session", "comment": "the last byte of session_id flipped: no session matches it"},
        {"name": "counter_changed", "receiver": "initiator", "state": done, "envelope": tamper(chunk0, 106),
         "expect": "open_failed",
         "comment": "the counter is the AEAD nonce and additional data: a changed one does not open"},
        {"name": "sent_at_changed", "receiver": "initiator", "state": done, "envelope": tamper(chunk0, 89),
         "expect": "open_failed", "comment": "every header byte is additional data"},
        {"name": "ciphertext_changed", "receiver": "initiator", "state": done, "envelope": tamper(chunk0, 200),
         "expect": "open_failed", "comment": "the ciphertext is authenticated"},
        {"name": "unknown_session", "receiver": "initiator", "state": done, "envelope": other_sid.hex(),
         "expect": "no_session", "comment": "a transport message for a session id the receiver does not hold"},
        {"name": "epoch_too_far", "receiver": "initiator",
         "state": {"handshake": "established", "opened": ["accept", "chunk_0", "chunk_epoch_1"], "now_ms": t0 + 1000},
         "envelope": far.hex(), "expect": "open_failed",
         "comment": "counter 10240 is epoch 10, more than 8 ahead of the newest epoch opened (1): not derived"},
        {"name": "epoch_8_ahead_before_any_opened", "receiver": "initiator", "state": fresh,
         "envelope": seal("responder", 8 << 10, mid(0x46), t0 + 16, cancel).hex(), "expect": "valid",
         "comment": "before any message opened, the newest epoch is 0: epoch 8 is derived"},
        {"name": "epoch_9_ahead_before_any_opened", "receiver": "initiator", "state": fresh,
         "envelope": seal("responder", 9 << 10, mid(0x47), t0 + 16, cancel).hex(), "expect": "open_failed",
         "comment": "epoch 9 is more than 8 ahead of epoch 0"},
        {"name": "epoch_erased", "receiver": "initiator",
         "state": {"handshake": "established", "opened": ["accept", "chunk_epoch_1", "epoch_8"], "now_ms": t0 + 1000},
         "envelope": chunk0, "expect": "open_failed",
         "comment": "epoch 0 was erased once epoch 8 opened (the receiver keeps the newest and the one before)"},
        {"name": "counter_below_reject_after", "receiver": "initiator",
         "state": {"handshake": "established", "opened": walked, "now_ms": t0 + 1000},
         "envelope": seal("responder", 131071, mid(0x48), t0 + 21, cancel).hex(), "expect": "valid",
         "comment": "counter 131,071 (epoch 127): the last a session carries"},
        {"name": "counter_at_reject_after", "receiver": "initiator",
         "state": {"handshake": "established", "opened": walked, "now_ms": t0 + 1000},
         "envelope": seal("responder", 131072, mid(0x49), t0 + 21, cancel).hex(), "expect": "open_failed",
         "comment": "counter 131,072 is reject_after: no sender uses it, a receiver does not try it"},
        {"name": "unpadded_transport", "receiver": "initiator", "state": done,
         "envelope": seal("responder", 2, mid(0x4a), t0 + 16, cancel, padded=False).hex(),
         "expect": "malformed_plaintext", "comment": "a v2 plaintext must be padded to a multiple of 256 bytes"},
        {"name": "transport_on_another_channel", "receiver": "initiator", "state": done,
         "envelope": seal("responder", 2, mid(0x4b), t0 + 16, cancel, channel=2).hex(), "expect": "no_session",
         "comment": "sealed under the session's key, but on channel 2: a session is bound to its handshake's channel"},
        {"name": "session_erased_after_eleven_minutes", "receiver": "initiator",
         "state": {"handshake": "established", "opened": ["accept"], "now_ms": t0 + erase_ms}, "envelope": chunk0,
         "expect": "no_session", "comment": "erase_after counts from when the receiver established the session (t0)"},
        {"name": "session_held_until_eleven_minutes", "receiver": "initiator",
         "state": {"handshake": "established", "opened": ["accept"], "now_ms": t0 + erase_ms - 1},
         "envelope": chunk0, "expect": "valid", "comment": "one millisecond before erase_after"},
        {"name": "unknown_kind", "receiver": "initiator", "state": done, "envelope": (bytes.fromhex(chunk0)[:90]
         + b"\x04" + bytes.fromhex(chunk0)[91:]).hex(), "expect": "unknown_version", "comment": "kind 4 does not exist"},
        {"name": "truncated_initiation", "receiver": "responder", "state": fresh, "envelope": env1[:-1].hex(),
         "expect": "truncated", "comment": "message 1 has a fixed size"},
        {"name": "initiation_static_not_sender", "receiver": "responder", "state": fresh, "envelope": (h_c + body_c).hex(),
         "expect": "handshake_failed", "comment": "message 1 made with another device's static key, sent as A"},
        {"name": "initiation_session_id_in_use", "receiver": "responder", "state": fresh, "envelope": env1.hex(),
         "expect": "handshake_failed", "comment": "the session id of the established session, from the same peer"},
        {"name": "initiation_counter_not_zero", "receiver": "responder", "state": fresh, "envelope": (h_n + body_n).hex(),
         "expect": "open_failed", "comment": "message 1 with counter 1 (its payload is that header): open_failed"},
        {"name": "second_initiation_opens", "receiver": "responder", "state": fresh, "envelope": (h_x + body_x).hex(),
         "expect": "valid", "comment": "a new initiation from A with a new session id: a second session"},
        {"name": "response_opens_when_pending", "receiver": "initiator", "state": pending, "envelope": env2.hex(),
         "expect": "valid", "comment": "message 2 for the initiation the receiver sent"},
        {"name": "response_counter_not_zero", "receiver": "initiator", "state": pending, "envelope": (h_r + body_r).hex(),
         "expect": "no_session", "comment": "message 2 with counter 1 (its payload is that header): no_session"},
        {"name": "response_without_initiation", "receiver": "initiator", "state": fresh, "envelope": env2.hex(),
         "expect": "no_session", "comment": "message 2 again: the initiation it answers is over"},
    ]
    return {
        "about": "Protocol v2 envelopes (Protocol/envelope.md section 7), computed independently by "
                 "tools/vectors/envelope_v2.py (PyNaCl). Identities A (initiator) and B (responder) are "
                 "identity_a and identity_b of crosscheck-v1.json; ephemerals, ids and times are fixed.",
        "protocol_name": NAME.decode(),
        "prologue": PROLOGUE.hex(),
        "initiator_seed": a["seed"], "responder_seed": bb["seed"],
        "initiator_ephemeral": e_a.hex(), "responder_ephemeral": e_b.hex(),
        "session_id": sid.hex(), "channel": ch,
        "initiation": {"message_id": mid(0x11).hex(), "sent_at_ms": t0, "envelope": env1.hex()},
        "response": {"message_id": mid(0x22).hex(), "sent_at_ms": t0 + 5, "envelope": env2.hex()},
        "handshake_hash": hh.hex(),
        "key_initiator_to_responder": k1.hex(), "key_responder_to_initiator": k2.hex(),
        "transport": transports,
        "setup_transport": setup,
        "receiver_state": "Each receiver vector starts from its own state, never from the vectors before it: "
                          "handshake 'established' (the handshake above, completed on both sides at the "
                          "initiation's sent_at_ms, which is when each side's session was established) or "
                          "'initiation_pending' (the initiator sent the initiation and received nothing); then the "
                          "receiver opened the messages named in 'opened' (of transport or setup_transport), in "
                          "order, at that same time; then it receives the vector's envelope at now_ms. The sender is a sibling.",
        "receiver_vectors": receiver,
    }


class Receiver:
    """An independent v2 receiver (envelope.md §7.2-§7.7, rule 8 with the header rules it depends on), to read each
    receiver vector's state and check its expected verdict."""

    ERASE_AFTER_MS, HANDSHAKE_TIMEOUT_MS, REJECT_AFTER_MESSAGES = 11 * 60 * 1000, 10_000, 131_072
    SIZES = {1: 203, 2: 155}

    def __init__(self, me, peer, doc, role, state):
        x = bytes.fromhex
        self.me, self.peer, self.role = me, peer, role
        self.sessions, self.pending = [], None
        sid, ch = x(doc["session_id"]), doc["channel"]
        t0 = doc["initiation"]["sent_at_ms"]
        if state["handshake"] == "established":
            k = x(doc["key_responder_to_initiator"] if role == "initiator" else doc["key_initiator_to_responder"])
            self.sessions.append({"id": sid, "channel": ch, "at": t0, "newest": (0, k), "prev": None})
        elif state["handshake"] == "initiation_pending":
            assert role == "initiator"
            e = x(doc["initiator_ephemeral"])
            h1 = bytes.fromhex(doc["initiation"]["envelope"])[:107]
            sym, _ = ik_message1(PROLOGUE, me["x_sk"], e, peer["x_pk"], h1)
            self.pending = {"id": sid, "channel": ch, "at": t0, "sym": sym, "e": e}
        else:
            raise ValueError(f"unknown handshake state {state['handshake']!r}")
        named = {t["name"]: t for t in doc["transport"] + doc.get("setup_transport", [])}
        for name in state["opened"]:
            verdict = self.receive(x(named[name]["envelope"]), t0)
            assert verdict == "valid", f"state message {name}: {verdict}"

    def receive(self, env, now):
        if len(env) < 107:
            return "truncated"
        version, channel, kind = env[0], env[1], env[90]
        if version != 2 or kind not in (1, 2, 3):
            return "unknown_version"
        body = env[107:]
        if (kind in self.SIZES and len(body) != self.SIZES[kind]) or (kind == 3 and len(body) < 16):
            return "truncated"
        if env[2:34] != self.peer["pk"] or env[34:66] != self.me["pk"] or channel not in (1, 2):
            return "not_entitled"
        sid, counter = env[91:99], struct.unpack(">Q", env[99:107])[0]
        hdr = env[:107]
        if kind == 1:
            if counter != 0:
                return "open_failed"
            if any(s["id"] == sid for s in self.sessions) or (self.pending and self.pending["id"] == sid):
                return "handshake_failed"
            try:
                p1, rs, _, _, k1, k2 = ik_respond(PROLOGUE, self.me["x_sk"], bytes([0xB2]) * 32, body, bytes(107))
            except Exception:
                return "open_failed"
            if p1 != hdr:
                return "open_failed"
            if rs != self.peer["x_pk"]:
                return "handshake_failed"
            self.sessions.append({"id": sid, "channel": channel, "at": now, "newest": (0, k1), "prev": None})
            return "valid"
        if kind == 2:
            p = self.pending
            if (counter != 0 or p is None or p["id"] != sid or p["channel"] != channel
                    or now - p["at"] >= self.HANDSHAKE_TIMEOUT_MS):
                return "no_session"
            self.pending = None
            try:
                p2, _, _, k2 = ik_read2(p["sym"], self.me["x_sk"], p["e"], body)
            except Exception:
                return "open_failed"
            if p2 != hdr:
                return "open_failed"
            self.sessions.append({"id": sid, "channel": channel, "at": now, "newest": (0, k2), "prev": None})
            return "valid"
        found = [s for s in self.sessions
                 if s["id"] == sid and s["channel"] == channel and now - s["at"] < self.ERASE_AFTER_MS]
        if not found:
            return "no_session"
        s = found[0]
        if counter >= self.REJECT_AFTER_MESSAGES:
            return "open_failed"
        epoch = counter >> 10
        (newest, k), prev = s["newest"], s["prev"]
        try:
            if epoch == newest or (prev and epoch == prev[0]):
                plaintext = decrypt(k if epoch == newest else prev[1], counter, hdr, body)
            elif newest < epoch <= newest + 8:
                keys = [k]
                for _ in range(epoch - newest):
                    keys.append(rekey(keys[-1]))
                plaintext = decrypt(keys[-1], counter, hdr, body)
                s["newest"], s["prev"] = (epoch, keys[-1]), (epoch - 1, keys[-2])
            else:
                return "open_failed"
        except Exception:
            return "open_failed"
        if not plaintext or len(plaintext) % 256:
            return "malformed_plaintext"
        return "valid"


def verify(doc):
    """Runs every receiver vector of `doc` from the state it states; returns the names whose verdict differs."""
    a, bb = device(doc["initiator_seed"]), device(doc["responder_seed"])
    wrong = []
    for r in doc["receiver_vectors"]:
        me, peer = (a, bb) if r["receiver"] == "initiator" else (bb, a)
        got = Receiver(me, peer, doc, r["receiver"], r["state"]).receive(bytes.fromhex(r["envelope"]),
                                                                         r["state"]["now_ms"])
        if got != r["expect"]:
            wrong.append(f"{r['name']}: got {got}, expected {r['expect']}")
    return wrong


def main():
    check_cacophony()
    doc = build()
    wrong = verify(doc)
    assert not wrong, wrong
    text = json.dumps(doc, indent=2) + "\n"
    path = ROOT / "Fixtures/envelope-v2-vectors.json"
    if "--check" in sys.argv[1:]:
        # The file's receiver vectors, each from the state it states, through the independent receiver above.
        wrong = verify(json.loads(path.read_text()))
        if wrong:
            print(f"{path}: receiver vectors disagree: {wrong}", file=sys.stderr)
            sys.exit(1)
        if path.read_text() != text:
            print(f"{path} differs from what {__file__} computes", file=sys.stderr)
            sys.exit(1)
        print("envelope-v2-vectors.json: matches; every receiver vector holds from its state")
        return
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
