"""signed: a patch mail that carries a patatt signature (X-Developer-Signature) must validate.

patatt (the library `b4` and netdev's CI use) checks each signature of the mail as it was read:
the signed headers and the message and diff as `git mailinfo` splits them, so re-wrapping in
transit does not break it, but any change to what was signed does. The public keys come from the
keyrings patatt looks in by default: the repository's own (`.keys` and `.local-keys` in the base
commit, the `refs/meta/keyring` branch) and the user's (`$XDG_DATA_HOME/patatt/public`). A mail
without a signature is not reported (most patches are not signed); a signature that does not
validate, or is malformed, is an error; one whose key no keyring has is a warning.
"""

from __future__ import annotations

import os
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.context import PatchContext, Skip, message_finding

ID = "signed"
MESSAGE = "a patatt X-Developer-Signature on a patch mail validates"
NEEDS = ()


def keyrings(context: PatchContext) -> list[str]:
    """patatt's keyring sources: the repository's, at the base, then the user's (if it has one)."""
    git_dir, base = context.git_dir, context.applied.base
    sources = [f"ref:{git_dir}:{base}:.keys", f"ref:{git_dir}:{base}:.local-keys",
               f"ref:{git_dir}:refs/meta/keyring:"]
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    if (data_home / "patatt" / "public").is_dir():
        sources.append(str(data_home / "patatt" / "public"))
    return sources


def run(context: PatchContext) -> list[Finding]:
    try:
        import patatt
    except ImportError:
        raise Skip("patatt is not installed (pip install 'patchbench[signed]')") from None
    found = []
    sources = keyrings(context)
    for patch in context.applied.applied:
        mail = context.mail(patch)
        if mail is None or not mail.raw:
            continue
        for result, identity, _, _, algorithm, errors in patatt.validate_message(mail.raw, sources):
            who = f"{identity or 'no identity'} ({algorithm or 'no algorithm'})"
            detail = "; ".join(errors)
            if result == patatt.RES_BADSIG:
                found.append(message_finding(ID, "error", f"the signature of {who} does not validate: the mail "
                                                          f"is not what was signed ({detail})", patch.index))
            elif result == patatt.RES_NOKEY:
                found.append(message_finding(ID, "warning", f"signed by {who}, but no keyring has that key "
                                                            f"({detail})", patch.index))
            elif result == patatt.RES_ERROR:
                found.append(message_finding(ID, "error", f"a malformed signature: {detail}", patch.index))
    return found
