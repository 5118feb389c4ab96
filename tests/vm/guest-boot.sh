#!/bin/sh
# guest-boot.sh - the guest's init (PID 1), baked into the image by image.sh
# as /sbin/rshare-vm-init.
#
# It only does what must happen before the per-run control share is there:
# mounts /proc, /sys, /dev and /run, loads the 9p modules, mounts the share
# tagged "ctl" (a fresh host folder for each run, see run.sh) at
# /run/rshare-vm and hands over to the guest-init.sh that run.sh put there.
# So changing guest-init.sh needs no image rebuild; changing this file does
# (image.sh hashes it into the image's recipe).
#
# Anything that goes wrong here is printed on the console (ttyS0, which
# run.sh keeps and shows when a guest fails) and powers the guest off, so
# the host never waits on a guest that cannot run its command.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

say() { echo "rshare-vm-init: $*" >/dev/console 2>/dev/null || echo "rshare-vm-init: $*"; }

halt_now() {
	sync
	busybox poweroff -f 2>/dev/null
	echo o >/proc/sysrq-trigger 2>/dev/null
	sleep 5
	exit 1 # PID 1 exiting panics; the kernel runs with panic=-1, QEMU with -no-reboot
}

# The initramfs leaves nothing mounted but the root; mount the rest without
# checking first (every program started costs tens of milliseconds in TCG).
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null # already there if the kernel automounts it
mount -t tmpfs -o mode=0755,nosuid,nodev run /run
mkdir -p /run/rshare-vm

if ! modprobe -a 9pnet_virtio 9p; then
	say "cannot load the 9p modules"
	halt_now
fi
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 ctl /run/rshare-vm; then
	say "cannot mount the control share (tag ctl)"
	halt_now
fi
if [ ! -r /run/rshare-vm/guest-init.sh ]; then
	say "no guest-init.sh in the control share"
	halt_now
fi

/bin/bash /run/rshare-vm/guest-init.sh
say "guest-init.sh returned (status $?)"
halt_now
