#!/usr/bin/env bats
# A same-node direction grows to take a write whole, as loopback's send
# buffer does (core/proc/vsock_grow.c), but no further once the node's
# same-node rings together hold more than net.ipv4.tcp_mem's pressure
# value, as the kernel's buffers stop growing under memory pressure
# (core/hub/pair.c).  With tcp_mem lowered to a pressure of 80 MB while
# the hub starts (it reads it then; the file is the machine's, so the hub
# runs in the first namespace, under a name and peer port of its own, and
# tcp_mem is put back at once), 40 connections each take nonblocking
# writes of 1 MiB until EAGAIN: the first ones grow to 4 MiB, the rest keep
# their 128 KiB, and every byte taken is read at the other end.

load lib

setup() {
	rs_require
	command -v python3 >/dev/null || skip "needs python3"
	rs_setup
	[[ -w /proc/sys/net/ipv4/tcp_mem ]] || skip "tcp_mem is not writable here"
	HUB=rshare-press-$RS_SUF
	export RSHARE_PORT=$((18600 + RANDOM % 200))
}

teardown() {
	[[ -n ${old_mem:-} ]] && echo "$old_mem" >/proc/sys/net/ipv4/tcp_mem
	RSHARE_HUB_NAME=$HUB timeout 10 "$RSHARE" hub stop >/dev/null 2>&1 || true
	rs_teardown
}

@test "same-node rings stop growing to take writes whole under TCP memory pressure" {
	local out n
	old_mem=$(cat /proc/sys/net/ipv4/tcp_mem)
	echo "10000 20000 30000" >/proc/sys/net/ipv4/tcp_mem
	RSHARE_HUB_NAME=$HUB timeout 20 "$RSHARE" hub start >"$RS_TMP/hub.out" 2>&1 ||
		rs_fail "hub start: $(cat "$RS_TMP/hub.out")"
	echo "$old_mem" >/proc/sys/net/ipv4/tcp_mem
	old_mem=
	out=$(RSHARE_HUB_NAME=$HUB timeout 60 "$RSHARE" run -- python3 - <<'PY'
import socket
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(64)
pairs, sizes = [], []
for i in range(40):
    c = socket.create_connection(l.getsockname()); a, _ = l.accept(); pairs.append((c, a))
    c.setblocking(False)
    tot = 0
    while True:
        try: tot += c.send(b"p" * (1 << 20))
        except BlockingIOError: break
    sizes.append(tot)
read = 0
for (c, a), tot in zip(pairs, sizes):
    got = 0
    while got < tot: got += len(a.recv(1 << 20))
    read += got == tot
print("grown", sum(s == 4 << 20 for s in sizes), "kept", sum(s == 128 << 10 for s in sizes),
      "other", sum(s not in (4 << 20, 128 << 10) for s in sizes), "read whole", read)
PY
	)
	echo "# $out" >&3
	[[ $out =~ ^grown\ ([0-9]+)\ kept\ ([0-9]+)\ other\ ([0-9]+)\ read\ whole\ 40$ ]] || rs_fail "$out"
	((BASH_REMATCH[1] >= 1)) || rs_fail "no connection grew: $out"
	((BASH_REMATCH[2] >= 20)) || rs_fail "the rings grew past the pressure: $out"
	n=$(RSHARE_HUB_NAME=$HUB "$RSHARE" stat --json | jq .counters.local_connects)
	((n == 40)) || rs_fail "the hub counted $n same-node connections, want 40"
}
