#!/usr/bin/env bats
# A connection whose peer went silent gives up when kernel TCP's would, and
# not before: the same program runs on kernel TCP and on rshare (a soft
# link, lost within 1 s of the cut), through an 8 s cut of the wire, and
# both print the same transcript.
#   - idle, no keepalive: it waits through the cut and goes on (kernel TCP
#     sends nothing on an idle connection, so nothing times out), even
#     with link_outage 3 s;
#   - idle with keepalives (SO_KEEPALIVE, TCP_KEEPIDLE 1, TCP_KEEPINTVL 1,
#     TCP_KEEPCNT 2): ETIMEDOUT during the cut, with link_outage 60 s;
#   - bytes written during the cut with TCP_USER_TIMEOUT 2000: ETIMEDOUT
#     during the cut, with link_outage 60 s;
#   - bytes written during the cut, no option: rshare gives up after
#     link_outage (here 3 s, where kernel TCP's tcp_retries2 takes about
#     15 minutes): ETIMEDOUT too, told apart by the hub's counter.
# waits: four 8 s cuts of the wire (tests/run runs it beside the others)

load lib

setup() {
	rs_require echo-server
	rs_setup
	rs_two_nodes nohubs
}

# hubs OUTAGE: both hubs, their link lost within 1 s, connections waiting
# OUTAGE seconds with bytes unacknowledged
hubs() {
	rs_hub_start "$NS_A" env RSHARE_LINK_TIMEOUT=1 RSHARE_LINK_OUTAGE=$1
	rs_hub_start "$NS_B" env RSHARE_LINK_TIMEOUT=1 RSHARE_LINK_OUTAGE=$1
}

teardown() {
	rs_teardown
}

# waiter NAME PORT MODE [--rshare]: a connection from B to A's echo server,
# echoed once, then held (see cut_both); MODE idle, keepalive, user-timeout or
# outage (then 1000 bytes are written once the wire is down)
waiter() {
	local name=$1 port=$2 mode=$3 pre=${4:-}
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/echo-server" "$port"
	rs_wait_ready "$name-srv"
	rs_bg "$name" "$NS_B" $pre python3 -u -c '
import errno, os, select, socket, sys, time
host, port, mode, cut, release = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
c = socket.create_connection((host, port))
if mode == "keepalive":
    c.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 2)
if mode == "user-timeout":
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 2000)
def echo(word):
    c.settimeout(60)
    c.sendall(word + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        b = c.recv(100)
        if not b:
            return "EOF"
        got += b
    return got.decode().strip()
print(echo(b"before"))
print("held")
while not os.path.exists(cut):
    time.sleep(0.05)
if mode in ("user-timeout", "outage"):
    c.sendall(b"x" * 999 + b"\n")
p = select.poll()
p.register(c, select.POLLIN)
while not os.path.exists(release):
    if p.poll(100):
        try:
            print("during the cut: read %r" % c.recv(100))
        except OSError as e:
            print("during the cut: " + errno.errorcode[e.errno])
        sys.exit(0)
print("quiet through the cut")
try:
    c.settimeout(60)
    c.sendall(b"after\n")
    got = b""
    while not got.endswith(b"after\n"):
        b = c.recv(4096)
        if not b:
            break
        got += b
    print("after: %d bytes echoed" % len(got))
except OSError as e:
    print("after the cut: " + errno.errorcode[e.errno])' $ADDR_A "$port" "$mode" "$RS_TMP/$name.cut" "$RS_TMP/$name.release"
	rs_wait_file "$RS_TMP/$name.out" '^held$' 1 30
}

# cut_both MODE PORT: the waiters on kernel TCP (PORT) and on rshare (PORT + 1)
# through one cut: A's interface down for 8 s; then what each connection
# saw during the cut, and whether it echoed after it, in K and R
cut_both() {
	local n
	waiter "kernel-$1" "$2" "$1"
	waiter "rshare-$1" $(($2 + 1)) "$1" --rshare
	sleep 1 # every byte so far acknowledged: the connections are idle
	ip -n "$NS_A" link set "va$RS_SUF" down
	touch "$RS_TMP/kernel-$1.cut" "$RS_TMP/rshare-$1.cut"
	sleep 8
	# the programs see the end of the cut before the wire does, so that
	# what comes back after it is read as after
	touch "$RS_TMP/kernel-$1.release" "$RS_TMP/rshare-$1.release"
	sleep 0.5
	ip -n "$NS_A" link set "va$RS_SUF" up
	for n in kernel rshare; do
		rs_wait_pid "$(cat "$RS_TMP/$n-$1.pid")" 90 || true
	done
	K=$(tr '\n' '|' <"$RS_TMP/kernel-$1.out")
	R=$(tr '\n' '|' <"$RS_TMP/rshare-$1.out")
	echo "kernel TCP: $K"
	echo "rshare: $R"
}

# same MODE PORT EXPECTED: kernel TCP prints EXPECTED, and rshare the same
same() {
	local k r
	cut_both "$1" "$2"
	k=$K r=$R
	[[ $k == "$3" ]] || rs_fail "kernel TCP: $k"
	[[ $r == "$k" ]] || rs_fail "rshare: $r, kernel TCP: $k ($(cat "$RS_TMP/rshare-$1.err"))"
}

@test "an idle connection without keepalive waits through an outage longer than link_outage, as on kernel TCP" {
	hubs 3
	same idle 7721 "before|held|quiet through the cut|after: 6 bytes echoed|"
	rs_stat "$NS_B" | jq -e '.counters.links_lost >= 1 and .counters.conns_resumed >= 1 and
		.counters.conns_expired == 0' >/dev/null || rs_fail "B's counters: $(rs_stat "$NS_B" | jq -c .counters)"
}

@test "an idle connection with keepalives times out during the outage, as on kernel TCP" {
	hubs 60
	same keepalive 7723 "before|held|during the cut: ETIMEDOUT|"
	rs_stat "$NS_B" | jq -e '.counters.conns_expired >= 1' >/dev/null ||
		rs_fail "B's counters: $(rs_stat "$NS_B" | jq -c .counters)"
}

@test "bytes unacknowledged past TCP_USER_TIMEOUT time out during the outage, as on kernel TCP" {
	hubs 60
	same user-timeout 7725 "before|held|during the cut: ETIMEDOUT|"
}

@test "bytes unacknowledged past link_outage time out, where kernel TCP retransmits on" {
	local k r
	hubs 3
	cut_both outage 7727
	k=$K r=$R
	[[ $k == "before|held|quiet through the cut|after: 1006 bytes echoed|" ]] || rs_fail "kernel TCP: $k"
	[[ $r == "before|held|during the cut: ETIMEDOUT|" ]] || rs_fail "rshare: $r"
	rs_stat "$NS_B" | jq -e '.counters.conns_expired >= 1' >/dev/null ||
		rs_fail "B's counters: $(rs_stat "$NS_B" | jq -c .counters)"
}
