#!/usr/bin/env bats
# Every manual page formats without a warning (man --warnings), and each
# names the pages of the others it refers to that exist.

@test "man pages have no warnings" {
	command -v man >/dev/null || skip "needs man (man-db)"
	local root f out n=0
	root=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	for f in "$root"/man/*.[1-8]; do
		n=$((n + 1))
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null)
		if [[ -n $out ]]; then
			echo "$f:"
			echo "$out"
			false
		fi
	done
	# rshare(1), rshare.conf(5), rshare(7), rshare-protocol(7), rshared(8)
	[[ $n -ge 5 ]]
	[[ -e $root/man/rshare.conf.5 ]]
}

@test "rshare(1) documents every command and option of rshare help" {
	local root=$(cd "$BATS_TEST_DIRNAME/.." && pwd) page w
	[[ -x ${RSHARE_BUILD:-$root/build}/rshare ]] || skip "rshare not built"
	command -v man >/dev/null || skip "needs man (man-db)"
	page=$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$root/man/rshare.1" 2>/dev/null)
	for w in $("${RSHARE_BUILD:-$root/build}/rshare" help | grep -o -- '--[a-z]*\|\b[a-z]\{3,\}\b' | sort -u); do
		grep -q -- "$w" <<<"$page" || { echo "rshare(1) lacks $w"; false; }
	done
}
