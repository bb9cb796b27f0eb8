#!/bin/sh
# patchbench guest init: count calls of the functions listed in /patchbench/functions (the function
# profiler), bring up tun, tap, veth (across namespaces) and virtio-net, move packets through each,
# run the exercises listed in /patchbench/exercises, print one PATCHBENCH-SMOKE status line, run the
# kselftests the job put under /kselftest (their TAP between begin and end markers), print the call
# counts and reboot: QEMU runs with -no-reboot, so that ends it (the tiny kernel has no ACPI to power
# off with).
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
# A probe boot only proves the accelerator works.
grep -q patchbench.probe /proc/cmdline && { echo PATCHBENCH-PROBE-OK; reboot -f; }
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ip link set lo up
[ -c /dev/net/tun ] || { mkdir -p /dev/net; mknod /dev/net/tun c 10 200; }

TRACING=/sys/kernel/tracing
coverage_start() {
	[ -s /patchbench/functions ] && mount -t tracefs tracefs $TRACING || return 0
	# A name the kernel cannot trace (inlined, notrace, __init) is refused: it is left out. gcc's
	# clones (name.isra.0, name.constprop.0) are the same function.
	while read -r f; do
		echo "$f" >> $TRACING/set_ftrace_filter
		echo "$f.*" >> $TRACING/set_ftrace_filter
	done < /patchbench/functions 2>/dev/null
	# An empty filter would profile every function of the kernel.
	grep -qv '^#' $TRACING/set_ftrace_filter && echo 1 > $TRACING/function_profile_enabled
}

coverage_dump() {
	[ -s /patchbench/functions ] || return 0
	echo 0 > $TRACING/function_profile_enabled
	echo PATCHBENCH-COVERAGE-TRACED
	grep -v '^#' $TRACING/set_ftrace_filter
	echo PATCHBENCH-COVERAGE-PROFILE
	cat $TRACING/trace_stat/function*
	echo PATCHBENCH-COVERAGE-END
}

finish() {
	if [ -w /sys/kernel/debug/kmemleak ]; then
		echo scan > /sys/kernel/debug/kmemleak
		cat /sys/kernel/debug/kmemleak
	fi
	echo "PATCHBENCH-SMOKE: $*"
	if [ -x /kselftest/run_kselftest.sh ]; then
		echo PATCHBENCH-KSELFTEST-BEGIN
		/kselftest/run_kselftest.sh $(cat /kselftest/patchbench-args) 2>&1
		echo PATCHBENCH-KSELFTEST-END
	fi
	coverage_dump
	reboot -f
}

wait_dev() {
	for i in 1 2 3 4 5 6 7 8 9 10; do [ -e "/sys/class/net/$1" ] && return 0; sleep 0.5; done
	return 1
}

coverage_start

# tun: a helper answers the echo requests the kernel routes into the tun device.
/bin/tun_echo pbtun0 3 &
wait_dev pbtun0 || finish "FAIL tun: device not created"
ip addr add 10.10.0.1/24 dev pbtun0 && ip link set pbtun0 up || finish "FAIL tun: configure"
ping -c 3 -W 3 10.10.0.2 || finish "FAIL tun: no echo reply through tun"

# tap: a persistent tap device is created, configured and removed again.
tunctl -t pbtap0 >/dev/null && ip link set pbtap0 up && ip addr add 10.13.0.1/24 dev pbtap0 \
	&& tunctl -d pbtap0 >/dev/null || finish "FAIL tap: create/configure/delete"

# veth: one end in a second network namespace; ping across.
unshare -n sleep 600 &
ns=$!
for i in 1 2 3 4 5 6 7 8 9 10; do  # until unshare has made the namespace (else the move is a no-op)
	[ "$(readlink /proc/$ns/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
	sleep 0.2
done
ip link add pbveth0 type veth && ip link set veth0 name pbveth1 && ip link set pbveth1 netns $ns \
	|| finish "FAIL veth: create/move"
ip addr add 10.11.0.1/24 dev pbveth0 && ip link set pbveth0 up
nsenter -t $ns -n sh -c 'ip link set lo up; ip addr add 10.11.0.2/24 dev pbveth1; ip link set pbveth1 up'
ping -c 3 -W 3 10.11.0.2 || finish "FAIL veth: no reply across the pair"

# virtio-net: QEMU joins eth0 and eth1 on one hub; eth1 goes into the namespace.
if [ -e /sys/class/net/eth1 ]; then
	ip link set eth1 netns $ns
	ip addr add 10.12.0.1/24 dev eth0 && ip link set eth0 up
	nsenter -t $ns -n sh -c 'ip addr add 10.12.0.2/24 dev eth1; ip link set eth1 up'
	ping -c 3 -W 3 10.12.0.2 || finish "FAIL virtio-net: no reply through the QEMU hub"
fi

# The exercises chosen for what the series touches.
if [ -s /patchbench/exercises ]; then
	while IFS='	' read -r name command; do
		echo "PATCHBENCH-EXERCISE: $name: $command"
		$command </dev/null || finish "FAIL exercise $name"
	done < /patchbench/exercises
fi
kill $ns
finish PASS
