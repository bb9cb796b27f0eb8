"""Parse kernel C with tree-sitter-c after an offset-preserving pre-pass.

tree-sitter-c knows nothing of kernel macros. `prepare()` rewrites the source so that it parses,
replacing text only by text of the same length (spaces, or `while` padded with spaces), so that
every node's byte offset, line and column are those of the original file:

- annotation macros (`__rcu`, `__aligned(n)`, `__must_hold(x)`, `__acquires(x)`, `__releases(x)`,
  `__attribute__((...))`, section and cacheline markers, ...) become spaces;
- `struct T` passed as a macro argument (`container_of(p, struct T, m)`) loses its keyword;
- `likely(x)` / `unlikely(x)` keep only their parenthesised argument;
- statement-level iterator heads `list_for_each_entry(pos, head, member) {` become
  `while              (pos, head, member) {`, so they parse as loops instead of nested function
  definitions; `scoped_guard(spinlock, &l) {` becomes `if(    guard(spinlock, &l)){` (the blank
  before the brace gives the closing parenthesis) and `scoped_cond_guard(mutex_intr, return -EINTR,
  &l) {` `if(         guard(mutex_intr, 0            , &l)){`: an `if` whose condition is a call
  named by the original `guard` text, which model.py names scoped_guard / scoped_cond_guard.

Annotations are read from the original text (see patchbench.checks.model), never from the tree.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import tree_sitter
import tree_sitter_c

from patchbench.errors import CheckFailed

LANGUAGE = tree_sitter.Language(tree_sitter_c.language())

# The queries are data in the top-level queries/ directory; patchbench/queries links to it, so that
# they are found at the same place inside the package in a checkout and in an installed wheel.
QUERIES_DIR = Path(__file__).resolve().parents[1] / "queries"

_BARE_ANNOTATIONS = (
    "__rcu __user __iomem __percpu __force __bitwise __private __kernel __safe __nocast "
    "__init __exit __initdata __initconst __exitdata __devinit __devexit __net_init __net_exit "
    "__net_initdata __ref __refdata __cold __hot __maybe_unused __always_unused __used __weak "
    "__read_mostly __ro_after_init __packed __pure __must_check __always_inline noinline "
    "__noreturn __visible __noclone __latent_entropy __randomize_layout __no_randomize_layout "
    "__cacheline_aligned __cacheline_aligned_in_smp ____cacheline_aligned "
    "____cacheline_aligned_in_smp ____cacheline_internodealigned_in_smp __aligned_largest "
    "__counted_by __nonstring __noinline_for_stack __printf __malloc notrace __sched __kprobes "
    "__cond_lock __acquire __release"
).split()
# Of these, the ones that take a parenthesised argument list when followed by "(".
_CALL_ANNOTATIONS = (
    "__aligned __must_hold __acquires __releases __attribute__ __attribute __printf __section "
    "__counted_by __diag_ignore __scanf __alloc_size __assume_aligned __nonstring __designated_init"
).split()
_WRAPPERS = ("likely", "unlikely")

# The words the pre-pass rewrites, besides every word containing "for_each". Found as candidate
# words (those starting with "_", and the others spelled out) looked up in this set, and by
# searching for "for_each": one regex alternation of all of them scanned at a third of the speed.
_SCOPED = ("scoped_guard", "scoped_cond_guard")
_REWRITTEN = frozenset({*_BARE_ANNOTATIONS, *_CALL_ANNOTATIONS, *_WRAPPERS, *_SCOPED})
_CANDIDATE = re.compile(r"\b(?:_\w*|(?:" + "|".join(sorted(w for w in _REWRITTEN if not w.startswith("_")))
                        + r")\b)")
# A type given as a macro argument: `container_of(p, struct tun_file, sk)`.
_TYPE_ARGUMENT = re.compile(r"[(,]\s*(struct|union|enum)\s+\w+\s*(?:,|\)(?!\s*\{))")


def _matching_paren(src: bytes, open_at: int) -> int:
    """Index of the `)` closing the `(` at open_at, or -1 (strings and chars are skipped)."""
    depth = 0
    i = open_at
    n = len(src)
    while i < n:
        c = src[i]
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return i
        elif c in (0x22, 0x27):  # skip a string or char literal
            quote = c
            i += 1
            while i < n and src[i] != quote:
                i += 2 if src[i] == 0x5C else 1
        elif c == 0x0A and i + 1 < n and src[i + 1] == 0x23:
            return -1  # ran into a preprocessor line: give up rather than span it
        i += 1
    return -1


def _skip_space(src: bytes, i: int) -> int:
    while i < len(src) and src[i] in b" \t\r\n":
        i += 1
    return i


def _previous_token_end(src: bytes, i: int) -> bytes:
    """The last non-blank character before i, skipping /* */ comments (b'' at file start)."""
    j = i - 1
    while j >= 0:
        c = src[j]
        if c in b" \t\r\n":
            j -= 1
        elif c == 0x2F and j > 0 and src[j - 1] == 0x2A:
            start = src.rfind(b"/*", 0, j - 1)
            if start < 0:
                return b""
            j = start - 1
        else:
            return src[j:j + 1]
    return b""


def _line_is_preprocessor(src: bytes, i: int) -> bool:
    line_start = src.rfind(b"\n", 0, i) + 1
    return src[line_start:i].lstrip().startswith(b"#")


def prepare(source: bytes) -> bytes:
    """The pre-pass: same length, same line breaks, kernel macros rewritten to plain C."""
    out = bytearray(source)
    bare = set(_BARE_ANNOTATIONS)
    called = set(_CALL_ANNOTATIONS)
    text = source.decode("latin-1")  # one char per byte: regex offsets are byte offsets
    for start, end in _interesting(text):
        word = text[start:end]
        if word in called or word in _WRAPPERS or "for_each" in word or word in _SCOPED:
            paren = _skip_space(source, end)
            if paren >= len(source) or source[paren] != 0x28:
                if word in bare:
                    out[start:end] = b" " * (end - start)
                continue
            close = _matching_paren(source, paren)
            if close < 0:
                continue
            if word in called:
                _blank(out, start, close + 1)
            elif word in _WRAPPERS:
                out[start:end] = b" " * (end - start)
            elif _is_statement_head(source, start, close):
                if word in _SCOPED:
                    _scoped_guard(source, out, start, end, paren, close)
                else:
                    out[start:end] = b"while" + b" " * (end - start - len(b"while"))
        elif word in bare:
            out[start:end] = b" " * (end - start)
    for match in _TYPE_ARGUMENT.finditer(text):
        start, end = match.span(1)
        out[start:end] = b" " * (end - start)
    return bytes(out)


def _scoped_guard(source: bytes, out: bytearray, start: int, end: int, paren: int, close: int) -> None:
    """`scoped_guard(k, &l) {` -> `if(    guard(k, &l)){`; without a blank after the `)` to turn
    into the closing one, `if          (k, &l) {`: it parses, but the lock is not seen."""
    blank = close + 1
    if paren != end or blank >= len(source) or source[blank] not in b" \t":
        out[start:end] = b"if" + b" " * (end - start - 2)
        return
    guard_at = end - len(b"guard")
    out[start:guard_at] = b"if(" + b" " * (guard_at - start - 3)
    out[blank] = 0x29
    if source[start:end] == b"scoped_cond_guard":   # the fail statement becomes a 0 argument
        commas = _top_level_commas(source, paren, close)
        if len(commas) >= 2:
            out[commas[0] + 1:commas[1]] = b"0" + b" " * (commas[1] - commas[0] - 2)


def _top_level_commas(source: bytes, paren: int, close: int) -> list[int]:
    commas, depth = [], 0
    for i in range(paren + 1, close):
        c = source[i]
        depth += c in b"([{"
        depth -= c in b")]}"
        if c == 0x2C and depth == 0:
            commas.append(i)
    return commas


def _interesting(text: str) -> list[tuple[int, int]]:
    """Spans of the words to rewrite (whole words: _REWRITTEN or containing for_each), in order."""
    spans = {match.span() for match in _CANDIDATE.finditer(text) if match.group() in _REWRITTEN}
    at = text.find("for_each")
    while at >= 0:
        start, end = at, at + len("for_each")
        while start > 0 and _is_word(text[start - 1]):
            start -= 1
        while end < len(text) and _is_word(text[end]):
            end += 1
        spans.add((start, end))
        at = text.find("for_each", end)
    return sorted(spans)


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"   # what \w matches in a str pattern


def _blank(out: bytearray, start: int, end: int) -> None:
    for i in range(start, end):
        if out[i] not in (0x0A, 0x0D):
            out[i] = 0x20


def _is_statement_head(source: bytes, start: int, close: int) -> bool:
    """`name(args)` opens a statement (followed by a body, preceded by a statement boundary)."""
    if _line_is_preprocessor(source, start):
        return False
    after = _skip_space(source, close + 1)
    if after >= len(source) or source[after:after + 1] in (b";", b")", b",", b"=", b"-", b"."):
        return False
    before = _previous_token_end(source, start)
    if before and before[0] in b";{}):":
        return True
    return bool(re.search(rb"\b(else|do)\s*$", source[max(0, start - 40):start]))


def parse(source: bytes) -> tree_sitter.Tree:
    """A tree of `prepare(source)`; node offsets and points are valid for `source` itself."""
    return tree_sitter.Parser(LANGUAGE).parse(prepare(source))


def node_text(source: bytes, node: tree_sitter.Node) -> str:
    """The ORIGINAL text of a node (the tree was built from the prepared text)."""
    return source[node.start_byte:node.end_byte].decode("utf-8", "replace")


@lru_cache(maxsize=None)
def query(text: str) -> tree_sitter.Query:
    return tree_sitter.Query(LANGUAGE, text)


@lru_cache(maxsize=None)
def rule_query(name: str) -> tree_sitter.Query:
    """The query kept as data in queries/<name>.scm (name is usually a rule id)."""
    path = QUERIES_DIR / f"{name}.scm"
    try:
        text = path.read_text()
    except OSError as exc:   # an install without its queries must not lint nothing and pass
        raise CheckFailed(f"query {name}.scm cannot be read from {QUERIES_DIR}: {exc.strerror}") from None
    return query(text)


def captures(q: tree_sitter.Query, node: tree_sitter.Node) -> dict[str, list[tree_sitter.Node]]:
    """Captures of q under node, by capture name (tree-sitter 0.25 QueryCursor API)."""
    return tree_sitter.QueryCursor(q).captures(node)


def matches(q: tree_sitter.Query, node: tree_sitter.Node) -> list[dict[str, list[tree_sitter.Node]]]:
    """One dict of captures per match of q under node."""
    return [found for _, found in tree_sitter.QueryCursor(q).matches(node)]
