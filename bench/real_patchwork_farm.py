"""The CI bot with every stage on the Celery farm, once, against a real patchwork.

What tests/test_farm_boot.py does against the stand-in, done against patchwork itself (a checkout
of getpatchwork/patchwork, tag v3.2.1 when this was written; its code stays outside this project):

1. patchwork on SQLite in a virtualenv of its own (`--venv`; made with the versions below when it
   has no python yet): `manage.py migrate`, the default states and tags, project `netdev` (list-id
   netdev.vger.kernel.org), a user maintaining it with an API token; `manage.py runserver` on
   loopback.
2. The test's two 3-patch tun series on the 6.1 tree, mailed for net-next: the wake done inside an
   RCU read-side section ("clean") and outside one ("bare": a "suspicious RCU usage" splat at boot),
   filed with `manage.py parsemail`, one mail at a time, each with a `List-Id:` header added.
3. redis-server on loopback and two `patchbench worker`s under bubblewrap as the test runs them
   (homes of their own, the tree only as the file URL of a bare copy). Their homes and the bare copy
   are the test's, kept under the tests' cache: builds are warm after the test's first run.
4. `patchbench bot --once --stages check,netdev,build,boot --runner celery`, replies into a maildir; then
   the bot again with its state database deleted, which must post nothing new.
5. The same mails on the stand-in (tests/support/patchwork_server.py), the bot through the same
   farm, for comparison.

Prints the checks patchwork has per stage and state, each patch's checks, the reply mails, the time
of each series, of each job on the farm (from the results file) and of each bot run, and whatever
differs from the stand-in. Exit 1 unless: 24 checks of the four stages and the same netdev checks
on every patch, each once; every build passes; the clean
series boots; the bare one's boot fails naming the splat; one reply to a cover letter, the bare
series'; every run exits 0; nothing new from the second run; the stand-in's checks and mails.
Run from the project root, heavy work niced: `nice -n 10 python bench/real_patchwork_farm.py
PATCHWORK-CHECKOUT [--venv DIR] [--keep DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from datetime import datetime
from email import message_from_bytes
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patchbench.bot.pages import page_url  # noqa: E402
from tests.support import kernel  # noqa: E402
from tests.support.bot_queue import LIST_ID, PROJECT, mails  # noqa: E402
from tests.support.farm import Workers, free_port, kept_served_copy, redis_server, seed_index  # noqa: E402
from tests.support.git_series import git  # noqa: E402
from tests.support.patchwork_server import TOKEN, PatchworkServer  # noqa: E402
from tests.support.ring_series import tun_boot_series  # noqa: E402

PINS = ["Django~=5.1.0", "djangorestframework~=3.15.0", "django-filter==24.3"]
WORKERS = ("w1@remote", "w2@remote")
PAGES_URL = "http://127.0.0.1:8080/ci"   # the checks' target_url (nothing serves it here)
SERIES = (("clean", "rcu", "tun: stop the queue when full, wake it on consume"),
          ("bare", "bare", "tun: stop the queue when full, wake it on consume (bare)"))
SETTINGS = """from patchwork.settings.base import *  # noqa: F401,F403
SECRET_KEY = "patchbench-bench-only"
ALLOWED_HOSTS = ["*"]
DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": {db!r}}}}}
"""
SETUP = """from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from patchwork.models import Project
project = Project.objects.create(linkname={project!r}, name={project!r}, listid={listid!r},
                                 listemail="{project}@vger.kernel.org")
user = User.objects.create_user("patchbench", "patchbench@example.org", "unused")
user.profile.maintainer_projects.add(project)
print(Token.objects.create(user=user).key)
"""


class Patchwork:
    """patchwork at `checkout`, its settings and database in `root`, run by `python` (its virtualenv's)."""

    def __init__(self, checkout: Path, python: Path, root: Path):
        self.checkout, self.python, self.root = checkout, python, root
        (root / "settings.py").write_text(SETTINGS.format(db=str(root / "db.sqlite3")))
        self.env = {**os.environ, "PYTHONPATH": f"{checkout}:{root}", "DJANGO_SETTINGS_MODULE": "settings"}
        self.port, self.server = free_port(), None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str, stdin: bytes | None = None) -> str:
        done = subprocess.run([str(self.python), str(self.checkout / "manage.py"), *args], env=self.env,
                              input=stdin, capture_output=True, timeout=600)
        if done.returncode != 0:
            sys.exit(f"manage.py {args[0]} failed: {done.stderr.decode(errors='replace')[-3000:]}")
        return done.stdout.decode()

    def set_up(self) -> str:
        """Migrated, with the default fixtures and the project; the maintainer's API token."""
        self.manage("migrate", "--no-input")
        self.manage("loaddata", "default_states", "default_tags")
        return self.manage("shell", "-c", SETUP.format(project=PROJECT, listid=LIST_ID)).split()[-1]

    def file(self, mail: bytes) -> None:
        self.manage("parsemail", stdin=f"List-Id: <{LIST_ID}>\n".encode() + mail)

    def start(self) -> None:
        with open(self.root / "runserver.log", "w") as log:
            self.server = subprocess.Popen([str(self.python), str(self.checkout / "manage.py"), "runserver",
                                            f"127.0.0.1:{self.port}", "--noreload"], env=self.env, stdout=log,
                                           stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.get("/api/1.3/")
                return
            except OSError:
                if self.server.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"runserver did not come up: {(self.root / 'runserver.log').read_text()[-3000:]}")
                time.sleep(0.3)

    def stop(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=20)

    def get(self, path: str):
        return read(self.url, path)


def read(url: str, path: str):
    """A GET of patchwork's REST API (the real one or the stand-in), as JSON."""
    with urllib.request.urlopen(url + path, timeout=30) as answer:
        return json.load(answer)


def patchwork_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS], check=True, timeout=1800)
    return python


def versions(python: Path, checkout: Path) -> str:
    script = ("import django, rest_framework, django_filters, patchwork; print(f'{patchwork.__version__} on Django "
              "{django.get_version()}, djangorestframework {rest_framework.__version__}, django-filter "
              "{django_filters.__version__}')")
    return subprocess.run([str(python), "-c", script], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(checkout)}).stdout.strip()


def bot(argv: list[str], log: Path) -> tuple[int, float]:
    """Run the bot; (exit code, seconds). Its log (stderr) goes to `log`."""
    started = time.monotonic()
    with open(log, "w") as out:
        code = subprocess.run(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out,
                              stderr=subprocess.STDOUT, timeout=7200).returncode
    return code, time.monotonic() - started


def last_job(results: Path) -> int:
    """The id of the newest job result in `results` (0 when there is none yet)."""
    if not results.exists():
        return 0
    with sqlite3.connect(results) as db:
        return db.execute("SELECT coalesce(max(id), 0) FROM results").fetchone()[0]


def job_times(results: Path, after: int) -> dict[str, list[tuple[float, str, str]]]:
    """kind (build split by scope) -> [(seconds, status, worker)] of the jobs stored after id `after`."""
    times: dict[str, list[tuple[float, str, str]]] = {}
    with sqlite3.connect(results) as db:
        for kind, status, seconds, data in db.execute("SELECT kind, status, seconds, data FROM results WHERE id > ? "
                                                      "ORDER BY id", (after,)):
            job = json.loads(data)
            name = f"{kind} ({job['scope']})" if job.get("scope") else kind
            times.setdefault(name, []).append((seconds, status, job.get("worker") or "here"))
    return times


LOG_LINE = re.compile(r"^(\S+ \S+) patchbench-bot INFO series (\d+): (running|\w+, \d+ check)", re.M)


def series_times(log: Path) -> dict[int, float]:
    """Seconds from a series' start to its outcome being recorded, from the bot's log."""
    started, took = {}, {}
    for stamp, series, what in LOG_LINE.findall(log.read_text()):
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if what == "running":
            started[int(series)] = at
        elif int(series) in started:
            took[int(series)] = at - started[int(series)]
    return took


def all_checks(url: str) -> list[tuple[str, int, int, str, str, str, bool]]:
    """(series name, patch number, patch id, context, state, description, whether its target_url is the
    patch's page) of every check on the project's patches, as the server at `url` lists them."""
    found = []
    for series in read(url, f"/api/1.3/series/?project={PROJECT}&per_page=100"):
        for number, patch in enumerate(sorted(series["patches"], key=lambda p: p["id"]), 1):
            found += [(series["name"], number, patch["id"], c["context"], c["state"], c["description"],
                       c["target_url"] == page_url(PAGES_URL, series["id"], patch["id"]))
                      for c in read(url, f"/api/1.3/patches/{patch['id']}/checks/?per_page=100")]
    return sorted(found)


def replies(maildir: Path) -> dict[str, tuple[str, str]]:
    """In-Reply-To -> (Subject, body with the server's series and patch ids left out) of each reply mail."""
    found = {}
    for path in sorted((maildir / "new").glob("*")):
        mail = message_from_bytes(path.read_bytes())
        body = re.sub(r"(patchwork series |series/|patch-)\d+", r"\1N", mail.get_payload(decode=True).decode())
        found[mail["In-Reply-To"]] = (mail["Subject"], body)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patchwork", type=Path, help="a checkout of patchwork (e.g. tag v3.2.1)")
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "pw-venv",
                        help=f"patchwork's virtualenv, made when missing ({', '.join(PINS)}); default %(default)s")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary directory)")
    args = parser.parse_args()
    python = patchwork_python(args.venv)
    if args.keep:
        args.keep.mkdir(parents=True)
        run_all(args.patchwork.resolve(), python, args.keep.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="patchbench-real-pw-farm-") as scratch:
            run_all(args.patchwork.resolve(), python, Path(scratch))


def run_all(checkout: Path, python: Path, root: Path) -> None:
    tree = kernel.kernel_repo("6.1")
    served = kept_served_copy(tree)
    repo = root / "linux"   # the bot's tree: borrows the cached tree's objects, leaves its refs alone
    git(root, "clone", "-q", "--shared", "--no-checkout", str(tree), str(repo))
    base = kernel.base_commit(repo)
    print(f"patchwork {versions(python, checkout)}; Linux tree {tree.name}, base {base[:12]}")

    pw = Patchwork(checkout, python, root)
    token = pw.set_up()
    queue = [mails(repo, base, tun_boot_series(wake), root / "mails" / name, title=title) for name, wake, title in SERIES]
    for mail in (mail for series in queue for mail in series):
        pw.file(mail)
    results = root / "results.sqlite"
    config = root / "bot.toml"
    config.write_text(f'[projects.{PROJECT}]\nstages = ["check", "netdev", "build", "boot"]\n'
                      f'mail_to = ["{PROJECT}@example.org"]\n[projects.{PROJECT}.trees]\nnet-next = "{base}"\n'
                      f'[projects.{PROJECT}.build]\nresults = "{results}"\nlogs = "{root / "logs"}"\n')
    runs = {}
    with redis_server(root) as broker:
        workers = Workers(broker, root, visibility_timeout=4200, homes=kernel.CACHE / f"farm-workers-{tree.name}")

        def run(name: str, url: str, token: str, state: Path) -> None:
            """The bot --once through the farm; what it did, under runs[name]."""
            before = last_job(results)
            state.mkdir(exist_ok=True)
            (state / "token").write_text(token + "\n")
            code, seconds = bot([sys.executable, "-m", "patchbench", "bot", "--patchwork", url, "--project", PROJECT,
                                 "--tree", str(repo), "--token-file", str(state / "token"), "--config", str(config),
                                 "--db", str(state / "bot.sqlite"), "--pages", str(state / "pages"),
                                 "--pages-url", PAGES_URL,
                                 "--maildir", str(state / "maildir"), "--once", "--runner", "celery",
                                 "--broker", broker, "--tree-url", served.as_uri()], root / f"{name}.log")
            runs[name] = {"code": code, "seconds": seconds, "checks": all_checks(url), "jobs": job_times(results, before),
                          "series": series_times(root / f"{name}.log"), "replies": replies(state / "maildir"),
                          "already": (root / f"{name}.log").read_text().count("already on patchwork")}

        try:
            for name in WORKERS:
                seed_index(workers.home(name))
                workers.start(name, alone=(served,))
            pw.start()
            try:
                run("real", pw.url, token, root / "real")
                (root / "real" / "bot.sqlite").unlink()
                run("real-again", pw.url, token, root / "real")
            finally:
                pw.stop()
            with PatchworkServer(validate=False) as stand_in:   # the same mails, as the tests file them
                stand_in.add_project(PROJECT, LIST_ID)
                for series in queue:
                    stand_in.add_series(PROJECT, series)
                run("stand-in", stand_in.url, TOKEN, root / "stand-in")
        finally:
            workers.stop()
    sys.exit(0 if report(runs) else 1)


def without_ids(checks: list[tuple]) -> list[tuple]:
    """The checks without the patch ids, which are the server's own."""
    return sorted((c[0], c[1], *c[3:]) for c in checks)


def report(runs: dict[str, dict]) -> bool:
    real, again, stand_in = runs["real"], runs["real-again"], runs["stand-in"]
    checks = real["checks"]
    print(f"bot --once through the farm: exit {real['code']}, {real['seconds']:.0f} s; checks posted: {len(checks)}")
    for (context, state), count in sorted(Counter((c[3], c[4]) for c in checks).items()):
        print(f"  {context:28} {state:8} {count}")
    for name, number, patch, context, state, text, _ in checks:
        print(f"  {name[-7:]:7} {number}/3 (patch {patch}) {context:17} {state:8} {text[:100]}")
    for series, seconds in sorted(real["series"].items()):
        print(f"  series {series}: {seconds:.0f} s from download to the outcome recorded")
    print("  farm jobs (seconds each, status, worker):")
    for kind, jobs in real["jobs"].items():
        print(f"    {kind:16} " + ", ".join(f"{s:.1f} {status} {worker}" for s, status, worker in jobs))
    print(f"  reply mails: {len(real['replies'])}")
    for to, (subject, _) in sorted(real["replies"].items()):
        print(f"    {subject}  (In-Reply-To {to})")
    print(f"bot --once again, state database deleted: exit {again['code']}, {again['seconds']:.0f} s; "
          f"{again['already']} x 'already on patchwork'; checks on patchwork: {len(again['checks'])}; "
          f"reply mails: {len(again['replies'])}")
    print(f"the same mails on the stand-in, the same farm: exit {stand_in['code']}, {stand_in['seconds']:.0f} s; "
          f"checks posted: {len(stand_in['checks'])}; reply mails: {len(stand_in['replies'])}")
    for line in sorted(set(without_ids(checks)) ^ set(without_ids(stand_in["checks"]))):
        print(f"  differs: {'real' if line in without_ids(checks) else 'stand-in'} only: {line}")
    for to in sorted(set(real["replies"]) | set(stand_in["replies"])):
        if real["replies"].get(to) != stand_in["replies"].get(to):
            print(f"  differs: the reply to {to}:\n    real:     {real['replies'].get(to)}\n"
                  f"    stand-in: {stand_in['replies'].get(to)}")

    state = {(c[2], c[3]): (c[4], c[5]) for c in checks}
    bare = {c[2] for c in checks if c[0].endswith("(bare)")}
    clean = {c[2] for c in checks} - bare
    covers = [to for to in real["replies"] if to.startswith("<cover.")]
    netdev = {p: {c[3] for c in checks if c[2] == p and c[3].startswith("patchbench-netdev-")} for p in bare | clean}
    same_netdev = len({frozenset(v) for v in netdev.values()}) == 1 and all(netdev.values())
    expected = 24 + sum(len(v) for v in netdev.values())
    verdicts = [
        ("24 checks of the four stages and the same netdev checks on every patch, each once",
         same_netdev and len(checks) == expected and len(state) == expected),
        ("every check links to its patch's page", all(c[6] for c in checks)),
        ("every build passes", all(state.get((p, "patchbench-build"), ("",))[0] == "success" for p in bare | clean)),
        ("the clean series boots", all(state.get((p, "patchbench-boot")) == ("success", "boot pass") for p in clean)),
        ("the bare series' boot fails naming the splat",
         all(state.get((p, "patchbench-boot"), ("", ""))[0] == "fail"
             and "suspicious RCU usage" in state[p, "patchbench-boot"][1] for p in bare)),
        ("one reply to a cover letter: the bare series'", len(covers) == 1 and ".bare." in covers[0]),
        ("every run exits 0", real["code"] == again["code"] == stand_in["code"] == 0),
        ("nothing new from the second run",
         again["checks"] == checks and again["already"] == len(checks) and again["replies"] == real["replies"]),
        ("the stand-in's checks and mails", without_ids(checks) == without_ids(stand_in["checks"])
         and real["replies"] == stand_in["replies"]),
    ]
    for what, good in verdicts:
        print(f"{'ok  ' if good else 'FAIL'} {what}")
    return all(good for _, good in verdicts)


if __name__ == "__main__":
    main()
