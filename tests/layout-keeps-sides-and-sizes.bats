#!/usr/bin/env bats
# The tree keeps its layout (README.md, "Layout"): code of one side never
# includes a header of the other (the process side never sees the hub's,
# transports see only xport.h and xport_hub.h of the hub), no .c file of
# core/, preload/, tools/ or the tests is over 600 lines and no function
# over 80.
# tools/layout-check.sh checks it; the test also proves that the check
# catches an include across sides and an overlong function.

ROOT=$BATS_TEST_DIRNAME/..

@test "layout: every include stays on its side, every file and function within its size" {
	run bash "$ROOT/tools/layout-check.sh"
	echo "$output"
	[ "$status" -eq 0 ]
}

@test "layout: the check catches an include across sides and a long function" {
	local t=$BATS_TEST_TMPDIR/tree
	mkdir -p "$t"
	cp -r "$ROOT/core" "$ROOT/preload" "$ROOT/tools" "$t/"
	sed -i '0,/^#include "/s//#include "hub.h"\n#include "/' "$t/core/proc/client.c"
	sed -i '0,/^#include "/s//#include "..\/hub\/hub.h"\n#include "/' "$t/core/xport/soft.c"
	{ echo 'int layout_long(void)'; echo '{'; for i in $(seq 90); do echo "	(void)$i;"; done
	  echo '	return 0;'; echo '}'; } >>"$t/core/shared/log.c"
	run bash "$t/tools/layout-check.sh"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ $output == *'core/proc/client.c: #include "hub.h" (core/hub/hub.h): not on this side'* ]]
	[[ $output == *'core/xport/soft.c: #include "../hub/hub.h": a header is named by its plain name'* ]]
	[[ $output == *'core/shared/log.c:'*': function of 94 lines (at most 80)'* ]]
}
