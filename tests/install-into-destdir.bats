#!/usr/bin/env bats
# `make install DESTDIR=... PREFIX=/usr/local` puts every file where
# rshare(1) says, and the installed tree works on its own: the installed
# `rshare run` starts the installed hub (sbin/rshared) and preloads the
# installed library (lib/rshare/librshare.so), the installed library
# alone starts that hub too, `rshare stat` shows the traffic;
# `make uninstall` removes it all.

load lib

setup() {
	rs_require echo-server echo-client
	command -v make >/dev/null || skip "needs make"
	rs_setup
	D=$RS_TMP/dest
	P=$D/usr/local
	export RSHARE_CONF=/dev/null
	unset RSHARE_HUB RSHARE_PORT RSHARE_HUB_LOG RSHARE_NO_AUTOSTART
	# nothing of the build tree on PATH
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
}

teardown() {
	rs_teardown
}

# make in the source tree, never rebuilding what the suite built
mk() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$RS_ROOT" --no-print-directory B="$RS_BUILD" -o "$RS_BUILD/librshare.so" \
		-o "$RS_BUILD/rshared" -o "$RS_BUILD/rshare" PREFIX=/usr/local DESTDIR="$D" "$@"
}

@test "install into DESTDIR, run from there, uninstall" {
	local port=7701 f hub
	run mk install
	echo "$output"
	[[ $status -eq 0 ]]
	for f in bin/rshare sbin/rshared lib/rshare/librshare.so lib/pkgconfig/rshare.pc \
		lib/systemd/system/rshared.service share/bash-completion/completions/rshare \
		share/doc/rshare/rshare.conf.example share/man/man1/rshare.1 share/man/man5/rshare.conf.5 \
		share/man/man7/rshare.7 share/man/man7/rshare-protocol.7 share/man/man8/rshared.8; do
		[[ -f $P/$f ]] || rs_fail "$P/$f not installed"
	done
	[[ -x $P/bin/rshare && -x $P/sbin/rshared ]]

	# pkg-config: version and the private libdir
	if command -v pkg-config >/dev/null; then
		[[ $(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --modversion rshare) == \
			"$("$P/bin/rshare" version | cut -d' ' -f2)" ]]
		[[ $(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --variable=libdir rshare) == /usr/local/lib/rshare ]]
		[[ $(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --variable=preload rshare) == \
			/usr/local/lib/rshare/librshare.so ]]
	fi
	# the unit starts the installed hub
	grep -qx 'ExecStart=/usr/local/sbin/rshared' "$P/lib/systemd/system/rshared.service"
	# bash completion completes commands
	(
		source "$P/share/bash-completion/completions/rshare"
		complete -p rshare | grep -q _rshare
		COMP_WORDS=(rshare h) COMP_CWORD=1
		_rshare
		[[ " ${COMPREPLY[*]} " == *" hub "* && " ${COMPREPLY[*]} " == *" help "* ]]
	)
	# the example configuration is valid, commented and uncommented
	run env RSHARE_CONF="$P/share/doc/rshare/rshare.conf.example" RSHARE_NO_AUTOSTART=1 "$P/bin/rshare" run -- true
	[[ $status -eq 0 && -z $output ]]
	sed -E 's/^#(transport|port|log|rcvbuf|sndbuf|hub|use) /\1 /' "$P/share/doc/rshare/rshare.conf.example" \
		>"$RS_TMP/example.conf"
	grep -q '^use ' "$RS_TMP/example.conf"
	run env RSHARE_CONF="$RS_TMP/example.conf" RSHARE_NO_AUTOSTART=1 "$P/bin/rshare" run -- true
	echo "$output"
	[[ $status -eq 0 && -z $output ]]

	# two bare nodes, no hub anywhere yet
	rs_two_nodes nohubs
	# node A: the installed rshare run starts the installed hub
	ip netns exec "$NS_A" setsid timeout -k 5 120 "$P/bin/rshare" run -- "$RS_BIN/echo-server" $port \
		>"$RS_TMP/server.out" 2>"$RS_TMP/server.err" </dev/null &
	rs_wait_ready server
	hub=$(ip netns exec "$NS_A" "$P/bin/rshare" stat --json | jq .pid)
	[[ $(readlink /proc/$hub/exe) == "$P/sbin/rshared" ]]
	# node B: the installed library alone starts the installed hub
	ip netns exec "$NS_B" timeout -k 5 60 env LD_PRELOAD="$P/lib/rshare/librshare.so" \
		"$RS_BIN/echo-client" -c 2 -n 8 -w "$RS_TMP/hold" $ADDR_A $port >"$RS_TMP/c1.out" 2>&1 &
	rs_wait_file "$RS_TMP/c1.out" '^done$'
	hub=$(ip netns exec "$NS_B" "$P/bin/rshare" stat --json | jq .pid)
	[[ $(readlink /proc/$hub/exe) == "$P/sbin/rshared" ]]
	# and the installed rshare run there, next to it
	run ip netns exec "$NS_B" timeout -k 5 60 "$P/bin/rshare" run -- "$RS_BIN/echo-client" -c 1 -n 8 $ADDR_A $port
	echo "$output"
	[[ $status -eq 0 && $output == *"verified=1 resets=0 errors=0"* ]]
	# rshare stat shows the traffic on the link
	ip netns exec "$NS_B" "$P/bin/rshare" stat --json >"$RS_TMP/b.json"
	rs_jq_check "traffic on rshare" --slurpfile b "$RS_TMP/b.json" --argjson port $port '
		$b[0] as $B |
		fail([$B.sockets[] | select(.state == "established" and (.peer|port_of) == $port and .link != 0
			and .bytes_tx > 0)] | length == 2; "B: established sockets \($B.sockets)"),
		fail(($B.links | length) == 1 and $B.links[0].connections_total == 3 and $B.links[0].bytes_tx > 0;
		     "B: links \($B.links)")'
	run ip netns exec "$NS_B" "$P/bin/rshare" stat state established dport :$port
	[[ $(tail -n +2 <<<"$output" | grep -c .) -eq 2 ]]
	touch "$RS_TMP/hold"
	wait $!
	grep -q 'verified=2 resets=0 errors=0' "$RS_TMP/c1.out"

	# the installed pages format without warnings
	if command -v man >/dev/null; then
		for f in "$P"/share/man/man*/*; do
			[[ -z $(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null) ]]
		done
	fi

	run mk uninstall
	echo "$output"
	[[ $status -eq 0 ]]
	run find "$D" -type f
	echo "$output"
	[[ -z $output ]]
	[[ ! -e $P/lib/rshare && ! -e $P/share/doc/rshare ]]
}
