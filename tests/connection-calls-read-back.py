#!/usr/bin/env python3
"""connection-calls-read-back.py PORT FILE: what a program reads back from
the calls it makes on connections to its own listener on 127.0.0.1, one
line each: a read after shutdown(SHUT_RD) and FIONREAD; sendfile from FILE
(written here) at an offset and at the file's; TCP_CORK and MSG_MORE; a
peer's close (readiness, getpeername, TCP_INFO's state, sends until
EPIPE); SO_RCVBUF and SO_SNDBUF read back; SIOCOUTQ of bytes the peer holds
unread; nonblocking sends of 1 MiB the peer does not read yet (loopback's
send buffer takes a few MiB before EAGAIN); MSG_PEEK and MSG_WAITALL; poll of a listener and of both ends of a
shutdown(SHUT_RDWR); connect, bind, listen and accept on a connection (made,
accepted, or under way) and bind on a listener; then a dual-stack
listener's names for a client of each family, option defaults of a
connection and an accepted one, zero-length and vector sends and
receives (recvmsg and recvfrom give no address), a second shutdown, the
TCP states (TCP_INFO) and names of a connection shut down one way, then
both (closed: getpeername fails with ENOTCONN), a reset, and calls on a socket never connected.  The same lines on kernel
TCP as on any transport that behaves as it does.  Waits for what it looks
at (poll), never for a time, except between the sends to a closed peer."""
import errno
import fcntl
import os
import select
import socket
import struct
import sys
import termios
import time

P = int(sys.argv[1])


def say(*a):
    print(*a, flush=True)


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def wait_in(s, ms=10000):
    p = select.poll()
    p.register(s, select.POLLIN)
    return bool(p.poll(ms))


def q(s, req):
    return struct.unpack("i", fcntl.ioctl(s, req, b"\0" * 4))[0]


def tryit(name, f):
    """NAME and what F returned ("ok" for nothing), or NAME: and the errno"""
    try:
        r = f()
        say(name, "ok" if r is None else r)
    except OSError as x:
        say(name + ":", err(x))


l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(("127.0.0.1", P)); l.listen(8)


def pair():
    """a connection to the listener l of the moment, and its accepted end"""
    c = socket.create_connection(("127.0.0.1", l.getsockname()[1]))
    a, _ = l.accept()
    return c, a


c, a = pair()
a.shutdown(socket.SHUT_RD); c.sendall(b"x" * 10)
tryit("read after SHUT_RD:", lambda: a.recv(100))
say("FIONREAD after it", q(a, termios.FIONREAD))
c.close(); a.close()
c, a = pair()
fn = sys.argv[2]; open(fn, "wb").write(os.urandom(100000))
fd = os.open(fn, os.O_RDONLY)
n = os.sendfile(c.fileno(), fd, 1000, 50000); say("sendfile", n, "file offset", os.lseek(fd, 0, os.SEEK_CUR))
n2 = os.sendfile(c.fileno(), fd, None, 3000); say("sendfile at the offset", n2, "file offset", os.lseek(fd, 0, os.SEEK_CUR))
got = b""
while len(got) < n + n2: got += a.recv(65536)
data = open(fn, "rb").read()
say("sendfile bytes as the file's", got == data[1000:1000 + n] + data[:n2])
os.close(fd); c.close(); a.close()
c, a = pair()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1); c.send(b"ab"); c.send(b"cd", socket.MSG_MORE)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
got = b""
while len(got) < 4: got += a.recv(10)
say("TCP_CORK, MSG_MORE:", got, "cork now", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
c.close(); a.close()
c, a = pair()
a.close(); say("peer closed: readable", wait_in(c))
say("getpeername", c.getpeername()[0], "recv", c.recv(10), "TCP_INFO state", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)[0])
sent, e = 0, None
for i in range(200):
    try: c.send(b"x"); sent += 1
    except OSError as x: e = err(x); break
    time.sleep(0.01)
say("sends to a closed peer before the error:", "one" if sent == 1 else "some" if sent else "none", "then", e)
tryit("getpeername after", lambda: c.getpeername()[0])
c.close()
c, a = pair()
for v in (1, 4096, 100000, 10**7):
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, v); c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, v)
    say("SO_RCVBUF, SO_SNDBUF set to", v, "read back", c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF), c.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
c.close(); a.close()
c, a = pair()
c.sendall(b"z" * 1000); wait_in(a)
say("SIOCOUTQ", q(c, termios.TIOCOUTQ), "FIONREAD at the peer", q(a, termios.FIONREAD))
c.close(); a.close()
c, a = pair()
c.setblocking(False)
n = tot = c.send(b"w" * (1 << 20))
while True:
    try: tot += c.send(b"w" * (1 << 20))
    except BlockingIOError: break
say("nonblocking send of 1 MiB, the peer not reading:", n, "taken before EAGAIN:", "3 MiB or more" if tot >= 3 << 20 else tot)
got = 0
while got < tot: got += len(a.recv(1 << 20))
say("the peer reads them all", got == tot)
c.close(); a.close()
c, a = pair()
tryit("peek with nothing there", lambda: a.recv(10, socket.MSG_DONTWAIT | socket.MSG_PEEK))
c.send(b"hello"); c.shutdown(socket.SHUT_WR)
say("peek", a.recv(3, socket.MSG_PEEK), "MSG_WAITALL", a.recv(100, socket.MSG_WAITALL), "then", a.recv(10))
c.close(); a.close()
c = socket.create_connection(("127.0.0.1", P))
p = select.poll(); p.register(l, select.POLLIN | select.POLLOUT); say("listener with one queued", p.poll(10000))
a, _ = l.accept(); c.shutdown(socket.SHUT_RDWR)
p = select.poll(); p.register(c, select.POLLIN | select.POLLOUT | select.POLLRDHUP); say("after SHUT_RDWR", p.poll(0))
wait_in(a)
p = select.poll(); p.register(a, select.POLLIN | select.POLLOUT | select.POLLRDHUP); say("its peer", p.poll(0))
c.close(); a.close()
c, a = pair()
for name, f in (("connect again", lambda: c.connect(("127.0.0.1", P))), ("bind", lambda: c.bind(("127.0.0.1", 0))),
                ("listen", lambda: c.listen(1)), ("accept", lambda: c.accept()),
                ("bind on the accepted", lambda: a.bind(("127.0.0.1", 0))), ("listen on the accepted", lambda: a.listen(1)),
                ("bind on the listener", lambda: l.bind(("127.0.0.1", 0)))):
    tryit(name, f)
say("still a connection:", c.send(b"k"), a.recv(1))
c.close(); a.close()
c = socket.socket(); c.setblocking(False)
tryit("nonblocking connect", lambda: c.connect(("127.0.0.1", P)))
for name, f in (("bind while connecting", lambda: c.bind(("127.0.0.1", 0))), ("listen while connecting", lambda: c.listen(1))):
    tryit(name, f)
a, _ = l.accept(); c.close(); a.close()

# a dual-stack listener, a client of each family
try:
    l6 = socket.socket(socket.AF_INET6)
    l6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l6.bind(("::", P + 2))
    l6.listen(8)
except OSError:
    l6 = None
    say("no IPv6 here")
if l6:
    c = socket.create_connection(("127.0.0.1", P + 2)); a, pa = l6.accept()
    say("v4 client at a v6 listener: peer", pa[0], "local", a.getsockname()[0], "client sees", c.getpeername()[0], a.family == socket.AF_INET6)
    c.sendall(b"v4"); say("bytes", a.recv(2)); c.close(); a.close()
    c = socket.create_connection(("::1", P + 2)); a, pa = l6.accept()
    say("v6 client: peer", pa[0], "local", a.getsockname()[0], "client sees", c.getpeername()[0])
    c.sendall(b"v6"); say("bytes", a.recv(2)); c.close(); a.close()
    l6.close()
# a listener on every address: options, zero-length and vector calls,
# half-close, a reset, and calls on a socket never connected
l.close()
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", P + 1))
l.listen(8)
c, a = pair()
say("accepted at a wildcard listener: local", a.getsockname()[0], a.getsockname()[1] == P + 1)
for lvl, opt, name in ((socket.SOL_SOCKET, socket.SO_KEEPALIVE, "SO_KEEPALIVE"), (socket.IPPROTO_TCP, socket.TCP_NODELAY, "TCP_NODELAY"),
                       (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, "TCP_KEEPIDLE"), (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, "TCP_KEEPINTVL"),
                       (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, "TCP_KEEPCNT"), (socket.SOL_SOCKET, socket.SO_RCVLOWAT, "SO_RCVLOWAT"),
                       (socket.SOL_SOCKET, socket.SO_SNDLOWAT, "SO_SNDLOWAT"), (socket.IPPROTO_IP, socket.IP_TOS, "IP_TOS"),
                       (socket.IPPROTO_IP, socket.IP_TTL, "IP_TTL"), (socket.SOL_SOCKET, socket.SO_REUSEADDR, "SO_REUSEADDR"),
                       (socket.SOL_SOCKET, socket.SO_OOBINLINE, "SO_OOBINLINE"), (socket.IPPROTO_TCP, socket.TCP_QUICKACK, "TCP_QUICKACK"),
                       (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT"), (socket.SOL_SOCKET, socket.SO_PRIORITY, "SO_PRIORITY"),
                       (socket.SOL_SOCKET, socket.SO_MARK, "SO_MARK")):
    tryit("default " + name + " (connected, accepted)", lambda: (c.getsockopt(lvl, opt), a.getsockopt(lvl, opt)))
tryit("SO_LINGER", lambda: struct.unpack("ii", c.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8)))
tryit("TCP_CONGESTION", lambda: c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0"))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 77); c.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x10)
tryit("set TCP_KEEPIDLE 77, IP_TOS 0x10", lambda: (c.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE), c.getsockopt(socket.IPPROTO_IP, socket.IP_TOS)))
tryit("send 0 bytes", lambda: c.send(b""))
tryit("sendmsg of no iovec", lambda: c.sendmsg([]))
tryit("recv 0 bytes", lambda: a.recv(0))
c.sendmsg([b"a", b"", b"bc", b"d" * 5]); tryit("writev", lambda: a.recv(100))
c.sendall(b"xyz"); tryit("recvmsg into 2", lambda: a.recvmsg_into([bytearray(1), bytearray(5)]))
c.sendall(b"uv"); tryit("recvfrom", lambda: a.recvfrom(10))
tryit("shutdown SHUT_WR", lambda: c.shutdown(socket.SHUT_WR))
tryit("shutdown SHUT_WR again", lambda: c.shutdown(socket.SHUT_WR))
tryit("send after SHUT_WR", lambda: c.send(b"x"))
wait_in(a); tryit("peer reads", lambda: a.recv(10)); tryit("peer reads again", lambda: a.recv(10))
tryit("peer sends back", lambda: a.send(b"back")); wait_in(c); tryit("half-closed end reads", lambda: c.recv(10))
state = lambda s: s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)[0]
tryit("states, one way shut", lambda: (state(c), state(a), c.getpeername()[0], a.getpeername()[0]))
tryit("the peer shuts its way", lambda: a.shutdown(socket.SHUT_WR)); wait_in(c); tryit("then reads", lambda: c.recv(10))
tryit("states, both ways shut", lambda: (state(c), state(a)))
tryit("getpeername, both ways shut", lambda: c.getpeername()[0]); tryit("its peer's", lambda: a.getpeername()[0])
tryit("getsockname, both ways shut", lambda: c.getsockname()[0])
c.close(); a.close()
# a reset: the peer closes with SO_LINGER 0
c, a = pair()
a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); a.close()
wait_in(c)
tryit("SO_ERROR after a reset", lambda: c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
tryit("recv after a reset", lambda: c.recv(10))
tryit("recv again", lambda: c.recv(10))
tryit("send after a reset", lambda: c.send(b"x"))
tryit("getpeername after a reset", lambda: c.getpeername()[0])
c.close()
# a socket never connected
s = socket.socket()
tryit("shutdown unconnected", lambda: s.shutdown(socket.SHUT_RDWR))
tryit("getpeername unconnected", lambda: s.getpeername())
tryit("recv unconnected", lambda: s.recv(1))
tryit("send unconnected", lambda: s.send(b"x"))
s.close()
tryit("closed fd", lambda: os.write(c.fileno() if c.fileno() >= 0 else 999, b"x"))
say("end")
