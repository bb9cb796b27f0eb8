"""The bot's loop: poll patchwork's events, run each new series, record, then post and mail.

poll():  `series-created` events note a series as waiting for its patches, `series-completed` ones
         as ready; the newest event date seen is kept per category (patchwork's `since` is
         inclusive, so the last event comes again and is recognised by its series id).
work():  ready series are downloaded and run; series still waiting after `wait_incomplete`
         seconds are looked up once more and, still incomplete, reported as such. Each outcome,
         with its pages, checks and mails, is recorded in one transaction.
drain(): the outbox. A check is posted unless patchwork already has one with that context on that
         patch (posted by us before a crash, after the POST but before recording it); a mail is
         sent and marked. Patchwork refusing a check is logged and the check retried next round.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from patchbench.bot import pages, replies
from patchbench.bot.patchwork import Patchwork, PatchworkError
from patchbench.bot.pipeline import Project, checks_of, failed_outcome, incomplete_outcome, run_series
from patchbench.bot.store import PendingCheck, Store

log = logging.getLogger("patchbench.bot")

CATEGORIES = {"series-created": "waiting", "series-completed": "ready"}


class Bot:
    def __init__(self, client: Patchwork, store: Store, project: Project, tree: Path, pages_dir: Path,
                 pages_url: str | None = None, sender=None, mail_from: str = "patchbench <patchbench@localhost>",
                 since: str | None = None, clock=time.time):
        self.client, self.store, self.project, self.tree = client, store, project, tree
        self.pages_dir, self.pages_url, self.sender, self.mail_from = pages_dir, pages_url, sender, mail_from
        self.first_since, self.clock = since, clock

    def once(self) -> int:
        """One round; the number of checks and mails still waiting to go out afterwards."""
        self.poll()
        self.work()
        return self.drain()

    def forever(self, interval: float, sleep=time.sleep) -> None:
        failures = 0
        while True:
            wait = interval
            try:
                self.once()
                failures = 0
            except PatchworkError as exc:
                failures += 1
                wait = max(interval, min(interval * 2 ** failures, 3600.0))   # patchwork down: back off
                log.error("%s; next round in %.0f s", exc, wait)
            sleep(wait)

    # -- events -> series to run -----------------------------------------------------------------
    def poll(self) -> None:
        for category, status in CATEGORIES.items():
            since = self.store.since(self.project.name, category) or self.first_since
            events = self.client.events(self.project.name, category, since)
            for event in events:
                series = event["payload"]["series"]
                # first seen now: patchwork's event dates are in the server's own, unnamed time zone
                self.store.note_series(series["id"], self.project.name, series.get("name") or "",
                                       series.get("version") or 1, status)
            if events:
                self.store.set_since(self.project.name, category, events[-1]["date"])
                log.info("%d %s event(s) since %s", len(events), category, since or "the start")

    def work(self) -> None:
        now = self.clock()
        for series_id, first_seen in self.store.series_with(self.project.name, "waiting"):
            if now - first_seen < self.project.wait_incomplete:
                continue
            series = self._series(series_id)
            if series is None:
                continue
            if series.get("received_all"):
                self.store.note_series(series_id, self.project.name, "", 0, "ready")
            else:
                log.info("series %d: incomplete after %.0f s", series_id, now - first_seen)
                self.finish(incomplete_outcome(series))
        for series_id, _ in self.store.series_with(self.project.name, "ready"):
            series = self._series(series_id)
            if series is None:
                continue
            log.info("series %d: running %r v%s", series_id, series.get("name"), series.get("version"))
            mbox = self._mbox(series)
            try:
                outcome = run_series(series, mbox, self.tree, self.project)
            except Exception as exc:   # a bug of ours must not stop the bot, nor pass silently
                log.exception("series %d: patchbench failed", series_id)
                outcome = failed_outcome(series, exc)
            self.finish(outcome)

    def _mbox(self, series: dict) -> bytes:
        """The series' mails: patchwork's series mbox holds the patches only, so the cover letter
        (the series' description, often its base-commit:, what netdev's series checks read) is
        fetched apart and put first."""
        patches = self.client.mbox(series["mbox"])
        cover = series.get("cover_letter") or {}
        if not cover.get("mbox"):
            return patches
        letter = self.client.mbox(cover["mbox"])
        return letter + (b"" if letter.endswith(b"\n") else b"\n") + patches

    def _series(self, series_id: int) -> dict | None:
        """The series from patchwork; None (and the series closed) when patchwork no longer has it."""
        try:
            return self.client.series(series_id)
        except PatchworkError as exc:
            if exc.status != 404:
                raise
        log.warning("series %d: gone from patchwork; dropped", series_id)
        self.store.record_outcome(series_id, {"id": series_id, "status": "gone"}, [], [])
        return None

    def finish(self, outcome: dict) -> None:
        pages.write_pages(self.pages_dir, outcome)
        checks = [PendingCheck(patch, context, state, description,
                               pages.page_url(self.pages_url, outcome["id"], patch))
                  for patch, context, state, description in checks_of(outcome)]
        mails = []
        if self.sender is not None and self.project.mail:
            mails = replies.compose(outcome, self.mail_from, self.project.mail_to,
                                    lambda patch: pages.page_url(self.pages_url, outcome["id"], patch))
        self.store.record_outcome(outcome["id"], outcome, checks, mails)
        log.info("series %d: %s, %d check(s), %d mail(s) to go", outcome["id"], outcome["status"],
                 len(checks), len(mails))

    # -- outbox ---------------------------------------------------------------------------------
    def drain(self) -> int:
        left = 0
        for check in self.store.unposted_checks():
            try:
                existing = self.client.checks(check.patch, check.context)
                if existing:
                    url = existing[0].get("url")
                    log.info("patch %d %s: already on patchwork", check.patch, check.context)
                else:
                    url = self.client.post_check(check.patch, check.state, check.context,
                                                 check.description, check.target_url).get("url")
                self.store.check_posted(check.patch, check.context, url)
            except PatchworkError as exc:
                if exc.status is None:
                    raise   # patchwork is down: the next round tries the whole outbox again
                log.error("patch %d %s: %s", check.patch, check.context, exc)
                self.store.post_failed("checks", "patch = ? AND context = ?", (check.patch, check.context))
                left += 1
        for message_id, text in self.store.unsent_mails() if self.sender is not None else []:
            sent = []
            try:
                self.sender.send(message_id, text, lambda: (self.store.mail_sent(message_id), sent.append(1)))
            except OSError as exc:   # smtplib's errors are OSErrors too
                if sent:   # taken and recorded; only the goodbye failed
                    continue
                log.error("mail %s: %s", message_id, exc)
                self.store.post_failed("mails", "message_id = ?", (message_id,))
                left += 1
        return left

