"""Which kernel config options a selftest script needs, worked out from the tree the test runs on.

A script asks the kernel for a feature by name: `ip link add ... type vxlan`, `tc qdisc add ... tbf`,
`modprobe br_netfilter`. The kernel answers such a request by loading the module whose alias names
the feature (request_module("rtnl-link-vxlan") finds MODULE_ALIAS_RTNL_LINK("vxlan")), or, in trees
older than the per-kind alias macros, the module named after it (sch_tbf). So the source file that
provides a feature is found through those aliases, and the options that build it through the
Kbuild Makefile of its directory (`obj-$(CONFIG_X) += f.o`, or f.o in a composite `m-y` whose
`obj-$(CONFIG_X) += m.o`). Nothing here names a feature: the ways of asking and the alias macros
are facts in netdev.toml ([selftest.needs.uses]).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import cached_property

from patchbench.tree.git import BlobReader, Git, GitFailed

_ASSIGNMENT = re.compile(r"^\s*(?P<lhs>[\w$().-]+)\s*[:+]?=\s*(?P<rhs>.*)$")
_OPTION_LHS = re.compile(r"^obj-\$\((?P<option>CONFIG_\w+)\)$")
_COMPOSITE_LHS = re.compile(r"^(?P<module>[\w-]+)-(?:y|objs|\$\((?P<option>CONFIG_\w+)\))$")
_MAX_DEPTH = 4   # composite objects nest one or two levels in Kbuild; deeper is a loop


@dataclass(frozen=True)
class Use:
    """A feature a script asks for: the way (a [selftest.needs.uses] key), its name, the line it is on."""
    way: str
    name: str
    line: int
    text: str   # the words that ask, as the script spells them


@dataclass(frozen=True)
class Provider:
    """A source or object that provides a feature, and the options that must all be set to build it."""
    path: str
    options: frozenset[str]


def uses(text: str, ways: dict) -> dict[tuple[str, str], Use]:
    """The features `text` asks for, each at its first line."""
    found: dict[tuple[str, str], Use] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):   # a comment (shell and Python) may name a feature it does not use
            continue
        for way, facts in ways.items():
            for match in re.finditer(facts["use"], line):
                key = (way, match["name"])
                if key not in found:
                    found[key] = Use(way, match["name"], number, " ".join(match[0].split()))
    return found


def set_options(config_text: str) -> set[str]:
    """The options a config fragment sets to y or m."""
    return {m[1] for m in re.finditer(r"^(CONFIG_\w+)=[ym]\s*$", config_text, re.M)}


class Providers:
    """The tree at one commit: which sources provide a feature, and which options build them."""

    def __init__(self, git: Git, blobs: BlobReader, commit: str, ways: dict, source_dirs: list[str]):
        self.git, self.blobs, self.commit = git, blobs, commit
        self.ways, self.source_dirs = ways, source_dirs
        self._makefiles: dict[str, list[tuple[str, list[str]]]] = {}

    def of(self, use: Use) -> list[Provider]:
        """Every provider of the feature (any one of them is enough); none when the tree has no
        provider for that name, which is then not a feature (a word such as `pass` or `handle`)."""
        facts = self.ways[use.way]
        sources = sorted(self._aliases.get((use.way, use.name), ()))
        objects = [(posixpath.dirname(s), posixpath.basename(s).removesuffix(".c") + ".o") for s in sources]
        if not objects and "object" in facts:
            objects = self._objects_named(facts["object"].format(name=use.name))
        return [Provider(posixpath.join(directory, obj), options)
                for directory, obj in objects for options in self._options(directory, obj, 0)]

    @cached_property
    def _aliases(self) -> dict[tuple[str, str], set[str]]:
        """(way, alias) -> the C files that declare it, from one grep of the source directories. An alias
        given as a macro is followed to its #define in the same file; KBUILD_MODNAME to the module."""
        macros = {facts["macro"]: way for way, facts in self.ways.items() if "macro" in facts}
        if not macros:
            return {}
        pattern = "(" + "|".join(map(re.escape, macros)) + r")\("
        found: dict[tuple[str, str], set[str]] = {}
        fixed = [arg for macro in sorted(macros) for arg in ("-e", macro + "(")]
        for line in self._grep("-n", "-F", *fixed, self.commit, "--", *self.source_dirs):
            _, path, _, code = line.split(":", 3)
            for match in re.finditer(pattern + r'\s*(?:"(?P<literal>[^"]+)"|(?P<macro>\w+))', code):
                for name in self._alias_names(path, match["literal"], match["macro"]):
                    found.setdefault((macros[match[1]], name), set()).add(path)
        return found

    def _alias_names(self, path: str, literal: str | None, macro: str | None) -> list[str]:
        if literal:
            return [literal]
        if macro == "KBUILD_MODNAME":
            return self._modules_of(posixpath.dirname(path), posixpath.basename(path)[:-2] + ".o", 0)
        source = (self.blobs.read(f"{self.commit}:{path}") or b"").decode("utf-8", "replace")
        return re.findall(rf'^\s*#\s*define\s+{re.escape(macro)}\s+"([^"]+)"', source, re.M)

    def _objects_named(self, obj: str) -> list[tuple[str, str]]:
        """(directory, object) of each Kbuild file that builds an object of that name (`-` and `_` are
        one in module names); found by a grep of the Kbuild files, read only where it matched."""
        spellings = sorted({obj, obj.replace("-", "_"), obj.replace("_", "-")})
        patterns = [arg for spelling in spellings for arg in ("-e", spelling)]
        matched = self._grep("-l", "-F", "-w", *patterns, self.commit, "--", *self._tree_files("Makefile", "Kbuild"))
        directories = sorted({posixpath.dirname(line.split(":", 1)[1]) for line in matched})
        return [(directory, spelling) for directory in directories for spelling in spellings
                if any(spelling in items for _, items in self._makefile(directory))]

    def unset(self, provider: Provider, configured: set[str]) -> set[str]:
        """The provider's options that a config setting `configured` leaves off: neither set, nor
        selected by an option that is on (Kconfig symbols without a prompt, such as NET_UDP_TUNNEL, can
        only be had that way), nor on by default with what they depend on."""
        kconfig = self._kconfig
        return {option for option in provider.options
                if not kconfig.enabled(option.removeprefix("CONFIG_"), configured, _MAX_DEPTH)}

    @cached_property
    def _kconfig(self) -> "Kconfig":
        """The entries of the Kconfig files, from one grep: a line belongs to the config entry above it."""
        pattern = r"^\s*(menuconfig|config|select|default|def_bool|def_tristate|depends on)\s+(.*)$"
        kconfig = Kconfig()
        entry = {}
        for line in self._grep("-n", "-E", pattern, self.commit, "--", *self._tree_files("Kconfig")):
            _, path, _, text = line.split(":", 3)
            match = re.match(pattern, text)
            keyword, words = match[1], match[2].split("#", 1)[0].split()
            if keyword in ("config", "menuconfig"):
                entry[path] = words[0]
            elif path in entry and words:
                kconfig.add(entry[path], keyword, words)
        return kconfig

    @cached_property
    def _names(self) -> list[str]:
        return self.git.out("ls-tree", "-r", "--name-only", self.commit).splitlines()

    def _tree_files(self, *prefixes: str) -> list[str]:
        """The tree's files whose name starts with one of `prefixes` (pathspecs are literal here: no globs)."""
        return [name for name in self._names if posixpath.basename(name).startswith(prefixes)]

    def _grep(self, *args: str) -> list[str]:
        code, out, err = self.git.run("grep", *args, check=False)
        if code > 1:   # 1 is "nothing found"
            raise GitFailed(["grep", *args], code, err)
        return out.splitlines()

    def _makefile(self, directory: str) -> list[tuple[str, list[str]]]:
        """The assignments of a directory's Kbuild file, continuation lines joined."""
        if directory not in self._makefiles:
            text = ""
            for name in ("Kbuild", "Makefile"):
                data = self.blobs.read(f"{self.commit}:{posixpath.join(directory, name)}")
                if data is not None:
                    text = data.decode("utf-8", "replace")
                    break
            text = re.sub(r"\\\n", " ", text)
            self._makefiles[directory] = [(m["lhs"], m["rhs"].split("#", 1)[0].split())
                                          for line in text.splitlines() if (m := _ASSIGNMENT.match(line))]
        return self._makefiles[directory]

    def _options(self, directory: str, obj: str, depth: int) -> list[frozenset[str]]:
        """Each way the directory's Kbuild file builds `obj`: the options that must all be set."""
        ways: list[frozenset[str]] = []
        for lhs, items in self._makefile(directory):
            if obj not in items:
                continue
            if lhs == "obj-y":
                ways.append(frozenset())
            elif option := _OPTION_LHS.match(lhs):
                ways.append(frozenset({option["option"]}))
            elif (composite := _COMPOSITE_LHS.match(lhs)) and depth < _MAX_DEPTH:
                own = {composite["option"]} - {None}
                ways += [frozenset(own | outer)
                         for outer in self._options(directory, composite["module"] + ".o", depth + 1)]
        return sorted(set(ways), key=sorted)

    def _modules_of(self, directory: str, obj: str, depth: int) -> list[str]:
        """The modules an object is linked into (itself when it is one)."""
        modules = []
        for lhs, items in self._makefile(directory):
            if obj in items:
                if _OPTION_LHS.match(lhs) or lhs == "obj-m":
                    modules.append(obj.removesuffix(".o"))
                elif (composite := _COMPOSITE_LHS.match(lhs)) and depth < _MAX_DEPTH:
                    modules += self._modules_of(directory, composite["module"] + ".o", depth + 1)
        return sorted(set(modules))


class Kconfig:
    """What makes a symbol on, short of running Kconfig: set in the config; selected by a symbol that
    is on; or on by default (`default y`, or a default that is a conjunction of symbols, all on) with
    each of its dependencies on. An expression that is not a plain conjunction of symbols is taken as
    off, and a conditional default as absent."""

    def __init__(self):
        self.selected_by: dict[str, set[str]] = {}
        self.default_when: dict[str, list[str]] = {}      # on by default when these are all on
        self.depends: dict[str, list[str] | None] = {}   # None: an expression this does not follow

    def add(self, symbol: str, keyword: str, words: list[str]) -> None:
        conjunction = _conjunction(words)
        if keyword == "select":
            self.selected_by.setdefault(words[0], set()).add(symbol)
        elif keyword == "depends on":
            known = self.depends.get(symbol, [])
            self.depends[symbol] = None if conjunction is None or known is None else known + conjunction
        elif conjunction is not None and symbol not in self.default_when:   # Kconfig takes the first default
            terms = [term for term in conjunction if term not in ("y", "m")]
            if "n" not in terms:
                self.default_when[symbol] = terms

    def enabled(self, symbol: str, configured: set[str], depth: int) -> bool:
        if "CONFIG_" + symbol in configured:
            return True
        if depth == 0:
            return False
        needs = self.default_when.get(symbol)
        depends = self.depends.get(symbol, [])
        if needs is not None and depends is not None \
                and all(self.enabled(other, configured, depth - 1) for other in needs + depends):
            return True
        return any(self.enabled(other, configured, depth - 1) for other in sorted(self.selected_by.get(symbol, ())))


def _conjunction(words: list[str]) -> list[str] | None:
    """The symbols of `A && B && C`; None for anything else (||, !, comparisons, conditions, strings)."""
    terms = [term.strip() for term in " ".join(words).split("&&")]
    return terms if all(re.fullmatch(r"\w+", term) for term in terms) else None
