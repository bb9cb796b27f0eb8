"""Result pages and reply mails from an outcome with every kind of detail (build warnings, a boot
splat), and the boot console excerpt; no kernel needed."""

from __future__ import annotations

from email import message_from_string, policy

from patchbench.bot import pages, replies
from patchbench.bot.pipeline import boot_excerpt, checks_of

CONSOLE = """[    0.000000] Linux version 6.1.0 (patchbench@localhost)
[    1.200000] virtio_net virtio0 eth0: renamed
[    2.345678] ------------[ cut here ]------------
[    2.345679] WARNING: CPU: 0 PID: 1 at net/core/dev.c:3201 netif_wake_subqueue+0x4a/0x50
[    2.345680] Call Trace:
[    2.345681]  <TASK>
[    2.345682]  tun_ring_recv+0x1a2/0x1f0
[    2.345683]  tun_do_read+0x88/0x140
[    3.000000] PATCHBENCH-SMOKE: FAIL splat
"""


def outcome() -> dict:
    return {
        "id": 12, "name": "tun: <wake> & consume", "version": 2, "web_url": "http://pw/series/12",
        "total": 2, "submitter": {"name": "Ada Series", "email": "ada@example.org"},
        "cover": {"id": 10, "msgid": "<cover.1@example.org>", "name": "[net-next,v2,0/2] tun"},
        "patches": [{"id": 13, "msgid": "<p1@example.org>", "name": "[net-next,v2,1/2] tun: one", "web_url": None},
                    {"id": 14, "msgid": "<p2@example.org>", "name": "[net-next,v2,2/2] tun: two", "web_url": None}],
        "status": "applied", "base": "a" * 40, "base_reason": "branch net-next",
        "results": [
            {"stage": "apply", "patch": None, "state": "success", "description": "applied"},
            {"stage": "build", "patch": 13, "state": "warning", "description": "build pass; 1 new W=1 warning(s)",
             "warnings": [{"file": "drivers/net/tun.c", "line": 2190, "function": "tun_ring_consume",
                           "message": "unused variable 'dev'", "flag": "-Wunused-variable", "kind": "warning"}]},
            {"stage": "build", "patch": 14, "state": "success", "description": "build pass; no new warnings",
             "warnings": []},
            {"stage": "boot", "patch": None, "state": "fail", "description": "boot fail: splat", "worker": "w2@farm",
             "excerpt": "WARNING: CPU: 0 PID: 1 at net/core/dev.c:3201 netif_wake_subqueue+0x4a/0x50\n"
                        " tun_ring_recv+0x1a2/0x1f0"},
        ],
    }


def test_boot_excerpt_starts_at_the_splat(tmp_path):
    console = tmp_path / "console.log"
    console.write_text(CONSOLE)
    excerpt = boot_excerpt(console).splitlines()
    assert excerpt[0] == "WARNING: CPU: 0 PID: 1 at net/core/dev.c:3201 netif_wake_subqueue+0x4a/0x50"
    assert " tun_ring_recv+0x1a2/0x1f0" in excerpt and "PATCHBENCH-SMOKE: FAIL splat" in excerpt
    assert boot_excerpt(tmp_path / "absent.log") == ""


def test_series_level_results_go_on_every_patch():
    checks = checks_of(outcome())
    assert sorted((patch, context) for patch, context, _, _ in checks) == [
        (13, "patchbench-apply"), (13, "patchbench-boot"), (13, "patchbench-build"),
        (14, "patchbench-apply"), (14, "patchbench-boot"), (14, "patchbench-build")]


def test_pages_show_build_warnings_and_the_boot_console_escaped(tmp_path):
    pages.write_pages(tmp_path, outcome())
    series_page = (tmp_path / "series/12/index.html").read_text()
    patch_page = (tmp_path / "series/12/patch-13.html").read_text()
    assert "tun: &lt;wake&gt; &amp; consume" in series_page and "<wake>" not in series_page
    assert "drivers/net/tun.c:2190" in patch_page and "[-Wunused-variable]" in patch_page
    assert "unused variable &#x27;dev&#x27;" in patch_page
    assert "netif_wake_subqueue+0x4a/0x50" in patch_page   # the series-level boot result is on each patch
    assert "boot ran on farm worker <code>w2@farm</code>" in patch_page   # which worker: the page says, not the check
    assert "<script" not in series_page + patch_page
    assert not list(tmp_path.rglob(".*"))   # no scratch files left behind
    assert pages.page_url("https://ci/x/", 12, 13) == "https://ci/x/series/12/patch-13.html"
    assert pages.page_url(None, 12, 13) is None


def test_only_failures_are_mailed_and_series_level_ones_answer_the_cover():
    mails = replies.compose(outcome(), "CI <ci@example.org>", ["netdev@example.org"], lambda patch: None)
    assert len(mails) == 1   # the build warning is not a failure; the boot failure is series-level
    message_id, text = mails[0]
    msg = message_from_string(text, policy=policy.default)
    assert msg["In-Reply-To"] == msg["References"] == "<cover.1@example.org>"
    assert msg["Message-Id"] == message_id and message_id.endswith("@example.org>")
    assert msg["To"] == "Ada Series <ada@example.org>, netdev@example.org"
    body = msg.get_content()
    assert "[boot] boot fail: splat" in body and "netif_wake_subqueue" in body
    assert "w2@farm" not in text   # the mail is the same whichever worker booted the series
    assert "patchbench check cover.1@example.org --tree . --base aaaaaaaaaaaa" in body
    # the same result makes the same mail
    assert replies.compose(outcome(), "CI <ci@example.org>", ["netdev@example.org"], lambda patch: None)[0][0] == message_id
