#!/usr/bin/env bats
# A soft link is one TCP flow for every connection between two nodes.
# Where the node's congestion control is bbr, which paces each flow and so
# would hold all of them to one paced flow's rate, the link runs cubic (or
# reno) instead, at both ends: the hub listens with it too, so that the
# end it accepts never starts under bbr; any other default is kept;
# rshare.conf's link_congestion (RSHARE_LINK_CONGESTION) names the link's
# algorithm; a name that is no name stops the hub with a clear error.
# Each case reads the algorithm of both ends of the link, and of the
# accepting hub's listener, from ss (and checks that rshare stat's
# `congestion` of the link says the same), and proves with the hubs'
# counters that a stream, checked byte for byte, went over that link.

load lib

setup() {
	rs_require echo-server
	command -v ss >/dev/null || skip "ss (iproute2) not installed"
	rs_setup
	rs_two_nodes nohubs
}

teardown() {
	rs_teardown
}

# default NAME: both namespaces' congestion control for new sockets (a
# namespace other than the first may take only a permitted one)
default() {
	ip netns exec "$NS_A" sysctl -qw net.ipv4.tcp_congestion_control="$1" &&
		ip netns exec "$NS_B" sysctl -qw net.ipv4.tcp_congestion_control="$1"
}

# hubs [VAR=VALUE...]: a hub in each namespace with that environment
hubs() {
	rs_hub_start "$NS_A" env "$@"
	rs_hub_start "$NS_B" env "$@"
}

# ss_cc NS SS_ARGS... FILTER: the congestion control of the first socket
# of NS's hub's peer port that `ss -iH SS_ARGS... FILTER` shows; FILTER
# has PORT in place of the port
ss_cc() {
	local ns=$1 port
	port=$(rs_stat "$ns" | jq -r .port)
	ip netns exec "$ns" ss -iH "${@:2:$#-2}" "${!#//PORT/$port}" |
		grep -oE '\b(reno|cubic|bbr[0-9]*|dctcp|htcp|vegas|westwood)\b' | head -n 1
}

# link_cc NS: the congestion control of NS's end of the link (the
# connection to or from the hubs' port)
link_cc() { ss_cc "$1" -tn state established "( sport = :PORT or dport = :PORT )"; }

# listener_cc NS: the congestion control of the hub's listening socket on
# its peer port in NS: what the end of a link that it accepts started with
listener_cc() { ss_cc "$1" -tln "( sport = :PORT )"; }

# stream: 4 MiB from B to A's echo server under rshare, echoed back and
# compared; then both ends of the link must name one algorithm, printed,
# and A's hub, which accepted the link, must have listened with it: an end
# accepted under bbr and switched afterwards keeps bbr's pacing in the
# kernel (the direction from A to B then carried half as much)
stream() {
	local out a b s x tx
	rs_bg srv "$NS_A" --rshare "$RS_BIN/echo-server" 7401
	rs_wait_ready srv
	out=$(rs_exec "$NS_B" --rshare python3 -c '
import hashlib, os, socket, sys, threading
data = os.urandom(4 << 20)
c = socket.create_connection((sys.argv[1], 7401))
t = threading.Thread(target=c.sendall, args=(data,))
t.start()
got = bytearray()
while len(got) < len(data):
    b = c.recv(1 << 16)
    if not b:
        break
    got += b
t.join()
print("echoed whole" if got == data else "echoed %d bytes, differing" % len(got))
' "$ADDR_A")
	[[ $out == "echoed whole" ]] || rs_fail "stream: $out"
	tx=$(rs_stat "$NS_B" | jq '[.links[] | select(.transport == "soft") | .bytes_tx] | add // 0')
	((tx >= 4 << 20)) || rs_fail "the link from B carried $tx bytes, under the stream's 4 MiB"
	a=$(link_cc "$NS_A")
	b=$(link_cc "$NS_B")
	[[ -n $a && $a == "$b" ]] || rs_fail "the link's ends run '$a' (A) and '$b' (B)"
	x=$(listener_cc "$NS_A")
	[[ $x == "$a" ]] || rs_fail "A's hub accepted the link listening with '$x', the link runs '$a'"
	# and rshare stat says what ss says
	for x in "$NS_A:$a" "$NS_B:$b"; do
		s=$(rs_stat "${x%%:*}" | jq -r '[.links[] | select(.transport == "soft") | .congestion] | first')
		[[ $s == "${x#*:}" ]] || rs_fail "stat in ${x%%:*} says the link runs '$s', ss '${x#*:}'"
	done
	echo "$a"
}

@test "a link between nodes that default to bbr runs cubic or reno, and carries a stream whole" {
	default bbr || skip "this kernel does not let a namespace default to bbr"
	hubs
	run stream
	[[ $status -eq 0 ]] || rs_fail "$output"
	[[ $output == cubic || $output == reno ]] || rs_fail "the link runs '$output'"
}

@test "a link keeps a default that does not pace" {
	default reno || rs_fail "a namespace did not take reno"
	hubs
	run stream
	[[ $status -eq 0 ]] || rs_fail "$output"
	[[ $output == reno ]] || rs_fail "the link runs '$output', the nodes reno"
}

@test "link_congestion names the link's algorithm" {
	hubs RSHARE_LINK_CONGESTION=reno
	run stream
	[[ $status -eq 0 ]] || rs_fail "$output"
	[[ $output == reno ]] || rs_fail "RSHARE_LINK_CONGESTION=reno: the link runs '$output'"
}

@test "link_congestion bbr in rshare.conf keeps bbr on the link" {
	default bbr || skip "this kernel does not let a namespace default to bbr"
	printf 'link_congestion bbr\n' >"$RS_TMP/rshare.conf"
	hubs RSHARE_CONF="$RS_TMP/rshare.conf"
	run stream
	[[ $status -eq 0 ]] || rs_fail "$output"
	[[ $output == bbr ]] || rs_fail "link_congestion bbr: the link runs '$output'"
}

@test "a name the kernel does not have leaves the node's default, with a warning" {
	default reno || rs_fail "a namespace did not take reno"
	hubs RSHARE_LINK_CONGESTION=nosuchalgorithm
	run stream
	[[ $status -eq 0 ]] || rs_fail "$output"
	[[ $output == reno ]] || rs_fail "the link runs '$output'"
	grep -q "congestion control 'nosuchalgorithm' refused" "$RS_TMP/hub-$NS_A.err" "$RS_TMP/hub-$NS_B.err" ||
		rs_fail "no warning in the hubs' logs"
}

@test "a link_congestion that is no name stops the hub with a clear error" {
	run ip netns exec "$NS_A" env RSHARE_LINK_CONGESTION='Cubic!' timeout 10 "$RSHARED"
	[[ $status -eq 2 ]] || rs_fail "rshared exited $status: $output"
	[[ $output == *"RSHARE_LINK_CONGESTION: 'Cubic!' is not auto or a congestion control's name"* ]] ||
		rs_fail "rshared said: $output"
}
