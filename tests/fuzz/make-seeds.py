#!/usr/bin/env python3
"""make-seeds.py - writes the seed corpora under tests/fuzz/corpus/ (run
from anywhere; the files are checked in, rerun only when the input formats
of the targets change).  Formats: see the comment at the top of each target."""
import os
import socket
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
C = os.path.join(HERE, "corpus")

WIRE_MAGIC = 0x52534852
FR_HELLO, FR_WRITE_IMM, FR_SEND = 1, 2, 3
CONNECT, ACCEPT, REFUSE, FIN, RESET, CREDIT, PING = range(1, 8)
(M_HELLO, M_FORK, M_CHILD, M_LISTEN, M_CONNECT, M_ACCEPT, M_RELEASE, M_SHUTDOWN, M_STAT,
 M_PORTCHECK) = range(1, 11)


def save(target, name, data):
    d = os.path.join(C, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(t, ln, imm=0, rkey=0, raddr=0):
    return struct.pack(">BBHIIIQ", t, 0, 0, ln, imm, rkey, raddr)


def hello(node=0x1122334455667788):
    return struct.pack(">IHHQII", WIRE_MAGIC, 1, 0, node, 64 << 10, 0)


def imm(sid, gen):
    return (sid << 12) | (gen & 0xfff)


def ctl(op, family=0, port=0, dst=0, src=0, ring=0, val=0, a=b"", b=b"", sport=0, reason=0, rkey=0):
    return struct.pack(">BBHIIIQ16s16sHHI", op, family, port, dst, src, ring, val, a.ljust(16, b"\0"),
                       b.ljust(16, b"\0"), sport, reason, rkey)


ip = socket.inet_aton

# ---- fuzz-frame ----
save("fuzz-frame", "hello-frame", frame(FR_HELLO, 24) + hello())
save("fuzz-frame", "hello", hello())
save("fuzz-frame", "write-frame", frame(FR_WRITE_IMM, 4096, imm(1, 1), 0, 8192))
conn = ctl(CONNECT, socket.AF_INET, 80, 0, imm(3, 1), 131072, 0, ip("10.0.0.1"), ip("10.0.0.2"), 40000)
save("fuzz-frame", "send-connect", frame(FR_SEND, 64) + conn)
save("fuzz-frame", "ctl-connect6", ctl(CONNECT, socket.AF_INET6, 443, 0, imm(7, 2), 4096, 0,
                                       b"\0" * 10 + b"\xff\xff" + ip("10.0.0.1"), b"", 1234))
save("fuzz-frame", "ctl-accept", ctl(ACCEPT, 0, 0, imm(3, 1), imm(9, 1), 65536, 0x7f0000000000, rkey=17))
save("fuzz-frame", "ctl-refuse", ctl(REFUSE, dst=imm(3, 1), reason=1))
save("fuzz-frame", "ctl-fin", ctl(FIN, dst=imm(3, 1), src=imm(9, 1)))
save("fuzz-frame", "ctl-reset", ctl(RESET, dst=imm(3, 1)))
save("fuzz-frame", "ctl-credit", ctl(CREDIT, dst=imm(3, 1), src=imm(9, 1), val=12345))
save("fuzz-frame", "ctl-ping", ctl(PING))
save("fuzz-frame", "stream", frame(FR_HELLO, 24) + hello() + frame(FR_SEND, 64) + conn +
     frame(FR_WRITE_IMM, 5, imm(3, 1)) + b"hello")


# ---- fuzz-hub-requests: byte 0 set-up, then 100-byte steps ----
def sin(addr="0.0.0.0", port=0):
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + ip(addr) + b"\0" * 20


def req(op, slot=0, gen=0, pid=0, arg=0, rx=0, tx=0, token=0, addr=None, local=None):
    return struct.pack("<IIIiiIII", op, slot, gen, pid, arg, rx, tx, 0) + struct.pack("<Q", token) + \
        (addr or bytes(28)) + (local or bytes(28))


def step(action, idx=0, flags=0, aux=0, body=b""):
    assert len(body) <= 96
    return bytes([action, idx, flags, aux]) + body.ljust(96, b"\0")


R, GONE, NEWP, SETTLE, CTL, WRITE, POLL, LINK, LINKUP, LINKFAIL, WRITABLE, FAULT, IO, ANSWER, CRED = range(15)

body_connect_in = ctl(CONNECT, socket.AF_INET, 80, 0, imm(0x100, 1), 16384, 0, ip("10.0.0.1"), ip("10.0.0.2"),
                      5000)
accept_ans = struct.pack("<IB3xQI", imm(0x102, 1), 2, 0, 0)  # src, ring 16 KiB

lcar = bytes([0x04])  # soft, 2 processes
lcar += step(R, 0, 16, 0, req(M_LISTEN, arg=8, rx=16384, tx=16384))
lcar += step(LINK, 0, 0, 0)                                       # peer 10.0.0.2, up
lcar += step(CTL, 0, 4, 0, body_connect_in)                       # peer connects to the listener
lcar += step(R, 0, 1, 0, req(M_ACCEPT))                           # process 0 accepts
lcar += step(R, 1, 16, 0, req(M_CONNECT, rx=16384, tx=16384))     # process 1 connects to 10.0.0.2:80
lcar += step(ANSWER, 0, 0, 0, accept_ans)                         # the peer accepts
lcar += step(IO, 0, 1, 1, struct.pack("<I", 3000))               # data out of the accepted socket
lcar += step(POLL, 0, 0, 15)
lcar += step(CRED, 0, 1, 1)
lcar += step(WRITE, 0, 7, 1, struct.pack("<IIQI", 0, 0, 0, 700))  # the peer writes to it
lcar += step(POLL, 0, 0, 15)
lcar += step(IO, 0, 1, 1, struct.pack("<I", 0))                   # read, return credit
lcar += step(R, 1, 1, 0, req(M_RELEASE))
lcar += step(R, 0, 1, 1, req(M_RELEASE))
lcar += step(CTL, 0, 3, 1, ctl(FIN, dst=1, src=imm(0x100, 1)))
lcar += step(POLL, 0, 0, 15)
lcar += step(R, 0, 1, 0, req(M_RELEASE))
save("fuzz-hub-requests", "listen-connect-accept-release", lcar)

hc = bytes([0x00])
hc += step(NEWP, 0, 1)                                            # a process without a pool
hc += step(R, 1, 0, 0, req(M_HELLO, pid=4242))
hc += step(R, 1, 16, 1, req(M_CONNECT))                           # new outgoing link to 10.0.0.3
hc += step(LINKUP, 0, 0, 5)
hc += step(ANSWER, 0, 0, 0, accept_ans)
hc += step(IO, 0, 0, 0, struct.pack("<I", 100))
hc += step(POLL, 0, 0, 15)
hc += step(R, 1, 1, 0, req(M_SHUTDOWN, arg=1))
hc += step(R, 0, 4, 1, req(M_FORK))                                # process 0 asks to fork process 1: refused
hc += step(R, 1, 0, 0, req(M_PORTCHECK, addr=sin("10.0.0.1", 80)))
hc += step(GONE, 1)
hc += step(SETTLE)
save("fuzz-hub-requests", "hello-connect", hc)

vb = bytes([0x07])  # auto, verbs up, 2 processes
vb += step(R, 0, 16, 0, req(M_LISTEN, arg=0))
vb += step(LINK, 0, 1, 1)                                         # verbs link, peer 10.0.0.3
vb += step(CTL, 0, 4, 0, body_connect_in)
vb += step(CTL, 0, 4, 0, body_connect_in[:8] + struct.pack(">I", imm(0x101, 1)) + body_connect_in[12:])
vb += step(R, 0, 1, 0, req(M_ACCEPT))
vb += step(R, 0, 1, 0, req(M_ACCEPT))
vb += step(R, 1, 16, 1, req(M_CONNECT))
vb += step(ANSWER, 0, 0, 0, accept_ans[:8] + struct.pack("<Q", 0x7f0000000000))
vb += step(FAULT, 0, 0, 1)
vb += step(IO, 0, 0, 2, struct.pack("<I", 5000))
vb += step(FAULT, 0, 0, 0)
vb += step(WRITABLE, 0)
vb += step(POLL, 0, 0, 15)
vb += step(R, 0, 0, 0, req(M_STAT, arg=1))
vb += step(LINKFAIL, 0)
save("fuzz-hub-requests", "verbs-listen-accept-linkfail", vb)


# ---- fuzz-arena: 16-byte steps op, idx, a, b, x, v ----
def a(op, idx=0, aa=0, b=0, x=0, v=0):
    return struct.pack("<BBBBIQ", op, idx, aa, b, x, v)


save("fuzz-arena", "setup-only", b"")
io = a(15, 1, 0, 0, 20000) + a(8, 0, 0, 0, 15) + a(7, 1, 1) + a(15, 1, 0, 0, 20000) + a(8, 0, 0, 0, 15) + \
    a(9, 3, 0, 0, 3000) + a(8, 0, 0, 0, 15) + a(15, 3, 1) + a(15, 2, 0, 0, 9000) + a(8, 0, 0, 0, 15) + \
    a(7, 2, 1) + a(12, 1, 0, 0) + a(13, 1, 0) + a(8, 0, 0, 0, 15)
save("fuzz-arena", "data-both-ways", io)
scr = a(3, 1, 4, 0, 0x7fffffff) + a(5, 1, 1, 0, 1) + a(3, 2, 2, 0, 0, 1 << 40) + a(5, 2, 1, 0, 2) + \
    a(4, 0, 0, 0, 0, 0xffffffffffffffff) + a(1, 3, 20, 0, 0xffffffff) + a(6, 3) + a(6, 3, 1) + \
    a(0, 4, 48, 0, 0, 0xdeadbeef) + a(15, 4, 0, 0, 100)
save("fuzz-arena", "scribble-counters", scr)
hdr = a(2, 0, 56, 0, 0, 1) + a(2, 0, 64, 0, 0, 0xffff) + a(14, 0, 0, 0, 1) + a(16, 0, 0, 1) + a(20, 0)
save("fuzz-arena", "scribble-header-then-new-socket", hdr)
# not a seed: the reproducer of the hub trusting the arena header's slots_off
save("../crashes", "fuzz-arena-slots-off", a(2, 0, 24, 0, 0, 0x100000000) + a(14, 0, 0, 0, 1))
rel = a(10, 0, 1) + a(15, 1, 0, 0, 30000) + a(10, 0, 0) + a(11, 0) + a(12, 1, 1, 0) + a(12, 1, 0, 0) + \
    a(10, 0, 2) + a(15, 4, 0, 0, 10) + a(17, 0, 0, 1) + a(18, 0) + a(19)
save("fuzz-arena", "eagain-release-fail", rel)
# not a seed: a socket freed under pool_doorbells (hsock_tx fails the link, hsock_credit follows)
save("../crashes", "fuzz-arena-doorbell-uaf",
     a(15, 1, 0, 0, 30000) + a(8, 0, 0, 0, 15) + a(15, 1, 0, 0, 30000) + a(12, 1, 0, 0) + a(10, 0, 1) +
     a(7, 1, 1) + a(10, 0, 2) + a(5, 1, 1, 0, 3))
