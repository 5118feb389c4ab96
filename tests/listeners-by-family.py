#!/usr/bin/env python3
"""Which listener a connection reaches, by the address family of each.

  listeners-by-family.py server PORT            three listeners, "ready"
  listeners-by-family.py client V4,V6 PORT      connections, one line each

The server listens on PORT twice, an IPv4 listener on 0.0.0.0 and an IPv6
one on :: with IPV6_V6ONLY (as Python's asyncio and nginx's [::] listen),
and on PORT + 10 once, IPv6 with IPV6_V6ONLY; each accepted connection is
sent the name of its listener and closed.  The client connects to both
ports at address V4 and at V6, in an order that tries each after the other
family has been accepted there, and prints what it got: the listener's
name, or the error of the connect."""
import socket
import sys
import threading


def say(*a):
    print(*a, flush=True)


def listen(family, port, v6only=False):
    l = socket.socket(family)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if v6only:
        l.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    l.bind(('::' if family == socket.AF_INET6 else '0.0.0.0', port))
    l.listen(16)
    return l


def serve(l, name):
    while True:
        c, _ = l.accept()
        c.sendall(name)
        c.close()


def server(port):
    ls = ((listen(socket.AF_INET6, port, True), b'v6only'), (listen(socket.AF_INET, port), b'v4'),
          (listen(socket.AF_INET6, port + 10, True), b'v6only-alone'))
    for l, name in ls:
        threading.Thread(target=serve, args=(l, name), daemon=True).start()
    say('ready')
    threading.Event().wait()


def client(v4, v6, port):
    for host, off in ((v4, 0), (v6, 0), (v4, 10), (v6, 10), (v6, 10), (v4, 10), (v4, 0), (v6, 0)):
        try:
            s = socket.create_connection((host, port + off), timeout=10)
            got = b''
            while True:
                d = s.recv(100)
                if not d:
                    break
                got += d
            say(host, '+%d' % off, got.decode())
            s.close()
        except OSError as e:
            say(host, '+%d' % off, type(e).__name__)
    say('end')


if __name__ == '__main__':
    if sys.argv[1] == 'server':
        server(int(sys.argv[2]))
    else:
        v4, v6 = sys.argv[2].split(',')
        client(v4, v6, int(sys.argv[3]))
