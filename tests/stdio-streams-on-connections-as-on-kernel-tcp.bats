#!/usr/bin/env bats
# Programs that talk through stdio (whose reads and writes no preloaded
# library sees) get the same bytes on rshare as on kernel TCP: each runs
# once on kernel TCP and once on rshare (a soft link between two nodes),
# and prints the same transcript; the hubs' counters show the rshare runs'
# bytes went over the link.
#   - bash's /dev/tcp: `echo ... >&3`, `printf >&3`, `read <&3`, and a
#     command whose standard output is the connection (tr);
#   - fdopen(): fprintf, fputc, fflush, fgets, fileno, shutdown, fclose;
#   - inetd-style servers whose standard input and output are the
#     connection: sed -u, tr, head (stdio, read or write).

load lib

setup() {
	rs_require echo-server exec-inetd fdopen-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# over_rshare: B's hub carried connections and bytes over its soft link, and
# nothing fell back to kernel TCP
over_rshare() {
	rs_stat "$NS_B" | jq -e --argjson b "$1" '.counters.fallback_connects == 0 and
		([.links[] | .bytes_tx] | add // 0) >= $b' >/dev/null ||
		rs_fail "not over rshare: $(rs_stat "$NS_B" | jq -c '[.counters, [.links[] | {bytes_tx, bytes_rx}]]')"
}

# both NAME PORT SERVER... -- CLIENT...: SERVER on A, CLIENT on B, once each
# way; the two transcripts, the same or the test fails
both() {
	local name=$1 port=$2 srv=() k r
	shift 2
	while [[ $1 != -- ]]; do
		srv+=("$1")
		shift
	done
	shift
	rs_bg "$name-ksrv" "$NS_A" "${srv[@]/PORT/$port}"
	rs_wait_ready "$name-ksrv"
	k=$(ip netns exec "$NS_B" timeout 30 "${@/PORT/$port}" 2>&1)
	rs_bg "$name-rsrv" "$NS_A" --rshare "${srv[@]/PORT/$((port + 1))}"
	rs_wait_ready "$name-rsrv"
	r=$(ip netns exec "$NS_B" timeout 30 "$RSHARE" run -- "${@/PORT/$((port + 1))}" 2>&1)
	echo "kernel TCP: $k"
	echo "rshare: $r"
	[[ -n $k ]] || rs_fail "kernel TCP printed nothing"
	[[ $r == "$k" ]] || rs_fail "the transcripts differ"
}

@test "bash's /dev/tcp writes with echo, printf and a command's output, and reads, as on kernel TCP" {
	both devtcp 7731 "$RS_BIN/echo-server" PORT -- bash -c '
		exec 3<>/dev/tcp/'$ADDR_A'/PORT
		echo hello >&3
		read -r l <&3; echo "1: $l"
		printf "%s\n" one two three >&3
		for i in 1 2 3; do read -r l <&3; echo "$i: $l"; done
		head -c 100000 /dev/zero | tr "\0" x >&3
		echo >&3
		read -r l <&3; echo "big: ${#l}"
		echo "last" >&3; read -r l <&3; echo "$l"
		exec 3>&-
		echo done'
	over_rshare 100000
}

@test "a stream of fdopen() on a connection reads, writes, shuts down and closes as on kernel TCP" {
	both fdopen 7733 "$RS_BIN/echo-server" PORT -- "$RS_BIN/fdopen-client" $ADDR_A PORT
	over_rshare 100000
}


@test "inetd-style servers whose standard streams are the connection (sed -u, tr, head) answer as on kernel TCP" {
	local port=7735
	for prog in "sed -u s/^/re:/" "tr a-z A-Z" "head -n 2"; do
		both "inetd$port" $port "$RS_BIN/exec-inetd" PORT $prog -- python3 -c '
import socket, sys
c = socket.create_connection(("'$ADDR_A'", int(sys.argv[1])))
c.sendall(b"alpha\nbeta\ngamma\n")
c.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = c.recv(65536)
    if not b:
        break
    got += b
print(got.decode(), end="")
print("EOF")' PORT
		port=$((port + 2))
	done
	over_rshare 30
}
