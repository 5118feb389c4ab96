#!/usr/bin/env python3
"""Signal-driven I/O on a connection, as a transcript to compare.

  signal-driven-io.py server PORT        a peer that acts as each client asks
                                         (prints "ready" once listening)
  signal-driven-io.py client HOST PORT   the scenarios, one connection each
  signal-driven-io.py both PORT          both in one process (same node)

The client blocks SIGIO and a real-time signal and takes them with
sigtimedwait, so what it prints is whether a signal came within a bound
and the si_code it came with (POLL_IN, POLL_OUT, ...), not when.  Each
connection's first byte tells the peer what to do, after a pause that
lets the client set itself up and look for a signal that should not come:
  D  send 4 bytes, then echo until end of stream
  F  shut down its sending side
  R  reset (SO_LINGER 0, close)
  W  wait, then read to end of stream (the client fills its send buffer)
A second listener, on PORT + 10, accepts only when its own signal says a
connection came (O_ASYNC on a listener), and sends each connection the
si_code of that signal.
"""
import errno
import fcntl
import os
import signal
import socket
import struct
import sys
import threading
import time

F_SETSIG, F_GETSIG = 10, 11
RT = signal.SIGRTMIN + 1
LRT = signal.SIGRTMIN + 2  # the listener's


def peer(c):
    try:
        what = c.recv(1)
        time.sleep(0.4)
        if what == b'D':
            c.sendall(b'data')
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
        elif what == b'F':
            c.shutdown(socket.SHUT_WR)
            while c.recv(65536):
                pass
        elif what == b'R':
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        elif what == b'W':
            time.sleep(0.4)
            while c.recv(1 << 20):
                pass
    except OSError:
        pass
    c.close()


def serve(l):
    while True:
        c, _ = l.accept()
        threading.Thread(target=peer, args=(c,), daemon=True).start()


def signalled_listener(port, host):
    """a listener on port + 10 that accepts when its signal comes, and
    tells each connection the si_code it came with"""
    l = listener(port + 10, host)
    l.setblocking(False)
    fcntl.fcntl(l, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(l, F_SETSIG, LRT)
    fcntl.fcntl(l, fcntl.F_SETFL, fcntl.fcntl(l, fcntl.F_GETFL) | os.O_ASYNC)

    def loop():
        while True:
            code = signal.sigwaitinfo([LRT]).si_code
            while True:
                try:
                    c, _ = l.accept()
                except BlockingIOError:
                    break
                c.setblocking(True)
                c.sendall(b'signalled %d' % code)
                c.close()
    threading.Thread(target=loop, daemon=True).start()


def listener(port, host='::'):
    l = socket.socket(socket.AF_INET6)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, port))
    l.listen(64)
    return l


def wait(sig, secs):
    """the si_code of the signal if it came within secs, else None"""
    info = signal.sigtimedwait([sig], secs)
    return None if info is None else info.si_code


def drain(sig):
    while signal.sigtimedwait([sig], 0) is not None:
        pass


def say(*a):
    print(*a, flush=True)


def arm(s, sig, how):
    """ask for sig as signal-driven I/O on s, in one of the program's ways"""
    fd = s.fileno()
    if how == 'ioctl':
        import array
        fcntl.ioctl(fd, 0x8901, array.array('i', [os.getpid()]))  # FIOSETOWN
        fcntl.ioctl(fd, 0x5452, array.array('i', [1]))            # FIOASYNC
    else:
        if how == 'async-first':
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
        fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
        if sig != signal.SIGIO:
            fcntl.fcntl(fd, F_SETSIG, sig)
        if how != 'async-first':
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)


def scenario(host, port, what, sig=RT, how='fcntl', polled=False):
    s = socket.create_connection((host, port))
    if polled:  # a descriptor polled before it asks for signals
        import select
        select.select([s], [], [], 0)
    arm(s, sig, how)
    fl = fcntl.fcntl(s, fcntl.F_GETFL)
    back = (bool(fl & os.O_ASYNC), fcntl.fcntl(s, fcntl.F_GETOWN) == os.getpid(),
            fcntl.fcntl(s, F_GETSIG) == (0 if sig == signal.SIGIO else sig))
    drain(sig)
    s.send(what)
    quiet = wait(sig, 0.15)
    line = [what.decode(), how + (' polled' if polled else ''), 'reads back', *back,
            'before', quiet]
    if what == b'D':
        line += ['data', wait(sig, 3), s.recv(10)]
        fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) & ~os.O_ASYNC)
        drain(sig)
        s.send(b'x')
        line += ['async off', wait(sig, 0.5), s.recv(10)]
    elif what == b'F':
        line += ['end', wait(sig, 3) is not None, s.recv(10)]
    elif what == b'R':
        line += ['reset', wait(sig, 3) is not None]
        try:
            s.recv(10)
        except OSError as e:
            line.append(errno.errorcode[e.errno])
    elif what == b'W':
        s.setblocking(False)
        sent = 0
        try:
            while True:
                sent += s.send(b'w' * 65536)
        except BlockingIOError:
            pass
        drain(sig)
        line += ['full', sent > 0, 'room', wait(sig, 5) is not None]
        s.setblocking(True)
    drain(sig)
    s.close()
    # the peer closes after it: no signal for a socket the program closed
    say(*line, 'after close', wait(sig, 0.3))


def client(host, port):
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGIO, RT])
    for what in (b'D', b'F', b'R', b'W'):
        scenario(host, port, what)
    scenario(host, port, b'D', sig=signal.SIGIO)
    scenario(host, port, b'D', how='async-first')
    scenario(host, port, b'D', how='ioctl', sig=signal.SIGIO)
    scenario(host, port, b'D', polled=True)
    for i in range(3):  # a listener's signal, for each connection
        s = socket.create_connection((host, port + 10))
        s.settimeout(5)
        try:
            say('listener', s.recv(20).decode())
        except socket.timeout:
            say('listener', 'no signal')
        s.close()
    say('end')


if __name__ == '__main__':
    role = sys.argv[1]
    if role == 'server':
        signal.pthread_sigmask(signal.SIG_BLOCK, [LRT])
        l = listener(int(sys.argv[2]))
        signalled_listener(int(sys.argv[2]), '::')
        say('ready')
        serve(l)
    elif role == 'client':
        client(sys.argv[2], int(sys.argv[3]))
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGIO, RT, LRT])
        l = listener(int(sys.argv[2]), '::1')
        signalled_listener(int(sys.argv[2]), '::1')
        threading.Thread(target=serve, args=(l,), daemon=True).start()
        client('::1', int(sys.argv[2]))
