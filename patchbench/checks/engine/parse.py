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

import bisect
import re
from functools import lru_cache
from pathlib import Path

import tree_sitter
import tree_sitter_c

from patchbench.errors import CheckFailed

LANGUAGE = tree_sitter.Language(tree_sitter_c.language())

# The queries are data in the top-level queries/ directory; patchbench/queries links to it, so that
# they are found at the same place inside the package in a checkout and in an installed wheel.
QUERIES_DIR = Path(__file__).resolve().parents[2] / "queries"

_BARE_ANNOTATIONS = (
    "__rcu __user __iomem __percpu __force __bitwise __private __kernel __safe __nocast "
    "__init __exit __initdata __initconst __exitdata __devinit __devexit __net_init __net_exit "
    "__net_initdata __ref __refdata __cold __hot __maybe_unused __always_unused __used __weak "
    "__read_mostly __ro_after_init __packed __pure __must_check __always_inline noinline "
    "__noreturn __visible __noclone __latent_entropy __randomize_layout __no_randomize_layout "
    "__cacheline_aligned __cacheline_aligned_in_smp ____cacheline_aligned "
    "____cacheline_aligned_in_smp ____cacheline_internodealigned_in_smp __aligned_largest "
    "__counted_by __nonstring __noinline_for_stack __printf __malloc notrace __sched __kprobes "
    "__cond_lock noinline_for_stack __no_profile __nocfi __noscs __flatten "
    "__always_unused __no_sanitize_address __no_kcsan __nostackprotector"
).split()
# Of these, the ones that take a parenthesised argument list when followed by "(".
_CALL_ANNOTATIONS = (
    "__aligned __must_hold __acquires __releases __attribute__ __attribute __printf __section "
    "__counted_by __diag_ignore __scanf __alloc_size __assume_aligned __nonstring __designated_init "
    "__free __cleanup __guarded_by __pt_guarded_by __counted_by_le __counted_by_be __sized_by"
).split()
_WRAPPERS = ("likely", "unlikely")
# `__alignof__(*hdr)`: tree-sitter-c takes only a type there; sizeof takes both and reads the same.
_ALIGNOF = ("__alignof__", "__alignof")

# The words the pre-pass rewrites, besides every word containing "for_each". Those starting with
# "__" (all but a few) are found by one pattern that begins with that literal, which re's search
# skips to at C speed (the kernel spells many other words with "__": candidates looked up one by
# one cost five times more); a match inside a longer word is dropped. The others are searched for.
_SCOPED = ("scoped_guard", "scoped_cond_guard")
_REWRITTEN = frozenset({*_BARE_ANNOTATIONS, *_CALL_ANNOTATIONS, *_WRAPPERS, *_SCOPED, *_ALIGNOF})
_UNDERSCORED = re.compile("__(?:" + "|".join(sorted((w[2:] for w in _REWRITTEN if w.startswith("__")),
                                                    key=lambda w: (-len(w), w))) + r")(?!\w)")
_PLAIN_WORDS = tuple(sorted(w for w in _REWRITTEN if not w.startswith("__")))
# A type given as a macro argument: `container_of(p, struct foo_sock, sk)`.
# With a pointer (`DECLARE_SOCKADDR(struct sockaddr_in *, sin, ...)`) the stars go too.
_TYPE_ARGUMENT = re.compile(r"[(,]\s*(struct|union|enum)\s+\w+(?:\s+__\w+)?(\s*\*+)?\s*(?:,|\)(?!\s*\{))")
# A several-word type as a macro's first argument (`min_t(unsigned int, a, b)`): its blanks become
# underscores, so it parses as one identifier. Only before a comma: `(unsigned int)x` is a cast.
_WORDY_TYPE_ARGUMENT = re.compile(r"\(\s*((?:unsigned|signed|long|short)(?:[ \t]+(?:unsigned|signed|int|long|short|char))+)\s*,")


_PAREN_STOPS = re.compile(rb"[()\"'\n]")   # what matching_paren looks at; it skips the rest


def matching_paren(src: bytes, open_at: int) -> int:
    """Index of the `)` closing the `(` at open_at, or -1 (strings and chars are skipped)."""
    depth = 0
    i = open_at
    n = len(src)
    search = _PAREN_STOPS.search
    while (stop := search(src, i)) is not None:
        i = stop.start()
        c = src[i]
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return i
        elif c == 0x0A:
            if i + 1 < n and src[i + 1] == 0x23:
                return -1  # ran into a preprocessor line: give up rather than span it
        else:  # skip a string or char literal
            quote = c
            i += 1
            while i < n and src[i] != quote:
                i += 2 if src[i] == 0x5C else 1
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
            close = matching_paren(source, paren)
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
        elif word in _ALIGNOF:
            out[start:end] = b"sizeof" + b" " * (end - start - len(b"sizeof"))
    for start, close in _iterator_heads(source, text):
        out[start:close] = _as_loop(source[start:close])
    for match in _TYPE_ARGUMENT.finditer(text):
        for group in (1, 2):
            start, end = match.span(group)
            out[start:end] = b" " * (end - start)
    for match in _WORDY_TYPE_ARGUMENT.finditer(text):
        start, end = match.span(1)
        out[start:end] = re.sub(rb"[ \t]", b"_", source[start:end])
    _never_compiled(out)
    return bytes(out)


_MACRO = re.compile(rb"^[ \t]*#[ \t]*(define|undef)[ \t]+(\w+)", re.M)
_NEGATED = re.compile(rb"^!\s*defined\s*\(?\s*(\w+)\s*\)?$")
_AFFIRMED = re.compile(rb"^defined\s*\(?\s*(\w+)\s*\)?$")


def _condition(word: bytes, condition: bytes, defined: set[bytes]) -> bool | None:
    """Whether a conditional's first branch is compiled, where the file alone decides it: `#if 0`,
    `#if 1`, and `#ifdef`/`#ifndef`/`#if [!]defined()` of a macro the file defines above outside
    any conditional (one it does not define may come from a header or the build: undecided)."""
    condition = condition.split(b"/*")[0].split(b"//")[0].strip()
    if word == b"if" and condition in (b"0", b"1"):
        return condition == b"1"
    name, compiled_if_defined = None, True
    if word in (b"ifdef", b"ifndef"):
        name, compiled_if_defined = condition, word == b"ifdef"
    elif word == b"if" and (match := _NEGATED.match(condition) or _AFFIRMED.match(condition)):
        name, compiled_if_defined = match.group(1), match.re is _AFFIRMED
    if name is None or name not in defined:
        return None
    return compiled_if_defined


def _never_compiled(out: bytearray) -> None:
    """Branches of conditionals the preprocessor never compiles (see _condition) become blanks:
    `#ifndef final_version` after the file's own `#define final_version` holds no code."""
    text = bytes(out)
    events = sorted([(m.start(), m) for m in _DIRECTIVE.finditer(text)] +
                    [(m.start(), m) for m in _MACRO.finditer(text)], key=lambda event: event[0])
    defined: set[bytes] = set()
    stack: list[list] = []   # per open conditional: [state, where its dead text starts]
    for _, match in events:
        word = match.group(1)
        dead = any(state in ("dead", "dead-after") for state, _ in stack)
        if word in (b"define", b"undef"):
            if not stack:
                (defined.add if word == b"define" else defined.discard)(match.group(2))
            continue
        if word in (b"if", b"ifdef", b"ifndef"):
            compiled = None if dead else _condition(word, match.group(0)[match.end(1) - match.start():], defined)
            stack.append(["dead", match.end()] if compiled is False else
                         ["live-first", None] if compiled is True else ["open", None])
        elif not stack:
            continue
        elif word in (b"else", b"elif"):
            state, since = stack[-1]
            if state == "dead":
                _blank(out, since, match.start())
                stack[-1] = ["open", None]
            elif state == "live-first":
                stack[-1] = ["dead-after", match.end()]
        elif word == b"endif":
            state, since = stack.pop()
            if state in ("dead", "dead-after"):
                _blank(out, since, match.start())


# Words that open a statement with a parenthesis and are not macros.
_KEYWORDS = frozenset("if while for switch return sizeof do case goto typeof __typeof__ _Static_assert "
                      "static_assert asm __asm__ defined else".split())
# An identifier called at the start of a line (where iterator macros stand). Decided by the pattern,
# not by the loop below (a third of all lines are keywords, a third plain calls): not a keyword,
# and not a plain statement on its line, `name(args);`, with arguments of two levels of
# parentheses at most and no quotes. It starts with a line break rather than `^`, a literal that
# re's search skips to (a function body never starts a file).
_LINE_CALL = re.compile(r"\n[ \t]*(?!(?:" + "|".join(sorted(_KEYWORDS)) + r")\b)([A-Za-z_]\w*)[ \t]*\("
                        r"(?!(?:[^()\n\"']|\((?:[^()\n\"']|\([^()\n\"']*\))*\))*\)[ \t]*;)")
_OPENING, _CLOSING = re.compile(r"\{"), re.compile(r"\}")


def _iterator_heads(source: bytes, text: str) -> list[tuple[int, int]]:
    """Iterator macros recognised by shape, whatever their name: inside a function body, a call at
    a statement boundary followed directly by a block or a statement (`skb_queue_walk_safe(q, s, t) {`,
    `skb_list_walk_safe(segs, skb, next)` then a statement), not by `;`. (start of the name, end of
    the name) of each; names with for_each are handled with the other rewritten words."""
    opening = [m.start() for m in _OPENING.finditer(text)]
    closing = [m.start() for m in _CLOSING.finditer(text)]
    heads = []
    for match in _LINE_CALL.finditer(text):
        name = match.group(1)
        if "for_each" in name or name in _REWRITTEN or name.isupper():
            continue
        start, paren = match.start(1), match.end(0) - 1
        if bisect.bisect_left(opening, start) - bisect.bisect_left(closing, start) <= 0:
            continue   # not inside a function body
        close = matching_paren(source, paren)
        if close < 0 or not _is_statement_head(source, start, close):
            continue
        after = _skip_space(source, close + 1)
        if after < len(source) and (source[after] == 0x7B or _starts_statement(source, after)):
            heads.append((start, match.end(1)))
    return heads


def _starts_statement(source: bytes, at: int) -> bool:
    """An identifier (not an operator or `;`) starts at `at`: what follows a loop head."""
    c = source[at:at + 1]
    return c.isalpha() or c == b"_"


def _as_loop(name: bytes) -> bytes:
    return b"while" + b" " * (len(name) - len(b"while")) if len(name) >= 5 else name


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
    spans = {match.span() for match in _UNDERSCORED.finditer(text)
             if match.start() == 0 or not _is_word(text[match.start() - 1])}
    for word in _PLAIN_WORDS:
        at = text.find(word)
        while at >= 0:
            end = at + len(word)
            if (at == 0 or not _is_word(text[at - 1])) and (end == len(text) or not _is_word(text[end])):
                spans.add((at, end))
            at = text.find(word, end)
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
    """A tree of `prepare(source)`; node offsets and points are valid for `source` itself.

    A function that `#if` blocks cut across its statements (`#if IS_ENABLED(CONFIG_IPV6)` before a
    `} else if (...) {`) does not parse; where that happens, its conditionals keep their first
    branch (the directives and the other branches become blanks) and the file is parsed again.
    Conditionals that parse stay, and the walk takes both of their branches (see flow)."""
    parser = tree_sitter.Parser(LANGUAGE)
    prepared = prepare(source)
    tree = parser.parse(prepared)
    broken = [node for node in tree.root_node.children if node.has_error]
    if not broken:
        return tree
    flattened = bytearray(prepared)
    for node in broken:
        _first_branches(flattened, node.start_byte, node.end_byte)
    _inner_defines(flattened)
    if flattened == prepared:
        return tree
    retried = parser.parse(bytes(flattened))
    if sum(node.has_error for node in retried.root_node.children) < len(broken):
        return retried
    return tree


_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b[^\n]*(?:\\\n[^\n]*)*", re.M)


# (a line ending in a backslash continues the directive)
_DEFINE = re.compile(rb"^[ \t]*#[ \t]*(define|undef)\b[^\n]*(?:(?<=\\)\n[^\n]*)*", re.M)


def _inner_defines(out: bytearray) -> None:
    """`#define` / `#undef` lines inside braces (an initialiser whose entries are named by a
    `#define FOO_SNDBUF 0` between them) become blanks: tree-sitter takes a directive
    only between declarations, and one inside an initialiser breaks the rest of the file."""
    depth, at = 0, 0
    for match in _DEFINE.finditer(bytes(out)):
        depth += out[at:match.start()].count(b"{") - out[at:match.start()].count(b"}")
        at = match.start()
        if depth > 0:
            _blank(out, match.start(), match.end())


def _first_branches(out: bytearray, start: int, end: int) -> None:
    """In out[start:end], the conditionals opened inside braces keep only their first branch."""
    depth = 0       # brace depth from `start`, counted in the text that is kept
    stack = []      # per open conditional: (braces depth at #if, is it kept, dropping the rest)
    at = start
    for match in _DIRECTIVE.finditer(bytes(out[start:end])):
        begin, finish = start + match.start(), start + match.end()
        dropping = any(drop for _, _, drop in stack)
        if not dropping:
            depth += out[at:begin].count(b"{") - out[at:begin].count(b"}")
        else:
            _blank(out, at, begin)
        at = finish
        word = match.group(1)
        if word in (b"if", b"ifdef", b"ifndef"):
            inside = depth > 0
            stack.append((depth, inside, False))
            if inside:
                _blank(out, begin, finish)
        elif stack:
            opened, inside, _ = stack[-1]
            if word == b"endif":
                stack.pop()
            else:
                stack[-1] = (opened, inside, inside)   # #else / #elif: dropped when inside a body
            if inside:
                _blank(out, begin, finish)
    if any(drop for _, _, drop in stack):
        _blank(out, at, end)


def node_text(source: bytes, node: tree_sitter.Node) -> str:
    """The ORIGINAL text of a node (the tree was built from the prepared text)."""
    return source[node.start_byte:node.end_byte].decode("utf-8", "replace")


def operator(node: tree_sitter.Node) -> str:
    """The operator of an expression node (`->`, `*`, `!`, `==`, `+=`), "" where it has none."""
    found = node.child_by_field_name("operator")
    return found.type if found is not None else ""


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


@lru_cache(maxsize=None)
def rule_query_capturing(name: str, capture: str) -> tree_sitter.Query:
    """rule_query(name) with only its patterns that capture `capture`: a user of one capture
    does not pay for the nodes the other patterns would hand back."""
    whole = rule_query(name)   # fails as rule_query() does when the file cannot be read
    text = (QUERIES_DIR / f"{name}.scm").read_bytes()
    narrowed = tree_sitter.Query(LANGUAGE, text.decode())   # disable_pattern changes the query
    captured = re.compile(rb"@" + re.escape(capture.encode()) + rb"(?![\w.-])")
    for index in range(whole.pattern_count):
        if not captured.search(text[whole.start_byte_for_pattern(index):whole.end_byte_for_pattern(index)]):
            narrowed.disable_pattern(index)
    return narrowed


def captures(q: tree_sitter.Query, node: tree_sitter.Node) -> dict[str, list[tree_sitter.Node]]:
    """Captures of q under node, by capture name (tree-sitter 0.25 QueryCursor API), each list in
    document order (enclosing nodes first). The cursor's own order is not that for nested
    captures, and differs between processes: a rule quoting "the first" access took another one
    from run to run."""
    return {name: sorted(nodes, key=_document_order)
            for name, nodes in tree_sitter.QueryCursor(q).captures(node).items()}


def _document_order(node: tree_sitter.Node) -> tuple[int, int]:
    return node.start_byte, -node.end_byte


def matches(q: tree_sitter.Query, node: tree_sitter.Node) -> list[dict[str, list[tree_sitter.Node]]]:
    """One dict of captures per match of q under node, in the cursor's order (its users sort what
    they keep; sorting here cost half as much again as the matching, 4% of a lint)."""
    return [found for _, found in tree_sitter.QueryCursor(q).matches(node)]