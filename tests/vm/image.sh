#!/usr/bin/env bash
# image.sh - build the Debian 12 guest image that tests/vm/run.sh boots.
#
# Usage: tests/vm/image.sh [--force]
#
# The guest exists to give rshare real RDMA verbs where the host has none:
# its kernel (Debian's linux-image-amd64, 6.1) has rdma_rxe (Soft-RoCE), and
# its userland has rdma-core, the rxe provider, the rdma_cm and verbs tools,
# perftest and librspreload (plain rsockets). It has the same libc as the
# host, so binaries built on the host run in it unchanged from a 9p share.
#
# What it builds, all from Debian packages (debootstrap, no downloads from
# anywhere else):
#   vmlinux     the kernel, uncompressed, booted by QEMU (-kernel) through its
#               PVH entry: this skips decompressing the kernel, which costs
#               seconds under TCG (vmlinuz, the packaged bzImage, is kept too)
#   initrd.img  a tiny initramfs made here (not by initramfs-tools, whose
#               scripts take 3+ s under TCG): busybox and the modules
#               virtio_pci, virtio_blk, ext4, 9pnet_virtio, 9p with their
#               dependencies; its /init loads them, mounts /dev/vda and
#               switches to the root's /sbin/rshare-vm-init (guest-boot.sh)
#   rootfs.img  an ext4 image made with `mkfs.ext4 -d` (no loop mounts); run.sh
#               boots it with snapshot=on, so runs never change it
#   recipe      the hash of the recipe it was built from
#
# Cache: everything lives in ${RSHARE_VM_CACHE:-/var/cache/rshare-vm}:
#   images/HASH/   the image of the recipe with that hash (only the newest kept)
#   debs/          downloaded packages, reused by the next build
#   lock           flock(1) lock: concurrent builders wait for each other
# HASH covers this script (the package list and the shaping steps) and
# guest-boot.sh; the image is rebuilt only when one of them changes, or with
# --force. A cached image costs nothing: the script prints the image's folder
# and exits.
#
# Output: progress lines on stderr while building (a failing step prints the
# tail of its log), and the image's folder on stdout.
# Needs root to build (debootstrap, chroot), plus debootstrap, e2fsprogs,
# xz-utils and binutils (tools/deps.sh installs them). The packages come
# from the Debian archive that the host's apt uses, or from RSHARE_VM_MIRROR
# (a Debian mirror's URL).
#
# Times on a 2-core machine: a build takes about 45 s, from an empty cache
# (it downloads ~110 MB of packages) or not, as unpacking and configuring
# the packages dominate; a cached image: a few milliseconds.
set -euo pipefail
# The whole script is one block, read before it runs: editing this file
# cannot disturb runs in progress.
{

suite=bookworm
mirror=${RSHARE_VM_MIRROR:-}
cache=${RSHARE_VM_CACHE:-/var/cache/rshare-vm}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

# The guest's packages. Keep in sync with what tests/vm/*.sh use in the guest.
packages=(
	linux-image-amd64 # kernel 6.1 with rdma_rxe (brings initramfs-tools, unused)
	rdma-core ibverbs-providers libibverbs1 librdmacm1 # verbs, rdma_cm, the rxe provider, librspreload
	ibverbs-utils rdmacm-utils perftest # ibv_devices, ibv_rc_pingpong, rping, rstream, ib_*_bw
	iproute2 kmod busybox # ip, rdma, modprobe; poweroff, the initramfs's shell
	procps psmisc jq bash coreutils util-linux bats # what tests use (tests/*.bats)
	libunwind8 # host-built rshare binaries that link it
)
# Loaded by the initramfs (with what they depend on, in order), so that the
# root (virtio disk, ext4) can be mounted and the shares (9p over virtio)
# right after.
initrd_modules=(virtio_pci virtio_blk ext4 9pnet_virtio 9p)

force=0
case "${1:-}" in
	--force) force=1 ;;
	"") ;;
	-h | --help)
		sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	*)
		echo "image.sh: unknown argument: $1 (see --help)" >&2
		exit 2
		;;
esac

t0=$SECONDS
progress() { echo "image.sh: [$((SECONDS - t0))s] $*" >&2; }
die() {
	echo "image.sh: $*" >&2
	exit 1
}

recipe=$(cat "$here/image.sh" "$here/guest-boot.sh" | sha256sum | cut -c1-16)
out=$cache/images/$recipe

ready() { [ -s "$out/rootfs.img" ] && [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ] && [ -s "$out/recipe" ]; }

if [ $force = 0 ] && ready; then
	echo "$out"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "building the guest image needs root (debootstrap, chroot); run as root once"
for tool in debootstrap mkfs.ext4 flock chroot xz readelf; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: run tools/deps.sh"
done

mkdir -p "$cache/images" "$cache/debs"
exec 9>"$cache/lock"
if ! flock -n 9; then
	progress "another build is running; waiting for it"
	flock 9
	if [ $force = 0 ] && ready; then
		echo "$out"
		exit 0
	fi
fi

work=$(mktemp -d "$cache/build.XXXXXX")
root=$work/rootfs
log=$work/log
cleanup() { rm -rf --one-file-system "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

step() { # DESCRIPTION COMMAND... : run quietly; on failure show the log's tail
	progress "$1"
	shift
	# In the background so that `set -e` holds inside shell functions too.
	(set -x; "$@") >"$log" 2>&1 &
	if ! wait $!; then
		tail -n 40 "$log" >&2
		die "failed: $*"
	fi
}

# The Debian archive the host's apt uses (its bookworm source if it has one).
if [ -z "$mirror" ]; then
	mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' 2>/dev/null |
		awk '$3 == "deb" && $1 !~ /security/ { if ($2 == "bookworm") { print $1; found = 1; exit } if (!first) first = $1 }
			END { if (!found && first) print first }')
	[ -n "$mirror" ] || die "no Debian archive in the host's apt sources: set RSHARE_VM_MIRROR"
fi

progress "building the guest image (recipe $recipe) in $cache from $mirror"
include=$(
	IFS=,
	echo "${packages[*]}"
)
# INITRD=No: the kernel's postinst makes no initramfs-tools image (unused).
step "debootstrap $suite: ${#packages[@]} packages and their dependencies (first run downloads ~110 MB)" \
	env INITRD=No debootstrap --variant=minbase --include="$include" --cache-dir="$cache/debs" \
	"$suite" "$root" "$mirror"

# The initramfs's /init: load the modules, mount the root, switch to it.
# Few programs, because each one started costs tens of milliseconds in TCG.
initramfs_init='#!/bin/busybox sh
export PATH=/bin
busybox mount -t devtmpfs dev /dev
busybox mount -t proc proc /proc
for m in $(busybox cat /modules); do
	busybox insmod "/lib/modules/$m" || echo "initramfs: insmod $m failed"
done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do busybox usleep 50000; i=$((i + 1)); done
if ! busybox mount -t ext4 -o rw /dev/vda /root; then
	echo "initramfs: cannot mount the root /dev/vda"
	busybox poweroff -f
fi
busybox umount /proc /dev
exec busybox switch_root /root /sbin/rshare-vm-init
echo "initramfs: switch_root failed"
busybox poweroff -f
'

shape() {
	kver=$(basename "$(find "$root/lib/modules" -mindepth 1 -maxdepth 1 -type d | sort -V | tail -n 1)")
	[ -n "$kver" ]

	# The initramfs, built in the root so that its cpio and ldd do the work.
	local ird=$root/tmp/initramfs lib mod
	rm -f "$root"/boot/initrd.img-*
	mkdir -p "$ird"/{bin,dev,proc,root,lib/modules}
	mknod -m 600 "$ird/dev/console" c 5 1
	cp "$root/usr/bin/busybox" "$ird/bin/busybox"
	for lib in $(chroot "$root" ldd /usr/bin/busybox | grep -o '/[^ ]*'); do
		mkdir -p "$ird$(dirname "$lib")"
		cp -L "$root$lib" "$ird$lib"
	done
	: >"$ird/modules"
	for mod in $(chroot "$root" modprobe -a --show-depends -S "$kver" "${initrd_modules[@]}" |
		awk '$1 == "insmod" && !seen[$2]++ { print $2 }'); do
		cp "$root$mod" "$ird/lib/modules/"
		basename "$mod" >>"$ird/modules"
	done
	grep -q '^virtio_blk.ko$' "$ird/modules"
	grep -q '^ext4.ko$' "$ird/modules"
	printf '%s' "$initramfs_init" >"$ird/init"
	chmod 0755 "$ird/init"
	chroot "$root" sh -c 'cd /tmp/initramfs && find . | cpio --quiet -o -H newc' >"$work/initrd.img"
	rm -rf "$ird"

	# The kernel without its xz wrapper, if it has a PVH entry (Xen note 18).
	local off
	off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$root/boot/vmlinuz-$kver" | head -n 1 | cut -d: -f1)
	if [ -n "$off" ]; then
		tail -c +$((off + 1)) "$root/boot/vmlinuz-$kver" | xz -dcq >"$work/vmlinux" 2>/dev/null || :
		if ! readelf -n "$work/vmlinux" 2>/dev/null | grep -q 'Unknown note type: (0x00000012)'; then
			echo "no PVH entry in the kernel: booting the bzImage"
			rm -f "$work/vmlinux"
		fi
	fi

	install -m 0755 "$here/guest-boot.sh" "$root/sbin/rshare-vm-init"
	echo rshare-vm >"$root/etc/hostname"
	cat >"$root/etc/hosts" <<-EOF
		127.0.0.1	localhost
		10.77.0.1	node1
		10.77.0.2	node2
	EOF
	: >"$root/etc/fstab"

	# Nothing the guest needs: documentation, translations, apt's lists.
	rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
		"$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
		"$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log
}
step "shaping the root: initramfs (${initrd_modules[*]}), kernel, init, hosts" shape

img=$work/image
mkdir "$img"
kernel=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n 1)
[ -n "$kernel" ] || die "no kernel in the root"
cp "$kernel" "$img/vmlinuz"
mv "$work/initrd.img" "$img/initrd.img"
[ ! -s "$work/vmlinux" ] || mv "$work/vmlinux" "$img/vmlinux"

# Room for what runs write to the root (snapshot=on keeps it off the image);
# the file is sparse, so the slack costs no disk.
used_mb=$(du -sm "$root" | cut -f1)
size_mb=$((used_mb * 13 / 10 + 1024))
step "packing rootfs.img (${used_mb} MB of files, ${size_mb} MB file system)" \
	mkfs.ext4 -q -F -L rshare-vm -d "$root" "$img/rootfs.img" "${size_mb}M"
echo "$recipe" >"$img/recipe"
echo "$(basename "$kernel")" >"$img/kernel-version"

rm -rf "$out"
mv "$img" "$out"
# Only the newest image is kept; a run that still boots an older one has it open.
find "$cache/images" -mindepth 1 -maxdepth 1 -type d ! -name "$recipe" -exec rm -rf {} +
progress "done: $out ($(du -sh "$out" | cut -f1) on disk)"
echo "$out"
exit
}
