"""rcu-deref-unprotected on a read-side section a patch removed (`check` shows the rule the parent's
text): what the section covered is judged as lockdep judges it. Hand-written code of our own."""

from patchbench.checks.run import checkfile
from patchbench.checks.engine.model import FileModel

DEREF = "rcu-deref-unprotected"

HEADER = """
struct port { struct list_head list; struct net_device *dev; };
struct team { struct list_head port_list; struct port __rcu *active; };
struct net_device_ops { int (*ndo_change_rx_flags)(struct net_device *dev, int change); };
"""


def findings(old: str, new: str, previous: bool = True):
    model = FileModel.build("drivers/net/demo.c", (HEADER + new).encode())
    model.previous = (HEADER + old).encode() if previous else None
    return [f for f in checkfile.check_model(model, {DEREF}) if "this patch removes" in f.message]


WALK_UNDER_RTNL = """
static int demo_rx_flags(struct net_device *dev, int change)
{
	struct team *team = netdev_priv(dev);
	struct port *port;

	%s
	list_for_each_entry_rcu(port, &team->port_list, list)
		dev_set_promiscuity(port->dev, change);
	%s
	return 0;
}

static const struct net_device_ops demo_ops = {
	.ndo_change_rx_flags = demo_rx_flags,
};
"""


def test_list_walk_left_under_rtnl_alone_is_a_lockdep_splat():
    old = WALK_UNDER_RTNL % ("rcu_read_lock();", "rcu_read_unlock();")
    new = WALK_UNDER_RTNL % ("", "")
    found = findings(old, new)
    assert [(f.function, f.severity) for f in found] == [("demo_rx_flags", "warning")]
    assert "list_for_each_entry_rcu() needs an RCU read-side section" in found[0].message
    # the same code, never inside a section: lint (no parent) and an unrelated patch say nothing
    assert findings(new, new) == [] and findings(old, new, previous=False) == []
    # the fix that puts the section back
    assert findings(new, old) == []


NETNS = """
static unsigned int demo_advmss(const struct dst_entry *dst)
{
	struct net *net;
	unsigned int mss;

	%s
	net = %s;
	mss = net->ipv4.ip_rt_min_advmss;
	%s
	return mss;
}

static struct dst_ops demo_dst_ops = { .default_advmss = demo_advmss };
"""


def test_dev_net_left_without_the_section_it_had():
    old = NETNS % ("rcu_read_lock();", "dev_net_rcu(dst->dev)", "rcu_read_unlock();")
    new = NETNS % ("", "dev_net(dst->dev)", "")
    found = findings(old, new)
    assert [f.function for f in found] == ["demo_advmss"]
    assert found[0].message.startswith("dev_net() needs an RCU read-side section")
    assert findings(new, old) == []


CALLERS_HOLD = """
static void demo_walk(struct team *team)
{
	struct port *port;

	%s
	list_for_each_entry_rcu(port, &team->port_list, list)
		port->dev = NULL;
	%s
}

static void demo_timer(struct timer_list *t)
{
	struct team *team = from_timer(team, t, timer);

	rcu_read_lock();
	demo_walk(team);
	rcu_read_unlock();
}

static void demo_setup(struct team *team)
{
	timer_setup(&team->timer, demo_timer, 0);
}
"""


def test_a_section_every_caller_provides_may_go():
    old = CALLERS_HOLD % ("rcu_read_lock();", "rcu_read_unlock();")
    new = CALLERS_HOLD % ("", "")
    assert findings(old, new) == []


RTNL_DEREF = """
static int demo_change(struct net_device *dev, int change)
{
	struct team *team = netdev_priv(dev);
	struct port *port;

	%s
	port = %s(team->active);
	if (port)
		dev_set_promiscuity(port->dev, change);
	%s
	return 0;
}

static const struct net_device_ops demo_ops = {
	.ndo_change_rx_flags = demo_change,
};
"""


def test_a_read_turned_into_rtnl_dereference_under_rtnl_may_leave_its_section():
    old = RTNL_DEREF % ("rcu_read_lock();", "rcu_dereference", "rcu_read_unlock();")
    new = RTNL_DEREF % ("", "rtnl_dereference", "")
    assert findings(old, new) == []
    # left a plain rcu_dereference(): under RTNL only, a lockdep splat
    kept = RTNL_DEREF % ("", "rcu_dereference", "")
    assert [f.function for f in checkfile.check_model(_model(kept, old), {DEREF})] == ["demo_change"]


def _model(new: str, old: str) -> FileModel:
    model = FileModel.build("drivers/net/demo.c", (HEADER + new).encode())
    model.previous = (HEADER + old).encode()
    return model


IN_FILE_CALLEE = """
static void demo_reinject(struct team *team)
{
	struct port *port = rcu_dereference(team->active);

	if (port)
		port->dev = NULL;
}

static void demo_flush(struct team *team)
{
	spin_lock_bh(&team->lock);
	demo_reinject(team);
	spin_unlock_bh(&team->lock);
}

static void demo_free_rcu(struct rcu_head *head)
{
	struct team *team = container_of(head, struct team, rcu);

	%s
	demo_flush(team);
	%s
	kfree(team);
}

static void demo_destroy(struct team *team)
{
	call_rcu(&team->rcu, demo_free_rcu);
}
"""


def test_an_in_file_callee_reading_without_its_own_section_needs_the_removed_one():
    old = IN_FILE_CALLEE % ("rcu_read_lock();", "rcu_read_unlock();")
    new = IN_FILE_CALLEE % ("", "")
    found = findings(old, new)
    assert [(f.function, f.severity) for f in found] == [("demo_free_rcu", "warning")]
    assert "demo_flush() needs an rcu_read_lock() section (for rcu_dereference() at line" in found[0].message
    assert findings(new, old) == []


HOISTED = """
static void demo_send(struct sk_buff *skb)
{
	struct net *net%s;

	rcu_read_lock();
%s	net->mib.sent++;
	rcu_read_unlock();
	kfree_skb(skb);
}

static void demo_timer(struct work_struct *work)
{
	struct sk_buff *skb = demo_take(work);

	demo_send(skb);
}

void demo_init(struct work_struct *work)
{
	INIT_WORK(work, demo_timer);
}
"""


def test_dev_net_taken_out_of_the_section_that_still_stands():
    """The section stays, but the patch reads the namespace above it: the netns may be freed by
    the time the section opens (a device moved to another namespace that is then dismantled)."""
    old = HOISTED % ("", "\tnet = dev_net_rcu(skb->dev);\n")
    new = HOISTED % (" = dev_net(skb->dev)", "")
    found = _moved(old, new)
    assert [(f.function, f.line - HEADER.count("\n")) for f in found] == [("demo_send", 4)]
    assert found[0].message.startswith("dev_net() needs an RCU read-side section: this patch moves it out "
                                       "of the rcu_read_lock() section that covered it")
    # the fix, a read kept inside (renamed only), and code that always read above the section
    assert _moved(new, old) == [] and _moved(new, new) == []
    assert _moved(old, HOISTED % ("", "\tnet = dev_net(skb->dev);\n")) == []
    # the route's namespace, by the accessor pair of include/net/dst.h
    routed = _moved(HOISTED % ("", "\tnet = skb_dst_dev_net_rcu(skb);\n"), HOISTED % (" = skb_dst_dev_net(skb)", ""))
    assert [f.message.split(":")[0] for f in routed] == ["skb_dst_dev_net() needs an RCU read-side section"]


def test_dev_net_hoisted_by_the_patch_that_removes_the_section():
    """The patch removes the section and reads the namespace in the declarations instead of
    `dev_net_rcu()` inside it (the shape of the code before the 2025 "use RCU protection in ..."
    fixes): the hoisted read lies outside the lines the section covered, and is judged all the
    same; a read the parent made outside the section too is not."""
    old = HOISTED % ("", "\tnet = dev_net_rcu(skb->dev);\n")
    new = HOISTED.replace("\trcu_read_lock();\n", "").replace("\trcu_read_unlock();\n", "") % (" = dev_net(skb->dev)", "")
    found = [f for f in checkfile.check_model(_model(new, old), {DEREF}) if "this patch removes" in f.message]
    assert [(f.function, f.line - HEADER.count("\n")) for f in found] == [("demo_send", 4)]
    assert found[0].message.startswith("dev_net() needs an RCU read-side section: this patch removes the "
                                       "rcu_read_lock() section that covered it")
    always = HOISTED % (" = dev_net(skb->dev)", "")
    assert not [f for f in checkfile.check_model(_model(new, always), {DEREF}) if "this patch removes" in f.message]


def _moved(old: str, new: str) -> list:
    return [f for f in checkfile.check_model(_model(new, old), {DEREF}) if "this patch moves" in f.message]
