"""The commit message and identities a patch becomes (b4 am's trailer placement, git am's whitespace)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from patchbench.series import Patch
from patchbench.tree.message import Identity, commit_message, git_date, parse_identity


def patch(body: str, trailers: list[str] | None = None, subject: str = "net: fix the thing") -> Patch:
    return Patch(index=1, subject=subject, message_id="m@x", author="A <a@x>", date=None, body=body, diff="",
                 trailers=trailers or [])


def test_collected_trailers_follow_the_own_ones_without_repeats():
    body = "Explain.\n\nFixes: 0123456789ab (\"net: break\")\nSigned-off-by: A <a@x>\n"
    message = commit_message(patch(body, ["Fixes: 0123456789ab (\"net: break\")", "signed-off-by:  A <a@x>",
                                          "Reviewed-by: R <r@x>", "Reviewed-by: R <r@x>"]))
    assert message == ("net: fix the thing\n\nExplain.\n\nFixes: 0123456789ab (\"net: break\")\n"
                       "Signed-off-by: A <a@x>\nReviewed-by: R <r@x>\n")


def test_a_body_without_trailers_gets_a_trailer_paragraph_and_whitespace_is_cleaned_like_git_am():
    message = commit_message(patch("\n\nFirst line.   \n\n\n\nSecond paragraph.\n\n", ["Acked-by: K <k@x>"]))
    assert message == "net: fix the thing\n\nFirst line.\n\nSecond paragraph.\n\nAcked-by: K <k@x>\n"
    assert commit_message(patch("", ["Acked-by: K <k@x>"])) == "net: fix the thing\n\nAcked-by: K <k@x>\n"
    assert commit_message(patch("")) == "net: fix the thing\n"


def test_signoff_is_added_once_and_new_trailers_go_above_the_appliers_own():
    me = Identity("Maint Ainer", "m@x")
    assert commit_message(patch("Body.\n\nSigned-off-by: A <a@x>\n", ["Tested-by: T <t@x>"]), me).endswith(
        "Signed-off-by: A <a@x>\nTested-by: T <t@x>\nSigned-off-by: Maint Ainer <m@x>\n")
    assert commit_message(patch("Body.\n\nSigned-off-by: Maint Ainer <m@x>\n", ["Tested-by: T <t@x>"]), me).endswith(
        "\n\nTested-by: T <t@x>\nSigned-off-by: Maint Ainer <m@x>\n")


def test_identities_and_dates():
    assert parse_identity("Doe, Jane <jane@x>") == Identity("Doe, Jane", "jane@x")
    assert parse_identity('"Doe, \\"JD\\" Jane" <jane@x>') == Identity('Doe, "JD" Jane', "jane@x")
    assert parse_identity("jane@x") == Identity("jane@x", "jane@x")
    sent = datetime(2022, 10, 25, 13, 38, 42, tzinfo=timezone(timedelta(hours=-4)))
    assert git_date(sent) == "1666719522 -0400"
    assert git_date(datetime(2024, 1, 1)) == "1704067200 +0000"
