"""Current kernel syntax parses, conditionals in bodies are walked on every branch, iterator macros
are recognised by shape: on our own fixtures, and on the real drivers/net and net/core of both kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchbench.checks.run import checkfile
from patchbench.checks.engine.model import FileModel
from tests.test_checks_rules import expected

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "flow" / "preproc_and_iterators.c"

CLEANUP_H = b"""
DEFINE_FREE(demo_free, struct demo *, if (_T) demo_release(_T))
DEFINE_GUARD(demo_lock, struct demo *, demo_lock(_T), demo_unlock(_T))

static struct demo *demo_make(struct demo_pool *pool, unsigned long size)
{
	struct demo *d __free(demo_free) = demo_alloc(pool);
	unsigned int len = min_t(unsigned int, size, 64);
	DECLARE_SOCKADDR(struct sockaddr_in *, sin, pool->addr);

	if (!d)
		return NULL;
	BUILD_BUG_ON(__alignof__(*d) != __alignof__(d->head));
	guard(demo_lock)(d);
	scoped_guard(spinlock_bh, &pool->lock) {
		pool->count += len;
	}
	if (sin->sin_port)
		return no_free_ptr(d);
	return_ptr(d);
}

static noinline_for_stack int demo_after(struct demo *d)
{
	return d->count;
}
"""


def _functions_with_errors(model: FileModel) -> list[str]:
    return [f.name for f in model.functions.values() if f.node.has_error]


def test_cleanup_h_and_type_arguments_parse_without_errors():
    model = FileModel.build("demo.c", CLEANUP_H)
    assert sorted(model.functions) == ["demo_after", "demo_make"]
    assert _functions_with_errors(model) == []
    assert "no_free_ptr" in {c.name for c in model.functions["demo_make"].calls}


def test_conditionals_and_iterator_shapes_give_exactly_the_marked_findings():
    source = FIXTURE.read_bytes()
    model = FileModel.build(str(FIXTURE), source)
    assert _functions_with_errors(model) == []
    found = checkfile.check_source(str(FIXTURE), source, {"lock-imbalance"})
    assert {(f.line, f.rule) for f in found} == expected(source)


# Share of the functions with ERROR nodes in drivers/net/*.c and net/core/*.c, measured when the
# pre-pass learnt __free, several-word type arguments, iterator shapes and #if blocks cutting across
# statements (before: 82 of 3156 on 6.1.170, 120 of 3778 on 7.2.9; after: 24 and 41, 0.76% and
# 1.09%). A share, not a count: another point release adds and removes functions.
MAX_WITH_ERRORS = {"6.1": 0.008, "newest": 0.012}


@pytest.mark.kernel
@pytest.mark.parametrize("version", ["6.1", "newest"])
def test_real_kernel_functions_parse(version, kernel_tree, kernel_tree_new):
    tree = kernel_tree if version == "6.1" else kernel_tree_new
    files = sorted([*(tree / "drivers" / "net").glob("*.c"), *(tree / "net" / "core").glob("*.c")])
    broken, total = [], 0
    for path in files:
        model = FileModel.build(str(path), path.read_bytes())
        total += len(model.functions)
        broken += [f"{path.name}:{name}" for name in _functions_with_errors(model)]
    assert total > 3000
    assert len(broken) <= MAX_WITH_ERRORS[version] * total, broken
    if version == "newest":   # the issue's example: 11 functions of 7.2's virtio_net.c had ERROR nodes
        assert not [name for name in broken if name.startswith("virtio_net.c:")]
