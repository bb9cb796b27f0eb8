"""Read a synthetic mailbox of real-shaped patch series: time for 2,000 messages, and peak memory of
the streaming reader at 1,000 / 2,000 / 4,000 messages (it must stay flat), plus load_series (group all,
build the first series) and find_series (build every series, files touched included).

Run: python bench/read_mailbox.py
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
import tracemalloc
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchbench.mail import read_mails  # noqa: E402
from patchbench.series import find_series, load_series  # noqa: E402

WORDS = "ring lock queue skb napi poll budget descriptor tail head consumer producer irq".split()


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _hunk(rng: random.Random, start: int) -> list[str]:
    context = [f"\tval_{rng.randrange(999)} = {rng.choice(WORDS)}_{rng.randrange(99)}(priv);" for _ in range(6)]
    removed = [f"\tif ({rng.choice(WORDS)}) return -EBUSY;" for _ in range(rng.randrange(1, 4))]
    added = [f"\tif ({rng.choice(WORDS)}_{rng.randrange(9)}(priv)) goto out_unlock;" for _ in range(rng.randrange(1, 6))]
    lines = [f"@@ -{start},{6 + len(removed)} +{start},{6 + len(added)} @@ static int {rng.choice(WORDS)}_poll(void)"]
    lines += [" " + c for c in context[:3]] + ["-" + r for r in removed] + ["+" + a for a in added]
    return lines + [" " + c for c in context[3:]]


def _message(rng, number, subject, sender, when, msgid, parent, body) -> str:
    # the headers a lore mailbox carries for a netdev patch: list, maintainers and reviewers on Cc
    headers = [f"From {sender.split('<')[1][:-1]} {when:%a %b %d %H:%M:%S %Y}", f"From: {sender}",
               f"Subject: {subject}", f"Date: {format_datetime(when)}", f"Message-Id: <{msgid}>",
               "To: netdev@vger.kernel.org",
               "Cc: davem@example.net, edumazet@example.com, kuba@example.org, pabeni@example.com,\n"
               " andrew@example.ch, horms@example.org, linux-kernel@vger.kernel.org",
               "X-Mailer: git-send-email 2.43.0", "MIME-Version: 1.0",
               "Content-Type: text/plain; charset=UTF-8", "Content-Transfer-Encoding: 8bit",
               "List-Id: <netdev.vger.kernel.org>", "Precedence: bulk"]
    if parent:
        headers += [f"In-Reply-To: <{parent}>", f"References: <{parent}>"]
    return "\n".join(headers) + "\n\n" + body + "\n\n"


def write_mailbox(path: Path, messages: int, seed: int = 1) -> None:
    """Series of 6 patches with a cover letter and 2 review replies each (9 messages per series)."""
    rng = random.Random(seed)
    when = datetime(2025, 1, 1, tzinfo=timezone.utc)
    written = 0
    with open(path, "w") as out:
        while written < messages:
            series = written // 9
            author = f"Dev {series % 50} <dev{series % 50}@example.org>"
            cover = f"s{series}-0@example.org"
            out.write(_message(rng, written, f"[PATCH net-next v{1 + series % 3} 0/6] {_sentence(rng, 4)}",
                               author, when, cover, None, _sentence(rng, 40) + "\n\nbase-commit: " + "ab" * 20))
            written += 1
            for index in range(1, 7):
                if written >= messages:
                    break
                when += timedelta(seconds=1)
                path_name = f"drivers/net/ethernet/{rng.choice(WORDS)}/{rng.choice(WORDS)}_main.c"
                diff = [f"diff --git a/{path_name} b/{path_name}", "index 1234567..89abcde 100644",
                        f"--- a/{path_name}", f"+++ b/{path_name}"]
                for hunk in range(rng.randrange(3, 8)):
                    diff += _hunk(rng, 100 + hunk * 80)
                body = (_sentence(rng, 60) + "\n\n" + f"Signed-off-by: {author}\n---\n {path_name} | 9 +++--\n\n"
                        + "\n".join(diff) + "\n-- \n2.43.0")
                out.write(_message(rng, written, f"[PATCH net-next v{1 + series % 3} {index}/6] {_sentence(rng, 5)}",
                                   author, when, f"s{series}-{index}@example.org", cover, body))
                written += 1
            for reply in range(2):
                if written >= messages:
                    break
                target = f"s{series}-{rng.randrange(0, 7)}@example.org"
                body = f"> {_sentence(rng, 12)}\n\n{_sentence(rng, 8)}\n\nReviewed-by: Rev {reply} <rev{reply}@example.com>"
                out.write(_message(rng, written, "Re: [PATCH] review", f"Rev {reply} <rev{reply}@example.com>",
                                   when, f"r{series}-{reply}@example.com", target, body))
                written += 1
            when += timedelta(hours=1)


def _read_all(path: Path) -> int:
    return sum(1 for _ in read_mails(str(path)))


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        results = {}
        for count in (1000, 2000, 4000):
            path = Path(scratch) / f"mailbox-{count}.mbox"
            write_mailbox(path, count)
            started, cpu_started = time.perf_counter(), time.process_time()
            assert _read_all(path) == count
            read_seconds, read_cpu = time.perf_counter() - started, time.process_time() - cpu_started
            started, cpu_started = time.perf_counter(), time.process_time()
            load_series(str(path))
            load_seconds, load_cpu = time.perf_counter() - started, time.process_time() - cpu_started
            started = time.perf_counter()
            topics = find_series(str(path))
            group_seconds = time.perf_counter() - started
            reader_peak = _peak_bytes(_read_all, path)
            load_peak = _peak_bytes(lambda p: load_series(str(p)), path)
            results[count] = (path.stat().st_size, read_seconds, reader_peak, load_seconds, load_peak,
                              group_seconds, len(topics), read_cpu, load_cpu)
        print(f"{'messages':>8} {'size MB':>8} {'read s':>7} {'reader peak MB':>15} {'load_series s':>14} "
              f"{'load_series peak MB':>20} {'all series s':>13} {'topics':>7}")
        for count, (size, read_s, peak, load_s, load_peak, group_s, topics, _, _) in results.items():
            print(f"{count:>8} {size / 1e6:>8.1f} {read_s:>7.2f} {peak / 1e6:>15.2f} {load_s:>14.2f} "
                  f"{load_peak / 1e6:>20.2f} {group_s:>13.2f} {topics:>7}")
        print(f"2,000 messages: read in {results[2000][1]:.2f} s ({results[2000][7]:.2f} s CPU), load_series in "
              f"{results[2000][3]:.2f} s ({results[2000][8]:.2f} s CPU) (target 2 s; CPU time is what other jobs on "
              f"a shared machine do not inflate); peak memory 1,000 -> 4,000 messages: reader x{results[4000][2] / results[1000][2]:.2f}, "
              f"load_series x{results[4000][4] / results[1000][4]:.2f} (x4 would be proportional)")


def _peak_bytes(work, path: Path) -> int:
    tracemalloc.start()
    work(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


if __name__ == "__main__":
    main()
