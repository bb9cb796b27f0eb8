"""Side by side with b4 on the thread shapes of tests/support/thread_cases.py: which patches each tool
takes (by Message-Id) and which trailers each puts on them (Signed-off-by aside).

    PYTHONPATH=$PWD python3 bench/b4_agreement.py        # needs `b4` on PATH (pip install b4)

For each case: what we give, what b4 gives (`b4 --offline-mode am -m MBOX -o -`), whether they agree,
and whether each meets what the case expects.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchbench.mail import read_mails  # noqa: E402
from patchbench.mail.content import message_trailers, split_patch  # noqa: E402
from tests.support.thread_cases import Case, cases  # noqa: E402

Reading = list[tuple[str, list[str]]] | str     # (Message-Id, trailers) per patch, or an error


def ours(mbox: Path) -> Reading:
    proc = subprocess.run([sys.executable, "-m", "patchbench", "series", str(mbox), "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return f"exit {proc.returncode}: {proc.stderr.strip()}"
    return [(p["message_id"], _reviews(p["trailers"])) for p in json.loads(proc.stdout)["patches"]]


def b4(mbox: Path) -> Reading:
    proc = subprocess.run(["b4", "--offline-mode", "am", "-m", str(mbox), "-o", "-"], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["(nothing)"])[-1]
        return f"exit {proc.returncode}: {last}"
    with tempfile.NamedTemporaryFile(suffix=".mbox") as out:
        out.write(proc.stdout.encode())
        out.flush()
        return [(mail.message_id, _reviews(message_trailers(split_patch(mail.text).message)))
                for mail in read_mails(out.name)]


def expected(case: Case) -> Reading:
    if case.error:
        return "error"
    return [(msgid, sorted(case.trailers[i + 1])) for i, msgid in enumerate(case.message_ids)]


def _reviews(trailers: list[str]) -> list[str]:
    return sorted(t for t in trailers if not t.lower().startswith("signed-off-by"))


def _meets(reading: Reading, wanted: Reading) -> bool:
    if wanted == "error":
        return isinstance(reading, str) and reading.startswith("exit 2")
    return reading == wanted


def main() -> int:
    if shutil.which("b4") is None:
        print("b4 is not installed (pip install b4)", file=sys.stderr)
        return 2
    version = subprocess.run(["b4", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"b4 {version} vs patchbench, {len(cases())} cases\n")
    agree = 0
    with tempfile.TemporaryDirectory() as scratch:
        for case in cases():
            mbox = Path(scratch) / f"{case.name}.mbox"
            mbox.write_bytes(case.mbox())
            ours_read, b4_read, wanted = ours(mbox), b4(mbox), expected(case)
            same = ours_read == b4_read or (case.error and isinstance(b4_read, str) and isinstance(ours_read, str))
            agree += bool(same)
            print(f"{case.name}: {'agree' if same else 'DIFFER'}; "
                  f"patchbench {'meets' if _meets(ours_read, wanted) else 'MISSES'} the expectation, "
                  f"b4 {'meets' if _meets(b4_read, wanted) or (case.error and same) else 'misses'} it")
            print(f"  expected:   {case.expected}")
            for name, reading in (("patchbench", ours_read), ("b4", b4_read)):
                if isinstance(reading, str):
                    print(f"  {name:<11} {reading}")
                else:
                    for msgid, trailers in reading:
                        print(f"  {name:<11} {msgid}: {'; '.join(trailers) or '-'}")
            print()
    print(f"agreement: {agree} of {len(cases())} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
