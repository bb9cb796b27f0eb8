"""check-selftest: a new net selftest is wired in, and the selftest lists stay sorted where they were.

For the net selftest directories ([selftest].paths of netdev.toml): a script (.sh, .py) the patch
adds must be named in its directory's Makefile after the patch; a program (.c, not .bpf.c) must be
named, without .c, in the Makefile and in the directory's .gitignore. Files the Makefiles take by
$(wildcard ...) ([selftest].wildcards) need no name. A Makefile list (each multi-line `VAR :=` /
`VAR +=` block), the `config` and the `.gitignore` that the patch touches must stay sorted when the
file before the patch kept it sorted (in one of the orders the kernel's lists use, fewer `/` first
and then: byte order, case ignored, or punctuation ignored too as `sort` does in a UTF-8 locale; a
stray entry or two out of order still counts as kept sorted): a pair of neighbours out of that
order that the file before did not have is reported. `config` must not set an option twice that
it set once. A script that starts asking for a kernel feature (a link type, qdisc, classifier,
action or module: selftest_config.py) needs the options that build its provider in its directory's
`config`, when that directory is a test target with a `config`. Everything is judged on the
patch's own commit, so only what the patch makes wrong is reported.
"""

from __future__ import annotations

import fnmatch
import itertools
import posixpath
import re
from collections import Counter
from dataclasses import dataclass

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, netdev_facts
from patchbench.patchchecks.selftest_config import Providers, set_options, uses
from patchbench.tree import AppliedPatch
from patchbench.tree.git import Git

ID = "check-selftest"
MESSAGE = ("new net selftests in their Makefile and .gitignore, the options they need in config; "
           "Makefile, config, .gitignore kept sorted")
NEEDS = ()
LIST_FILES = ("Makefile", "config", ".gitignore")

_ASSIGNMENT = re.compile(r"^(?P<var>[A-Z_][A-Z0-9_]*)\s*(?::?=|\+=)(?P<rest>.*)$")


@dataclass(frozen=True)
class Item:
    text: str
    line: int


MOST_UNSORTED = 0.05   # share of neighbours out of order that a list kept sorted may have
ORDERS = {
    "byte": lambda text: (text.count("/"), text),
    "case-insensitive": lambda text: (text.count("/"), text.lower()),
    "locale": lambda text: (text.count("/"), re.sub(r"[^0-9a-z]", "", text.lower()), text),
}


def makefile_lists(text: str) -> dict[str, list[Item]]:
    """The items of each multi-line variable block, keyed `VAR` (`VAR#2` for its second block).
    Blocks of flags and libraries, and items that are make functions ($(...)), are not lists."""
    blocks: dict[str, list[Item]] = {}
    seen: Counter = Counter()
    current: list[Item] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        match = _ASSIGNMENT.match(line) if current is None else None
        if match:
            var, first = match["var"], match["rest"].strip()
            if line.endswith("\\") and len(var) >= 3 and "FLAGS" not in var and "LIBS" not in var:
                seen[var] += 1
                current = blocks.setdefault(var if seen[var] == 1 else f"{var}#{seen[var]}", [])
                first = first.removesuffix("\\").strip()
                if first:
                    current.append(Item(first, number))
            continue
        if current is None:
            continue
        item = line.strip().removesuffix("\\").strip()
        if item and not item.startswith(("#", "$")):
            current.append(Item(item, number))
        if not line.endswith("\\"):
            current = None
    return {name: items for name, items in blocks.items() if len(items) > 1}


def line_list(text: str) -> list[Item]:
    """The entries of a config or .gitignore: lines that are neither blank nor comments."""
    return [Item(line.strip(), number) for number, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


def _lists(path: str, text: str) -> dict[str, list[Item]]:
    return makefile_lists(text) if posixpath.basename(path) == "Makefile" else {"": line_list(text)}


def inversions(items: list[Item], order: str) -> list[tuple[Item, Item]]:
    """Neighbours in the wrong order."""
    key = ORDERS[order]
    return [(a, b) for a, b in itertools.pairwise(items) if key(a.text) > key(b.text)]


def kept_order(items: list[Item]) -> str | None:
    """The order `items` are kept in: the one with fewest neighbours out of it, if those are few
    (the kernel's lists have a stray entry or two; a list that is not sorted at all has no order)."""
    if len(items) < 3:
        return None
    order = min(ORDERS, key=lambda name: len(inversions(items, name)))
    return order if len(inversions(items, order)) <= len(items) * MOST_UNSORTED else None


def _options(items: list[Item]) -> Counter:
    return Counter(item.text.split("=", 1)[0] for item in items if item.text.startswith("CONFIG_"))


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


class _Files:
    """Files of the repository at a commit, read once."""

    def __init__(self, blobs):
        self.blobs = blobs

    def text(self, rev: str, path: str) -> str | None:
        data = self.blobs.read(f"{rev}:{path}")
        return None if data is None else data.decode("utf-8", "replace")


def _wired_in(files: _Files, patch: AppliedPatch, path: str, facts: dict) -> list[Finding]:
    name = posixpath.basename(path)
    directory = posixpath.dirname(path)
    if any(fnmatch.fnmatch(path, glob) and posixpath.dirname(glob) == directory for glob in facts["wildcards"]):
        return []
    if re.search(facts["listed"], name):
        wanted = [("Makefile", name, "error")]
    elif re.search(facts["built"], name):
        program = name.removesuffix(".c")
        wanted = [("Makefile", program, "error"), (".gitignore", program, "warning")]
    else:
        return []
    found = []
    for list_file, needle, severity in wanted:
        where = posixpath.join(directory, list_file)
        if not _names(files.text(patch.commit, where) or "", needle):
            found.append(Finding(rule=ID, severity=severity, file=path, line=0, function="",
                                 message=f"new selftest {needle} is not in {where}", patch=patch.index))
    return found


def _kept_sorted(files: _Files, patch: AppliedPatch, path: str) -> list[Finding]:
    before_text, after_text = files.text(patch.parent, path), files.text(patch.commit, path)
    if before_text is None or after_text is None:
        return []   # a new list has no order to keep; a deleted one none to break
    before, after = _lists(path, before_text), _lists(path, after_text)
    found = []
    for name, items in after.items():
        order = kept_order(before.get(name, []))
        if order is None:
            continue
        known = {(a.text, b.text) for a, b in inversions(before[name], order)}
        what = f"{name.split('#')[0]} in {path}" if name else path
        found += [Finding(rule=ID, severity="warning", file=path, line=second.line, function="",
                          message=f"{what} is kept sorted: '{second.text}' should come before '{first.text}'",
                          patch=patch.index)
                  for first, second in inversions(items, order) if (first.text, second.text) not in known]
    if posixpath.basename(path) == "config":
        old, new = _options(before.get("", [])), _options(after.get("", []))
        for option, count in sorted(new.items()):
            if count > 1 and old[option] < count:
                line = [i.line for i in after[""] if i.text.split("=", 1)[0] == option][-1]
                found.append(Finding(rule=ID, severity="warning", file=path, line=line, function="",
                                     message=f"{option} is set {count} times in {path}", patch=patch.index))
    return found


def _options_needed(git: Git, files: _Files, patch: AppliedPatch, path: str, facts: dict,
                    providers: dict[str, Providers]) -> list[Finding]:
    """New feature requests of a script whose `config` does not set the options of any provider."""
    directory = posixpath.dirname(path)
    config_path = posixpath.join(directory, "config")
    config = files.text(patch.commit, config_path)
    after = files.text(patch.commit, path)
    if config is None or after is None or files.text(patch.commit, posixpath.join(directory, "Makefile")) is None:
        return []   # not a test target with a config of its own (hardware tests, helpers)
    ways = facts["needs"]["uses"]
    asked = uses(after, ways)
    before = uses(files.text(patch.parent, path) or "", ways)
    new = [use for key, use in asked.items() if key not in before]
    if not new:
        return []
    tree = providers.setdefault(patch.commit, Providers(git, files.blobs, patch.commit, ways,
                                                        facts["needs"]["sources"]))
    configured = set_options(config)
    found = []
    for use in new:
        unset = {provider: tree.unset(provider, configured) for provider in tree.of(use)}
        if not unset or not all(unset.values()):
            continue
        nearest = min(unset, key=lambda p: (len(unset[p]), p.path))
        missing = " ".join(sorted(unset[nearest]))
        found.append(Finding(rule=ID, severity="warning", file=path, line=use.line, function="",
                             message=f"'{use.text}' needs {missing} ({nearest.path}), which {config_path} "
                                     f"does not set", patch=patch.index))
    return found


def run(context: PatchContext) -> list[Finding]:
    facts = netdev_facts()["selftest"]
    in_scope = re.compile(facts["paths"])
    found = []
    git = Git(context.git_dir)
    providers: dict[str, Providers] = {}
    with git.blobs() as blobs:
        files = _Files(blobs)
        for patch in context.applied.applied:
            mail = context.mail(patch)
            added = {c.path for c in mail.files if c.status == "added"} if mail else set()
            for path in patch.files:
                if not in_scope.search(path):
                    continue
                if path in added:
                    found += _wired_in(files, patch, path, facts)
                if re.search(facts["listed"], path):
                    found += _options_needed(git, files, patch, path, facts, providers)
                if posixpath.basename(path) in LIST_FILES:
                    found += _kept_sorted(files, patch, path)
    return found
