"""Boot a bzImage in qemu-system-x86_64 with our initramfs; KVM only when a probe boot proves it works.

On some hosts /dev/kvm opens fine but guests hang silently (nested, paravirtual KVM), so trusting
its presence is not enough: a short probe boot with KVM must print its marker, else TCG is used.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from patchbench.dispatch import sandbox
from patchbench.errors import BadInput

CMDLINE = "console=ttyS0 panic=-1 oops=panic loglevel=7"
PROBE_MARKER = "PATCHBENCH-PROBE-OK"
PROBE_SECONDS = 30
TCG_SLOWDOWN = 3  # TCG runs the guest several times slower than KVM: stretch its timeouts


@dataclass(frozen=True)
class Accel:
    name: str                      # "kvm" | "tcg"
    reason: str


def _qemu() -> str:
    path = shutil.which("qemu-system-x86_64")
    if path is None:
        raise BadInput("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
    return path


def command(kernel: Path, initrd: Path, accel: Accel, append: str = CMDLINE) -> list[str]:
    # No network leaves the VM: two virtio NICs joined on an internal QEMU hub, nothing else.
    return [_qemu(), "-accel", accel.name, "-cpu", "max" if accel.name == "tcg" else "host",
            "-m", "512", "-smp", "1", "-nographic", "-no-reboot", "-nic", "none",
            "-netdev", "hubport,id=n0,hubid=0", "-device", "virtio-net-pci,netdev=n0",
            "-netdev", "hubport,id=n1,hubid=0", "-device", "virtio-net-pci,netdev=n1",
            "-kernel", str(kernel), "-initrd", str(initrd), "-append", append]


def choose_accel(kernel: Path, initrd: Path, cache: Path) -> Accel:
    """KVM when /dev/kvm is usable, the CPU has vmx/svm and a probe boot finishes; else TCG.

    The answer is remembered per host boot (it does not change until the host reboots).
    """
    forced = os.environ.get("PATCHBENCH_ACCEL")
    if forced in ("kvm", "tcg"):
        return Accel(forced, "PATCHBENCH_ACCEL")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Accel("tcg", "/dev/kvm is not usable")
    cpuinfo = Path("/proc/cpuinfo").read_text()
    if " vmx" not in cpuinfo and " svm" not in cpuinfo:
        return Accel("tcg", "the CPU advertises no vmx/svm (nested KVM without hardware virtualisation)")
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    remembered = cache / f"kvm-probe-{boot_id}"
    if remembered.exists():
        name, _, reason = remembered.read_text().partition("\n")
        return Accel(name, reason.strip())
    probe = command(kernel, initrd, Accel("kvm", "probe"),
                    append=f"{CMDLINE} patchbench.probe")
    done = sandbox.run(probe, timeout=PROBE_SECONDS, log=cache / "kvm-probe.log")
    if PROBE_MARKER in done.output:
        accel = Accel("kvm", f"probe boot with KVM finished in {done.seconds:.1f} s")
    else:
        accel = Accel("tcg", f"probe boot with KVM did not finish within {PROBE_SECONDS} s")
    cache.mkdir(parents=True, exist_ok=True)
    remembered.write_text(f"{accel.name}\n{accel.reason}\n")
    return accel


def boot(kernel: Path, initrd: Path, accel: Accel, *, timeout: float, console_log: Path,
         on_line: sandbox.LineSink | None = None) -> sandbox.Completed:
    """Run the guest to power-off (or kill it at the timeout); the console is the output."""
    if accel.name == "tcg":
        timeout *= TCG_SLOWDOWN
    return sandbox.run(command(kernel, initrd, accel), timeout=timeout, log=console_log, on_line=on_line)
