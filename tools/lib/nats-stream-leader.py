#!/usr/bin/env python3
"""Prints the server name of a JetStream stream's leader: nats-stream-leader.py HOST:PORT STREAM.

Speaks the NATS text protocol directly (stdlib only): one STREAM.INFO request, the reply's cluster.leader."""
import json
import socket
import sys

host, port = sys.argv[1].rsplit(":", 1)
stream = sys.argv[2]
s = socket.create_connection((host, int(port)), timeout=5)
f = s.makefile("rb")
f.readline()  # INFO
s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}\r\n'
          b"SUB _LEADER.reply 1\r\n"
          b"PUB $JS.API.STREAM.INFO.%s _LEADER.reply 0\r\n\r\n" % stream.encode())
while True:
    parts = f.readline().split()
    if not parts:
        sys.exit("nats-stream-leader: connection closed")
    if parts[0] == b"PING":
        s.sendall(b"PONG\r\n")
    elif parts[0] in (b"MSG", b"HMSG"):
        body = f.read(int(parts[-1]) + 2)[:-2]
        if parts[0] == b"HMSG":
            body = body[int(parts[-2]):]
        reply = json.loads(body or b"{}")
        leader = reply.get("cluster", {}).get("leader")
        if not leader:
            sys.exit(f"nats-stream-leader: no leader in {reply}")
        print(leader)
        break
