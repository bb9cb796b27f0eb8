"""`patchbench bot`: a CI bot for a patchwork project; `patchbench bot serve`: its result pages.

    patchbench bot --patchwork URL --project NAME --tree DIR [--token-file F] [--stages check,netdev,build,boot]

polls patchwork's events API, runs each new series (base as `apply` chooses it, or the branch the
project's configuration names for the tree in the subject), posts one check per patch per stage,
writes a static HTML page per series and per patch, and (optionally) replies on the list to
failures. State lives in a database (SQLite file, or a PostgreSQL URL); see patchbench/bot/.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import tomllib
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from patchbench.commands.runner_options import add_runner_arguments
from patchbench.errors import BadInput

TOKEN_VARIABLE = "PATCHBENCH_PATCHWORK_TOKEN"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("bot", help="watch a patchwork project: test each new series, post checks",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", nargs="?", choices=["serve"], help="serve: serve the result pages over HTTP")
    parser.add_argument("--patchwork", metavar="URL", help="patchwork server, e.g. https://patchwork.kernel.org")
    parser.add_argument("--project", metavar="NAME", help="the project's link name on patchwork, e.g. netdevbpf")
    parser.add_argument("--tree", metavar="DIR", type=Path, help="the kernel git repository series are applied to")
    parser.add_argument("--token-file", metavar="F", type=Path,
                        help=f"file holding the patchwork API token (else ${TOKEN_VARIABLE}); needed to post")
    parser.add_argument("--stages", default=None, metavar="LIST",
                        help="comma-separated stages run after applying: check, netdev, build, boot (default: check)")
    parser.add_argument("--config", metavar="FILE", type=Path,
                        help="TOML file with a [projects.NAME] table per project (trees, stages, mail, waits)")
    parser.add_argument("--db", metavar="URL", help="state database: a SQLite file or postgresql://... "
                        "(default: ~/.cache/patchbench/bot.sqlite)")
    parser.add_argument("--pages", metavar="DIR", type=Path, help="where result pages are written "
                        "(default: ~/.cache/patchbench/bot-pages)")
    parser.add_argument("--pages-url", metavar="URL", help="the URL --pages is served at (checks' target_url)")
    parser.add_argument("--wait-incomplete", metavar="S", type=float,
                        help="seconds to wait for the rest of an incomplete series (default: 3600)")
    parser.add_argument("--smtp", metavar="HOST:PORT", help="send reply mails through this SMTP server")
    parser.add_argument("--maildir", metavar="DIR", type=Path, help="dry run: write reply mails to this maildir")
    parser.add_argument("--mail-from", metavar="ADDR", default="patchbench CI <patchbench@localhost>")
    parser.add_argument("--since", metavar="DATE", help="on the first run, start from events at DATE (ISO 8601) "
                        "instead of the whole history")
    parser.add_argument("--interval", metavar="S", type=float, default=60.0, help="seconds between polls")
    parser.add_argument("--once", action="store_true", help="one round (poll, run, post) and exit, as from cron")
    parser.add_argument("--bind", default="127.0.0.1", help="serve: address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="serve: port (default: 8080)")
    add_runner_arguments(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from patchbench.bot.patchwork import PatchworkError
    from patchbench.dispatch import workspace

    cache = workspace.cache_root()
    pages_dir = args.pages or cache / "bot-pages"
    if args.action == "serve":
        return serve(pages_dir, args.bind, args.port)
    missing = [flag for flag, value in (("--patchwork", args.patchwork), ("--project", args.project),
                                        ("--tree", args.tree)) if not value]
    if missing:
        raise BadInput(f"bot: {', '.join(missing)} required")
    token = _token(args.token_file)
    _logging(token)
    try:
        return _run_bot(args, token, cache, pages_dir)
    except PatchworkError as exc:
        raise BadInput(f"patchwork: {exc}") from None


def _run_bot(args, token: str | None, cache: Path, pages_dir: Path) -> int:
    from patchbench.bot.driver import Bot
    from patchbench.bot.patchwork import Patchwork
    from patchbench.bot.store import Store
    from patchbench.tree.git import Git, open_repository

    git = Git(open_repository(args.tree))   # a bad --tree or tree branch is a usage error now, not
    project = project_config(args)           # after the first series arrives
    for tree, rev in project.trees.items():
        if git.commit_exists(rev) is None:
            raise BadInput(f"--config: the {tree} tree's base {rev!r} is not a commit in {args.tree}")
    sender = _sender(args)
    store = Store(args.db or str(cache / "bot.sqlite"))
    try:
        client = Patchwork(args.patchwork, token)
        _known_project(client, args.project)
        bot = Bot(client, store, project, args.tree, pages_dir, args.pages_url, sender, args.mail_from,
                  since=args.since)
        if args.once:
            left = bot.once()
            return 1 if left else 0
        try:
            bot.forever(args.interval)
        except KeyboardInterrupt:   # SIGTERM (systemctl stop) or ^C between or inside rounds
            logging.getLogger("patchbench.bot").info("stopped")
        return 0
    finally:
        store.close()


def _known_project(client, name: str) -> None:
    """Patchwork answers events of an unknown project with an empty list: ask about the project first."""
    from patchbench.bot.patchwork import PatchworkError

    try:
        client.project(name)
    except PatchworkError as exc:
        if exc.status == 404:
            raise BadInput(f"patchwork at {client.base} has no project {name!r}") from None
        raise


def project_config(args):
    """The project's settings: its table in --config, then the command-line flags over it."""
    from patchbench.bot.pipeline import STAGES, Project

    table = {}
    if args.config:
        try:
            table = tomllib.loads(args.config.read_text()).get("projects", {}).get(args.project, {})
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise BadInput(f"--config {args.config}: {exc}") from None
    stages = args.stages.split(",") if args.stages else table.get("stages", ["check"])
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        raise BadInput(f"--stages: unknown stage {', '.join(unknown) or '(none)'}; known: {', '.join(STAGES)}")
    wait = args.wait_incomplete if args.wait_incomplete is not None else table.get("wait_incomplete", 3600.0)
    mail_wanted = bool(args.smtp or args.maildir)
    build_options = dict(table.get("build", {}))
    if args.runner != "local" or "runner" not in build_options:   # the flags (or their environment) win
        build_options.update(runner=args.runner, broker=args.broker or build_options.get("broker"),
                             tree_url=args.tree_url or build_options.get("tree_url"))
    return Project(name=args.project, trees=dict(table.get("trees", {})), stages=tuple(stages),
                   wait_incomplete=float(wait), mail=mail_wanted and table.get("mail", True),
                   mail_to=list(table.get("mail_to", [])), build_options=build_options)


def _token(path: Path | None) -> str | None:
    if path is None:
        return os.environ.get(TOKEN_VARIABLE) or None
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise BadInput(f"--token-file {path}: {exc.strerror}") from None
    if not token:
        raise BadInput(f"--token-file {path}: empty")
    return token


def _sender(args):
    from patchbench.bot.replies import MaildirSender, SmtpSender

    if args.smtp and args.maildir:
        raise BadInput("give --smtp or --maildir (a dry run), not both")
    if args.maildir:
        return MaildirSender(args.maildir)
    if args.smtp:
        host, _, port = args.smtp.rpartition(":")
        if not host or not port.isdigit():
            raise BadInput(f"--smtp {args.smtp!r}: expected HOST:PORT")
        return SmtpSender(host, int(port))
    return None


class _Redact(logging.Filter):
    """Belt and braces: no log line ever carries the token, whatever a message includes."""

    def __init__(self, secret: str):
        super().__init__()
        self.secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.secret in text:
            record.msg, record.args = text.replace(self.secret, "[token]"), ()
        return True


def _logging(token: str | None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s patchbench-bot %(levelname)s %(message)s"))
    if token:
        handler.addFilter(_Redact(token))
    logger = logging.getLogger("patchbench.bot")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


def serve(pages_dir: Path, bind: str, port: int) -> int:
    if not pages_dir.is_dir():
        raise BadInput(f"no result pages at {pages_dir}")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(pages_dir))
    try:
        server = ThreadingHTTPServer((bind, port), handler)
    except OSError as exc:
        raise BadInput(f"cannot listen on {bind}:{port}: {exc.strerror}") from None
    print(f"serving {pages_dir} on http://{bind}:{server.server_address[1]}/", flush=True)
    with server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:   # SIGTERM or ^C: the normal way to stop serving
            pass
    return 0
