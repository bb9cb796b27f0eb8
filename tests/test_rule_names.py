"""Issue 25: no queue verdict hangs on a function's name.

Every function of each queue fixture is renamed (the text written to tmp_path), once to neutral
names and once to names holding the words the rules used to read (reset, poll, thread, timeout,
open): the findings (rule, line, severity) must not change. The name conventions the facts table
still keeps (kernel_facts.toml, queue.names) are matched on whole words, and each has a fixture
here that fails without it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchbench.checks.kernel import facts as kfacts
from patchbench.checks.run import checkfile
from patchbench.checks.engine.model import FileModel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks" / "queue"
QUEUE_RULES = {"queue-stop-unmatched", "queue-wake-wrong-queue"}
SCHEMES = {"neutral": "worker_{}", "misleading": "thread_reset_poll_open_timeout_{}"}


def verdicts(path: Path) -> list[tuple[str, int, str]]:
    return sorted((f.rule, f.line, f.severity) for f in checkfile.check_source(path.name, path.read_bytes(), QUEUE_RULES))


def renamed(source: str, names: dict[str, str]) -> str:
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
    return pattern.sub(lambda m: names[m.group(1)], source)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.c")))
def test_renaming_every_function_keeps_the_verdicts(tmp_path, name, scheme):
    source = (FIXTURES / name).read_text()
    model = FileModel.build(name, source.encode())
    names = {fn: SCHEMES[scheme].format(n) for n, fn in enumerate(sorted(model.functions))}
    (tmp_path / name).write_text(renamed(source, names))
    assert verdicts(tmp_path / name) == verdicts(FIXTURES / name)


def test_reset_work_renamed_tx_thread_keeps_the_finding(tmp_path):
    """The issue's experiment: `read` inside `thread` once made the reset work a consumer and
    silenced the unmatched stop."""
    source = (FIXTURES / "tp_wake_only_reset.c").read_text()
    (tmp_path / "tp_wake_only_reset.c").write_text(
        source.replace("wren_reset_task", "wren_tx_thread").replace("wren_poll", "wren_worker_a"))
    found = verdicts(tmp_path / "tp_wake_only_reset.c")
    assert found == verdicts(FIXTURES / "tp_wake_only_reset.c") == [("queue-stop-unmatched", 20, "error")]


# -- the kept name conventions ------------------------------------------------------------------

def test_name_conventions_match_whole_words():
    xmit = kfacts.name_convention("queue", "names", "xmit_helper")
    assert xmit.why
    assert xmit.matches("owl_send") and xmit.matches("__owl_send_pkt") and xmit.matches("owl_dma_tx")
    assert not xmit.matches("owl_sendmsg") and not xmit.matches("owl_txq_init") and not xmit.matches("owl_next")


# A transmit helper that only another file of the driver calls (its ndo_start_xmit is there): the
# stop is a flow-control stop, and nothing in this file wakes the queue.
_SPLIT_XMIT = """
#include <linux/netdevice.h>

struct owl_priv { struct net_device *dev; struct napi_struct napi; unsigned int used; };

int {name}(struct owl_priv *op, struct sk_buff *skb)
{
	if (++op->used >= 64)
		netif_stop_queue(op->dev);
	dev_kfree_skb_any(skb);
	return 0;
}

static int owl_poll(struct napi_struct *napi, int budget)
{
	struct owl_priv *op = container_of(napi, struct owl_priv, napi);

	op->used = 0;
	napi_complete(napi);
	return 0;
}

void owl_setup(struct owl_priv *op)
{
	netif_napi_add(op->dev, &op->napi, owl_poll);
}
"""


def test_xmit_helper_convention_makes_a_foreign_callers_stop_flow_control(tmp_path):
    """Without queue.names.xmit_helper the helper would be a root of unknown purpose (a consumer)
    and its stop no flow-control stop: the missing wake would go unreported."""
    for name, rules in (("owl_send", ["queue-stop-unmatched"]), ("owl_dma_tx", ["queue-stop-unmatched"]),
                        ("owl_push", [])):
        path = tmp_path / "owl.c"
        path.write_text(_SPLIT_XMIT.replace("{name}", name))
        assert [rule for rule, _, _ in verdicts(path)] == rules, name
