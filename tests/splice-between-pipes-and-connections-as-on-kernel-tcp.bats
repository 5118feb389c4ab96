#!/usr/bin/env bats
# splice(2) between a pipe and a connection does on rshare what it does on
# kernel TCP (preload/splice.c): tests/splice-calls.c echoes 4 MiB through
# a pipe, then makes the calls that fail (an O_NONBLOCK connection with
# nothing to read, offsets, a pipe's end the wrong way round, no pipe, a
# listener at either end, a full pipe, a pipe with no reader), moves 100
# bytes in and 5 out through pipes, and reads EOF; its transcript, once on
# kernel TCP and once on rshare, across nodes (a soft link) and within one
# node, is the same, and the hubs' counters show the rshare runs went over
# rshare.  A write to a listener is EPIPE with SIGPIPE, as the kernel's.

load lib

setup() {
	rs_require splice-calls
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# transcript NAME CLIENT_NS ADDR PORT [--rshare]: both sides' lines
transcript() {
	local name=$1 cns=$2 addr=$3 port=$4 pre=${5:-}
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/splice-calls" -s "$port"
	rs_wait_ready "$name-srv"
	RS_TIMEOUT=60 rs_exec "$cns" $pre "$RS_BIN/splice-calls" -c "$addr" "$port" >"$RS_TMP/$name-cli.out" 2>&1 || true
	rs_wait_pid "$(cat "$RS_TMP/$name-srv.pid")" 30 || true
	grep -hv '^ready$' "$RS_TMP/$name-srv.out" "$RS_TMP/$name-srv.err" "$RS_TMP/$name-cli.out"
}

# same_as_kernel CLIENT_NS ADDR PORT: the transcripts, compared
same_as_kernel() {
	local k r
	k=$(transcript kernel "$@")
	r=$(transcript rshare "$1" "$2" $(($3 + 1)) --rshare)
	echo "kernel TCP:"
	echo "$k"
	[[ $k == *"server echo spliced 4194304 bytes, then EOF"* && $k == *"client then EOF"* ]] ||
		rs_fail "kernel TCP's run did not finish"
	[[ $r == "$k" ]] || { diff <(echo "$k") <(echo "$r") >&2; rs_fail "rshare's transcript differs (> lines)"; }
}

@test "splice between pipes and a connection across nodes: the same bytes, counts and errors as on kernel TCP" {
	same_as_kernel "$NS_B" "$ADDR_A" 7961
	rs_stat "$NS_B" | jq -e '.counters.fallback_connects == 0 and ([.links[] | .bytes_tx] | add // 0) >= 4194304' \
		>/dev/null || rs_fail "not over the link: $(rs_stat "$NS_B" | jq -c '.counters')"
}

@test "splice between pipes and a connection within one node: the same as on kernel TCP" {
	same_as_kernel "$NS_A" "$ADDR_A" 7963
	rs_stat "$NS_A" | jq -e '.counters.local_connects >= 2 and .counters.fallback_connects == 0' >/dev/null ||
		rs_fail "not the same-node path: $(rs_stat "$NS_A" | jq -c '.counters')"
}

@test "send, write, writev, sendmsg and sendfile to a listener: EPIPE and SIGPIPE, as on kernel TCP" {
	local prog k r
	prog='
import os, signal, socket, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGPIPE])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1]))); l.listen(1)
f = os.open("/etc/hostname", os.O_RDONLY)
for name, call in (("send", lambda: l.send(b"x")), ("write", lambda: os.write(l.fileno(), b"x")),
                   ("writev", lambda: os.writev(l.fileno(), [b"x"])), ("sendmsg", lambda: l.sendmsg([b"x"])),
                   ("send-nosignal", lambda: l.send(b"x", socket.MSG_NOSIGNAL)),
                   ("sendfile", lambda: os.sendfile(l.fileno(), f, 0, 1)), ("recv", lambda: l.recv(1))):
    try:
        r = "ok %d" % call()
    except OSError as e:
        r = e.strerror
    sig = signal.SIGPIPE in signal.sigpending()
    if sig:
        signal.sigwait([signal.SIGPIPE])
    print(name, r, "SIGPIPE" if sig else "no signal")'
	k=$(ip netns exec "$NS_A" python3 -c "$prog" 7965 2>&1)
	r=$(ip netns exec "$NS_A" "$RSHARE" run -- python3 -c "$prog" 7966 2>&1)
	echo "kernel TCP: $k"
	echo "rshare: $r"
	[[ $k == *"send Broken pipe SIGPIPE"* ]] || rs_fail "kernel TCP: $k"
	[[ $r == "$k" ]] || rs_fail "rshare differs"
	grep -q "listener [0-9]* on port 7966" "$RS_TMP/hub-$NS_A.err" || rs_fail "the listener was not rshare's"
}
