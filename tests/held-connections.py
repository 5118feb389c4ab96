#!/usr/bin/env python3
"""held-connections.py HOST PORT RELEASE: 4 connections to an echo server,
each echoed once; a thread blocked in recv on the last; "held"; then, once
the file RELEASE exists, the first 3 echoed once more and the blocked recv
woken by a line of the peer's.  Prints what it saw, the same on kernel TCP
as on any transport that keeps its connections through what happens while
they are held (a hub restart, a hub's death)."""
import os
import socket
import sys
import threading
import time

host, port, release = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = [socket.create_connection((host, port)) for i in range(4)]


def echo(c, word):
    c.settimeout(60)
    c.sendall(word + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        b = c.recv(100)
        if not b:
            return "EOF"
        got += b
    return got.decode().strip()


for i, c in enumerate(conns):
    print(echo(c, b"before %d" % i), flush=True)
got = []
t = threading.Thread(target=lambda: got.append(conns[3].recv(100)))
t.start()
print("held", flush=True)
while not os.path.exists(release):
    time.sleep(0.1)
for i, c in enumerate(conns[:3]):
    print(echo(c, b"after %d" % i), flush=True)
conns[2].sendall(b"")
conns[3].sendall(b"wake\n")
t.join(30)
print("blocked recv got %r" % got)
print("end")
