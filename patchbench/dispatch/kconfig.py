"""The kernel config of a build: tinyconfig + kvm_guest.config + our netdev fragment + the user's fragments."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from patchbench.errors import BadInput

NETDEV_FRAGMENT = Path(__file__).with_name("netdev.config")
_ASSIGN = re.compile(r"^(CONFIG_\w+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_\w+) is not set$")


@dataclass(frozen=True)
class KernelConfig:
    """Fragments merged in order over tinyconfig; the in-tree kvm_guest.config comes first."""
    fragments: tuple[Path, ...] = (NETDEV_FRAGMENT,)
    in_tree: tuple[str, ...] = ("kernel/configs/kvm_guest.config",)
    name: str = "netdev"

    @classmethod
    def netdev(cls, user_fragments: list[Path] = ()) -> "KernelConfig":
        for path in user_fragments:
            if not Path(path).is_file():
                raise BadInput(f"config fragment not found: {path}")
        return cls(fragments=(NETDEV_FRAGMENT, *map(Path, user_fragments)))

    def text(self) -> str:
        """Everything the config depends on, for the build directory key."""
        return "\n".join([*self.in_tree, *(p.read_text() for p in self.fragments)])

    def requested(self) -> dict[str, str]:
        """Symbol -> value the fragments ask for ("n" for `# ... is not set`); later fragments win."""
        wanted: dict[str, str] = {}
        for path in self.fragments:
            for line in path.read_text().splitlines():
                if m := _ASSIGN.match(line.strip()):
                    wanted[m[1]] = m[2]
                elif m := _UNSET.match(line.strip()):
                    wanted[m[1]] = "n"
        return wanted


@dataclass
class ConfigCheck:
    missing: dict[str, str] = field(default_factory=dict)  # symbol -> value asked for but not obtained

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(self.missing.items()))


def read_dotconfig(dotconfig: Path) -> dict[str, str]:
    """Symbol -> value of the symbols a .config sets."""
    return {m[1]: m[2] for line in dotconfig.read_text().splitlines() if (m := _ASSIGN.match(line))}


def check_dotconfig(dotconfig: Path, wanted: dict[str, str]) -> ConfigCheck:
    """Which requested values Kconfig dropped (unmet dependencies, unknown symbols)."""
    got = read_dotconfig(dotconfig)
    return ConfigCheck({k: v for k, v in wanted.items() if got.get(k, "n") != v})
