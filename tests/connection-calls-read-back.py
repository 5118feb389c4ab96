#!/usr/bin/env python3
"""connection-calls-read-back.py PORT FILE: what a program reads back from
the calls it makes on connections to its own listener on 127.0.0.1, one
line each: a read after shutdown(SHUT_RD) and FIONREAD; sendfile from FILE
(written here) at an offset and at the file's; TCP_CORK and MSG_MORE; a
peer's close (readiness, getpeername, TCP_INFO's state, sends until
EPIPE); SO_RCVBUF and SO_SNDBUF read back; SIOCOUTQ of bytes the peer holds
unread; MSG_PEEK and MSG_WAITALL; poll of a listener and of both ends of a
shutdown(SHUT_RDWR); connect, bind, listen and accept on a connection (made,
accepted, or under way) and bind on a listener.  The same lines on kernel
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


l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); l.bind(("127.0.0.1", P)); l.listen(8)


def pair():
    c = socket.create_connection(("127.0.0.1", P))
    a, _ = l.accept()
    return c, a


c, a = pair()
a.shutdown(socket.SHUT_RD); c.sendall(b"x" * 10)
try: say("read after SHUT_RD:", a.recv(100))
except OSError as e: say("read after SHUT_RD:", err(e))
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
try: say("getpeername after", c.getpeername()[0])
except OSError as x: say("getpeername after:", err(x))
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
try: a.recv(10, socket.MSG_DONTWAIT | socket.MSG_PEEK)
except OSError as x: say("peek with nothing there:", err(x))
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
    try: f(); say(name, "ok")
    except OSError as x: say(name + ":", err(x))
say("still a connection:", c.send(b"k"), a.recv(1))
c.close(); a.close()
c = socket.socket(); c.setblocking(False)
try: c.connect(("127.0.0.1", P))
except OSError as x: say("nonblocking connect:", err(x))
for name, f in (("bind while connecting", lambda: c.bind(("127.0.0.1", 0))), ("listen while connecting", lambda: c.listen(1))):
    try: f(); say(name, "ok")
    except OSError as x: say(name + ":", err(x))
a, _ = l.accept(); c.close(); a.close()
say("end")
