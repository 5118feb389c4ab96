#!/usr/bin/env bats
# Python's subprocess starts programs with vfork: the child shares the
# parent's memory (and so the library's descriptor table) until its exec,
# and closes or moves descriptors in between (close_range, dup2).  Those
# calls are the child's own (preload/fdtab.c, pl_vfork_child), and its
# exec hands on the sockets the child still has, found by their kernel
# objects (preload/exec.c).  A server on node A that has accepted a
# connection from node B:
#   - starts `sleep 3` (close_fds), then writes and closes: its client
#     reads the bytes and EOF at once, not when sleep ends;
#   - gives the connection to `tr a-z A-Z` as its standard input and output;
#   - gives it to a dash script that reads a line, answers and sleeps.
# Each on kernel TCP and on rshare; the transcripts are the same.

load lib

setup() {
	rs_require
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

SERVER='
import socket, subprocess, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1]))); l.listen(4); print("ready", flush=True)
kids = []
for i in range(3):
    c, _ = l.accept()
    if i == 0:
        kids.append(subprocess.Popen(["sleep", "3"], close_fds=True))
        c.sendall(b"hi\n")
    elif i == 1:
        kids.append(subprocess.Popen(["tr", "a-z", "A-Z"], stdin=c, stdout=c))
    else:
        kids.append(subprocess.Popen(["dash", "-c", "read l; echo got $l; sleep 1"], stdin=c, stdout=c))
    c.close()
for k in kids:
    k.wait()
'

CLIENT='
import socket, sys, time
for i in range(3):
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    t = time.time()
    if i:
        c.sendall(b"hello\n")
    if i == 1:
        c.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while True:
            b = c.recv(100)
            if not b:
                break
            got += b
        end = "EOF"
    except OSError as e:
        end = e.strerror
    print(i, repr(got), "then", end, "before sleep ended" if i or time.time() - t < 2 else "after sleep ended")
'

# run NAME PORT [--rshare]: the client's lines
run() {
	local name=$1 port=$2 pre=${3:-}
	rs_bg "$name" "$NS_A" $pre python3 -c "$SERVER" "$port"
	rs_wait_ready "$name"
	RS_TIMEOUT=30 rs_exec "$NS_B" $pre python3 -c "$CLIENT" $ADDR_A "$port" 2>&1
}

@test "a server's subprocesses (vfork, close_range, dup2) leave its connections as on kernel TCP, and take the ones handed to them" {
	local k r
	command -v dash >/dev/null || skip "no dash"
	k=$(run kernel 7941)
	r=$(run rshare 7942 --rshare)
	echo "kernel TCP:"
	echo "$k"
	echo "rshare:"
	echo "$r"
	[[ $k == *"0 b'hi\\n' then EOF before sleep ended"* ]] || rs_fail "kernel TCP: not what the test is for"
	[[ $r == "$k" ]] || rs_fail "rshare differs"
	rs_stat "$NS_B" | jq -e '.counters.fallback_connects == 0 and ([.links[] | .connections_total] | add // 0) >= 3' \
		>/dev/null || rs_fail "not over rshare: $(rs_stat "$NS_B" | jq -c '[.counters, .links]')"
}
