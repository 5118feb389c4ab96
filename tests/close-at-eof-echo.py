#!/usr/bin/env python3
"""close-at-eof-echo.py server PORT | client ADDR PORT CONNS BYTES

An event-loop echo server written as many are: nonblocking sockets under
selectors, a read of up to 1 MiB, a send of what the socket takes, the
rest kept for the next writable event, and a close as soon as the
client's end of stream comes, dropping what it had not sent yet.  It
echoes everything only where its sends are taken whole, as kernel TCP's
loopback sends of a few MiB are (a send buffer of tcp_wmem's maximum).
The client runs CONNS connections at once, each in a thread that writes
BYTES in 64 KiB writes from a second thread and then shuts down its side,
while it reads the echo to the end; it prints one line: how many echoes
came back whole, and the lengths of the others."""
import selectors
import socket
import sys
import threading


def server(port):
    sel = selectors.DefaultSelector()
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port))
    l.listen(128)
    l.setblocking(False)
    sel.register(l, selectors.EVENT_READ, None)
    print("ready", flush=True)
    pend = {}
    while True:
        for key, ev in sel.select():
            if key.data is None:
                try:
                    c, _ = l.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                pend[c] = b""
                sel.register(c, selectors.EVENT_READ, "c")
                continue
            c = key.fileobj
            if ev & selectors.EVENT_READ:
                try:
                    b = c.recv(1 << 20)
                except (BlockingIOError, InterruptedError):
                    b = None
                except OSError:
                    b = b""
                if b == b"":  # end of stream: close, whatever is not sent yet
                    sel.unregister(c)
                    del pend[c]
                    c.close()
                    continue
                if b:
                    pend[c] += b
            if pend[c]:
                try:
                    n = c.send(pend[c])
                except BlockingIOError:
                    n = 0
                pend[c] = pend[c][n:]
            sel.modify(c, selectors.EVENT_READ | (selectors.EVENT_WRITE if pend[c] else 0), "c")


def one(addr, port, size, seed, out, i):
    data = bytes((seed * 7 + j * 13) & 0xFF for j in range(251)) * (size // 251 + 1)
    data = data[:size]
    s = socket.create_connection((addr, port))

    def write():
        for off in range(0, size, 65536):
            s.sendall(data[off:off + 65536])
        s.shutdown(socket.SHUT_WR)
    w = threading.Thread(target=write)
    w.start()
    got = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        got.append(b)
    w.join()
    s.close()
    got = b"".join(got)
    out[i] = "whole" if got == data else str(len(got))


def client(addr, port, conns, size):
    out = [None] * conns
    ts = [threading.Thread(target=one, args=(addr, port, size, i, out, i)) for i in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    short = sorted(x for x in out if x != "whole")
    print("whole", out.count("whole"), "short", " ".join(short) if short else "none", flush=True)


if sys.argv[1] == "server":
    server(int(sys.argv[2]))
else:
    client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
