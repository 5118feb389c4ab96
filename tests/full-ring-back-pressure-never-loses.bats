#!/usr/bin/env bats
# A receiver on node A with small rings (SO_RCVBUF 4096: an 8 KiB ring)
# stops reading (until the test has looked twice, 2 s apart) while a
# sender on node B writes far more than the rings hold.  The sender is held back: its writes block (or, with
# MSG_DONTWAIT, fail with EAGAIN) once the receiver's ring and its own send
# ring are full, never having handed over more than the two rings hold; the
# receiver's socket never takes more than its ring.  When the receiver
# reads again every byte arrives, in order, verified, then EOF.
# waits: a receiver that stops reading for 2 s (tests/run runs it beside the others)

load lib

BYTES=${RS_BP_BYTES:-4194304}

setup() {
	rs_require backpressure
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

say() {
	echo "# $*" >&3
}

# the sender's last progress line: "MS SENT EAGAIN"
progress() {
	tail -n 1 "$RS_TMP/send.out" | sed -n 's/^progress \([0-9]*\) sent=\([0-9]*\) eagain=\([0-9]*\)$/\1 \2 \3/p'
}

back_pressure() {
	local mode=$1 port=$2 dflag=() p1 p2 ms1 n1 e1 ms2 n2 e2 bound
	[[ $mode == dontwait ]] && dflag=(-d)
	rs_bg recv "$NS_A" --rshare "$RS_BIN/backpressure" recv -b 4096 -g "$RS_TMP/go" -s 9 \
		-w "$RS_TMP/hold" -n "$BYTES" $port
	rs_wait_ready recv
	rs_bg send "$NS_B" --rshare "$RS_BIN/backpressure" send -b 4096 -s 9 "${dflag[@]}" \
		-n "$BYTES" $ADDR_A $port
	local spid=$RS_LASTPID
	rs_wait_file "$RS_TMP/recv.out" '^accepted$' 1 10
	# the receiver reads nothing until $RS_TMP/go: look twice meanwhile
	sleep 1
	p1=$(progress)
	rs_stat "$NS_A" >"$RS_TMP/a-paused.json"
	rs_stat "$NS_B" >"$RS_TMP/b-paused.json"
	sleep 1
	p2=$(progress)
	touch "$RS_TMP/go"
	read -r ms1 n1 e1 <<<"$p1"
	read -r ms2 n2 e2 <<<"$p2"
	bound=$(jq -n --slurpfile a "$RS_TMP/a-paused.json" --slurpfile b "$RS_TMP/b-paused.json" \
		--argjson port $port '
		([$a[0].sockets[] | select(.state == "established" and (.local | endswith(":\($port)")))][0].rx_ring) +
		([$b[0].sockets[] | select(.state == "established" and (.peer | endswith(":\($port)")))][0].tx_ring)')
	say "$mode: while the receiver sleeps the sender has handed over $n1 then $n2 bytes" \
		"(at ${ms1} and ${ms2} ms; EAGAIN $e1 then $e2); receiver ring + sender ring = $bound"
	[[ -n $n1 && -n $n2 ]] || rs_fail "no progress from the sender: $(tail -n 3 "$RS_TMP/send.out")"
	((n1 == n2)) || rs_fail "the sender went on from $n1 to $n2 bytes while nothing was read"
	((n2 <= bound)) || rs_fail "the sender handed over $n2 bytes, the rings hold $bound"
	((n2 < BYTES)) || rs_fail "the sender finished while the receiver slept"
	# blocking writes are at most 1 KiB: the count is at most that behind
	((n2 + 1024 >= bound)) || rs_fail "the sender stopped at $n2 bytes, before the rings ($bound) were full"
	if [[ $mode == dontwait ]]; then
		((e2 > e1)) || rs_fail "MSG_DONTWAIT sends kept no EAGAIN coming ($e1 then $e2)"
	fi
	rs_jq_check "the paused connection is on rshare, its rings full and never overrun" \
		--slurpfile a "$RS_TMP/a-paused.json" --slurpfile b "$RS_TMP/b-paused.json" \
		--argjson port $port --argjson sent $n2 '
		$a[0] as $A | $b[0] as $B |
		[$A.sockets[] | select(.state == "established" and (.local|port_of) == $port)] as $r |
		[$B.sockets[] | select(.state == "established" and (.peer|port_of) == $port)] as $s |
		fail($r|length == 1; "A: \($r|length) established sockets on port \($port)"),
		fail($s|length == 1; "B: \($s|length) established sockets to port \($port)"),
		($r[0] // {}) as $R | ($s[0] // {}) as $S |
		fail($R.rx_ring == 8192; "receiver rx_ring \($R.rx_ring), want 8192 (SO_RCVBUF 4096)"),
		fail($S.tx_ring == 8192; "sender tx_ring \($S.tx_ring), want 8192 (SO_SNDBUF 4096)"),
		fail($R.link != 0 and $S.link != 0; "not on a link: \($R.link) \($S.link)"),
		fail($R.bytes_rx <= $R.rx_ring; "receiver got \($R.bytes_rx) bytes unread in a \($R.rx_ring) ring"),
		fail($R.bytes_rx == $R.rx_ring; "receiver ring holds \($R.bytes_rx) of \($R.rx_ring) bytes: the sender stopped early"),
		fail($S.bytes_tx <= $sent; "sender socket sent \($S.bytes_tx), more than the \($sent) written")'

	rs_wait_file "$RS_TMP/recv.out" '^received [0-9]+ verified$' 1 60
	rs_stat "$NS_A" >"$RS_TMP/a-done.json"
	rs_stat "$NS_B" >"$RS_TMP/b-done.json"
	touch "$RS_TMP/hold"
	rs_wait_pid "$spid" 20 || rs_fail "sender exit $?: $(cat "$RS_TMP/send.err")"
	grep -q "^sent $BYTES " "$RS_TMP/send.out" || rs_fail "sender: $(tail -n 2 "$RS_TMP/send.out")"
	grep -q "^received $BYTES verified$" "$RS_TMP/recv.out" || rs_fail "receiver: $(cat "$RS_TMP/recv.out")"
	say "$mode: $BYTES bytes through 8 KiB rings after a 2 s stall, every byte verified" \
		"($(tail -n 1 "$RS_TMP/send.out"))"
	rs_jq_check "every byte went over the link" --slurpfile a "$RS_TMP/a-done.json" \
		--argjson port $port --argjson bytes "$BYTES" '
		$a[0] as $A |
		[$A.sockets[] | select((.local|port_of) == $port and .state != "listening")] as $r |
		fail($r|length == 1; "A: \($r|length) sockets on port \($port)"),
		fail(($r[0].bytes_rx // 0) == $bytes; "receiver socket bytes_rx \($r[0].bytes_rx), want \($bytes)"),
		fail($A.counters.fallback_connects == 0; "fallback connects on A")'
}

@test "blocking sends stop at the full ring and lose nothing when the reader resumes" {
	back_pressure block 7301
}

@test "MSG_DONTWAIT sends get EAGAIN at the full ring and lose nothing when the reader resumes" {
	back_pressure dontwait 7302
}
