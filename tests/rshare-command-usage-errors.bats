#!/usr/bin/env bats
# Bad arguments: `rshare` answers as iproute2 does, one line on stderr
# ("Usage: ...", an invalid value, or 'Command "x" is unknown, try "rshare
# help".') and exit status 2; help and version exit 0.

load lib
bats_require_minimum_version 1.5.0

setup() {
	[[ -x $RSHARE ]] || skip "$RSHARE not built"
	export RSHARE_CONF=/dev/null RSHARE_NO_AUTOSTART=1
}

# usage_err WANT-REGEX ARGS...: exit 2, exactly one line, matching WANT
usage_err() {
	local want=$1
	shift
	run "$RSHARE" "$@"
	echo "rshare $*: status $status: $output"
	[[ $status -eq 2 ]]
	[[ ${#lines[@]} -eq 1 ]]
	[[ $output =~ $want ]]
}

@test "unknown commands and bare commands exit 2 with one line" {
	usage_err '^Command "frobnicate" is unknown, try "rshare help"\.$' frobnicate
	usage_err '^Command "reload" is unknown, try "rshare help"\.$' hub reload
	usage_err '^Usage: rshare hub' hub restart now
	usage_err '^Usage: rshare hub \{ start' hub
	usage_err '^Usage: rshare hub' hub status now
	usage_err '^Usage: rshare hub' hub stop now
	usage_err '^Usage: rshare version$' version extra
	# no command at all: the whole usage, on stderr
	run "$RSHARE"
	[[ $status -eq 2 ]]
	[[ ${lines[0]} == "Usage: rshare run"* ]]
}

@test "help and version exit 0 on stdout" {
	run "$RSHARE" help
	[[ $status -eq 0 ]]
	for c in run stat hub version; do
		grep -q "rshare $c" <<<"$output"
	done
	run "$RSHARE" version
	[[ $status -eq 0 && $output =~ ^rshare\ [0-9]+\.[0-9]+ ]]
	run "$RSHARE" --version
	[[ $status -eq 0 && $output =~ ^rshare\ [0-9] ]]
	run "$RSHARE" stat help
	[[ $status -eq 0 && $output == "Usage: rshare stat"* ]]
	run "$RSHARE" hub help
	[[ $status -eq 0 && $output == "Usage: rshare hub"* ]]
}

@test "run: bad options and values exit 2" {
	usage_err '^Usage: rshare run ' run
	usage_err '^Usage: rshare run ' run --
	usage_err '^Usage: rshare run ' run --rcvbuf
	usage_err '^rshare: unknown option "--bogus" of run' run --bogus -- true
	usage_err '^rshare: invalid size "9G" for --rcvbuf' run --rcvbuf 9G -- true
	usage_err '^rshare: invalid size "1" for --sndbuf' run --sndbuf=1 -- true
	usage_err '^rshare: invalid transport "tcp"' run --transport tcp -- true
	usage_err '^rshare: invalid log level "loud"' run --log loud -- true
	usage_err '^rshare: invalid port "0"' run --port 0 -- true
	usage_err '^rshare: invalid port "x"' run --port=x true
}

@test "stat: bad filters exit 2" {
	usage_err '^Usage: rshare stat ' stat bogus
	usage_err '^Usage: rshare stat ' stat -x
	usage_err '^Usage: rshare stat ' stat state
	usage_err '^Usage: rshare stat ' stat sport
	usage_err '^rshare: invalid state "open"' stat state open
	usage_err '^rshare: invalid port ":http"' stat sport :http
	usage_err '^rshare: invalid port ":70000"' stat dport = :70000
	usage_err '^rshare: invalid port "-1"' stat port -1
	usage_err '^rshare: invalid pid "-3"' stat pid -3
	usage_err '^rshare: invalid pid "abc"' stat pid abc
}

@test "hub start: bad options exit 2" {
	usage_err '^Usage: rshare hub' hub start --now
	usage_err '^Usage: rshare hub' hub start --rcvbuf 4K
	usage_err '^Usage: rshare hub' hub start --port
	usage_err '^rshare: invalid port "99999"' hub start --port 99999
	usage_err '^rshare: invalid log level "x"' hub start --log x
}

@test "run: a command that cannot be run is 127 or 126, its status otherwise" {
	run -127 "$RSHARE" run -- /nonexistent/program
	[[ $status -eq 127 ]]
	[[ $output == "rshare: /nonexistent/program: No such file or directory" ]]
	run "$RSHARE" run -- /dev/null
	[[ $status -eq 126 ]]
	run "$RSHARE" run -- sh -c 'exit 7'
	[[ $status -eq 7 ]]
	run "$RSHARE" run true
	[[ $status -eq 0 ]]
}
