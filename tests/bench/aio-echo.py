#!/usr/bin/env python3
"""aio-echo.py - an asyncio echo server and a client of many short
connections, as an asyncio program would use TCP (tests/bench/churn.sh).

  aio-echo.py server ADDR PORT
      asyncio.start_server; each connection's bytes are written back
      until it ends; prints "ready=1" once listening.
  aio-echo.py client ADDR PORT N SIZE AT_ONCE
      N connections, at most AT_ONCE open together (0: all N at once, only
      their connects bounded to 500 at a time): each writes SIZE bytes of
      its own pattern, reads them back whole, checks them and closes;
      prints "ok=K n=N secs=S errors=E first=WHAT" (S from the first
      connect to the last close).
"""
import asyncio
import os
import resource
import sys
import time

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def echo(r, w):
    try:
        while True:
            d = await r.read(65536)
            if not d:
                break
            w.write(d)
            await w.drain()
    except OSError:
        pass
    finally:
        w.close()


async def server(addr, port):
    s = await asyncio.start_server(echo, addr, port, backlog=4096)
    print("ready=1", flush=True)
    async with s:
        await s.serve_forever()


async def exchange(i, r, w, size):
    data = bytes([(i + k) % 251 for k in range(251)]) * (size // 251 + 1)
    data = data[:size]
    w.write(data)
    await w.drain()
    got = await r.readexactly(size)
    w.close()
    await w.wait_closed()
    return got == data


async def one(i, addr, port, size, at_once, sem):
    if at_once:
        async with sem:
            r, w = await asyncio.open_connection(addr, port)
            return await exchange(i, r, w, size)
    async with sem:
        r, w = await asyncio.open_connection(addr, port)
    return await exchange(i, r, w, size)


async def client(addr, port, n, size, at_once):
    sem = asyncio.Semaphore(at_once or 500)
    t0 = time.monotonic()
    res = await asyncio.gather(*[one(i, addr, port, size, at_once, sem) for i in range(n)],
                               return_exceptions=True)
    secs = time.monotonic() - t0
    ok = sum(1 for x in res if x is True)
    bad = [x for x in res if x is not True]
    first = "none" if not bad else ("mismatch" if bad[0] is False else type(bad[0]).__name__)
    print(f"ok={ok} n={n} secs={secs:.3f} errors={len(bad)} first={first}", flush=True)
    return 0 if ok == n else 1


def main(argv):
    if len(argv) == 4 and argv[1] == "server":
        asyncio.run(server(argv[2], int(argv[3])))
        return 0
    if len(argv) == 7 and argv[1] == "client":
        return asyncio.run(client(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), int(argv[6])))
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
