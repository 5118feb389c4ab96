#!/usr/bin/env bats
# OpenSSH's sshd: a daemon that re-execs itself for each connection, whose
# pre-authentication child chroots, drops to its own uid, lowers its
# descriptor limit to 1 and runs under a seccomp filter; after
# authentication a child of the monitor runs the command.  On node A, sshd;
# on node B, 8 ssh sessions (4 at a time), each fetching a 256 KiB file
# and printing its sha256.  First on kernel TCP, then with both sides
# preloaded: the same digests come back, and the hubs' stat shows every
# session's connection on the one link.

load lib
load apps

setup() {
	rs_require
	app_require /usr/sbin/sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client
	id sshd >/dev/null 2>&1 || skip "no sshd user (Debian package openssh-server)"
	rs_setup
	rs_two_nodes
	D=$(app_dir ssh)
	ssh-keygen -q -t ed25519 -N '' -f "$D/host"
	ssh-keygen -q -t ed25519 -N '' -f "$D/client"
	cp "$D/client.pub" "$D/authorized"
	head -c 262144 /dev/urandom >"$D/blob"
	SUM=$(sha256sum <"$D/blob" | cut -d' ' -f1)
	mkdir -p /run/sshd
	chmod 755 /run/sshd
}

teardown() {
	rs_teardown
}

# run PORT [--rshare]: sshd, then the sessions; $out: their digests, sorted
run_sessions() {
	local port=$1 pre=${2:-} i pids=()
	cat >"$D/sshd_config-$port" <<-EOF
		Port $port
		ListenAddress $ADDR_A
		HostKey $D/host
		AuthorizedKeysFile $D/authorized
		PermitRootLogin prohibit-password
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		PidFile $D/sshd-$port.pid
	EOF
	rs_bg "sshd-$port" "$NS_A" $pre /usr/sbin/sshd -D -e -f "$D/sshd_config-$port"
	app_wait_listen "$NS_A" "$port"
	for i in $(seq 8); do
		RS_TIMEOUT=60 rs_exec "$NS_B" $pre ssh -i "$D/client" -o StrictHostKeyChecking=no \
			-o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR -p "$port" \
			"root@$ADDR_A" "cat $D/blob" 2>>"$RS_TMP/ssh-$port.err" | sha256sum | cut -d' ' -f1 \
			>>"$RS_TMP/sums-$port" &
		pids+=($!)
		if ((i % 4 == 0)); then
			wait "${pids[@]}"
			pids=()
		fi
	done
	out=$(sort "$RS_TMP/sums-$port" | uniq -c | awk '{print $1 "x" $2}')
}

@test "sshd (re-exec, chroot, setuid, seccomp children) serves 8 sessions over rshare as on kernel TCP" {
	local tcp
	run_sessions 7821
	tcp=$out
	[[ $tcp == "8x$SUM" ]] || rs_fail "kernel TCP: $tcp $(tail -n 3 "$RS_TMP/ssh-7821.err")"
	app_snap before
	run_sessions 7822 --rshare
	app_snap after
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp' $(tail -n 3 "$RS_TMP/ssh-7822.err")"
	app_check_rshare "ssh sessions over rshare" before after 8 1 $((8 * 262144))
}
