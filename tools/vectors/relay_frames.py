#!/usr/bin/env python3
"""Writes Fixtures/relay-frames.json: byte-exact relay frame vectors (Protocol/relay.md §3).

Independent of the Swift codecs on purpose: the tests decode every `hex` and compare with `frame`, and
encode every valid `frame` and compare with `hex`. Values match ../shared/design/crosscheck-v1.json.
"""
import json, struct, sys

A = "79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664"
B = "da29e95b02e00ffa15645775fb1d2ba222a1943395eea06b94e2c057b7be69d0"
SIG = "4ce110f8eadd6ac5eacf01e5d9167aa79acdaf4ad4418a9c98f7af0c50aff7cf279d23898d94a009530fbc7557ba3da872a7a4727326ada848dec6045044d00d"
NONCE = "aa" * 32
T = 1764400000000

def h(*parts):
    return "".join(p if isinstance(p, str) else p.hex() for p in parts)

valid = [
    ("challenge", "CHALLENGE v1, crosscheck relay_auth.challenge_frame",
     h("01", "01", NONCE, struct.pack(">Q", T)),
     {"type": "challenge", "version": 1, "nonce": NONCE, "relay_time_ms": T}),
    ("auth_from_a", "AUTH by identity_a over the challenge nonce, crosscheck relay_auth.auth_frame_from_a",
     h("02", A, SIG), {"type": "auth", "pk": A, "sig": SIG}),
    ("ready_stored_2", "READY with 2 stored frames, max payload 256 KiB",
     h("03", struct.pack(">II", 2, 262144)), {"type": "ready", "stored": 2, "max_payload": 262144}),
    ("send_store", "SEND id 5 to B with STORE, payload 010203",
     h("10", struct.pack(">I", 5), B, "01", "010203"),
     {"type": "send", "send_id": 5, "recipient": B, "flags": 1, "payload": "010203"}),
    ("send_live_empty_payload", "SEND id 0 (no receipt wanted), live only, empty payload",
     h("10", struct.pack(">I", 0), B, "00"),
     {"type": "send", "send_id": 0, "recipient": B, "flags": 0, "payload": ""}),
    ("send_reserved_flag", "Decodes: reserved flag bits are judged by the relay (RECEIPT 6), not the codec",
     h("10", struct.pack(">I", 7), B, "02", "ff"),
     {"type": "send", "send_id": 7, "recipient": B, "flags": 2, "payload": "ff"}),
    ("deliver_live", "DELIVER from A, live (delivery_id 0)",
     h("11", A, struct.pack(">Q", 0), "0a0b"),
     {"type": "deliver", "sender": A, "delivery_id": 0, "payload": "0a0b"}),
    ("deliver_stored", "DELIVER from A, stored frame id 9, crosscheck frames.deliver_from_a_id_9_payload_010203",
     h("11", A, struct.pack(">Q", 9), "010203"),
     {"type": "deliver", "sender": A, "delivery_id": 9, "payload": "010203"}),
    ("ack_9", "ACK delivery 9", h("12", struct.pack(">Q", 9)), {"type": "ack", "delivery_id": 9}),
]
for status in range(7):
    valid.append((f"receipt_status_{status}", f"RECEIPT for send 5 with status {status}",
                  h("13", struct.pack(">I", 5), bytes([status])),
                  {"type": "receipt", "send_id": 5, "status": status}))
valid.append(("error_with_message", "ERROR 1008 with a UTF-8 message",
              h("7f", struct.pack(">H", 1008), "bad auth".encode()),
              {"type": "error", "code": 1008, "message": "bad auth"}))
valid.append(("error_empty_message", "ERROR with no message", h("7f", struct.pack(">H", 4002)),
              {"type": "error", "code": 4002, "message": ""}))

invalid = [
    ("empty", "no type byte", "", "empty"),
    ("unknown_type_00", "type 0x00 is not a v1 frame", "00", "unknownType"),
    ("unknown_type_14", "type 0x14 is not a v1 frame", h("14", struct.pack(">Q", 1)), "unknownType"),
    ("challenge_truncated", "CHALLENGE missing the last byte of relay_time_ms",
     h("01", "01", NONCE, struct.pack(">Q", T))[:-2], "truncated"),
    ("challenge_trailing", "CHALLENGE with one extra byte", h("01", "01", NONCE, struct.pack(">Q", T), "00"),
     "trailingBytes"),
    ("auth_short_sig", "AUTH with a 63-byte signature", h("02", A, SIG[:-2]), "truncated"),
    ("auth_trailing", "AUTH with a 65th signature byte", h("02", A, SIG, "00"), "trailingBytes"),
    ("ready_truncated", "READY with only stored", h("03", struct.pack(">I", 2)), "truncated"),
    ("send_no_flags", "SEND that ends after the recipient", h("10", struct.pack(">I", 5), B), "truncated"),
    ("send_short_recipient", "SEND with a 31-byte recipient", h("10", struct.pack(">I", 5), B[:-2]), "truncated"),
    ("deliver_truncated_id", "DELIVER with a 7-byte delivery_id", h("11", A, "00" * 7), "truncated"),
    ("ack_short", "ACK with 4 bytes", h("12", struct.pack(">I", 9)), "truncated"),
    ("ack_trailing", "ACK with 9 bytes", h("12", struct.pack(">Q", 9), "00"), "trailingBytes"),
    ("receipt_no_status", "RECEIPT without status", h("13", struct.pack(">I", 5)), "truncated"),
    ("receipt_trailing", "RECEIPT with an extra byte", h("13", struct.pack(">I", 5), "0000"), "trailingBytes"),
    ("error_no_code", "ERROR with one byte of code", h("7f", "03"), "truncated"),
    ("error_bad_utf8", "ERROR whose message is not UTF-8", h("7f", struct.pack(">H", 1008), "c328"), "invalidUTF8"),
]

out = {
    "about": "Relay frame vectors for protocol v1 (Protocol/relay.md §3). `hex` is one binary WebSocket message. "
             "Valid vectors give the decoded fields in `frame` (byte fields in hex); invalid ones give the codec "
             "error in `expect`. A relay closes a connection that sends an invalid frame with 1008.",
    "vectors": [{"name": n, "comment": c, "hex": x, "expect": "valid", "frame": f} for n, c, x, f in valid]
             + [{"name": n, "comment": c, "hex": x, "expect": e} for n, c, x, e in invalid],
}
json.dump(out, sys.stdout, indent=1)
print()
