"""A small client for patchwork's REST API (version 1.3): events, series, checks, mbox downloads.

Only what the bot needs, with the API's own shapes (dicts decoded from JSON). Every request goes
through `_request`: server errors and dropped connections are retried with exponential back-off,
429 answers wait as long as `Retry-After` says, and nothing it logs or raises carries the token.
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
import time
import urllib.error
import urllib.parse
import urllib.request

log = logging.getLogger("patchbench.bot")

API = "/api/1.3"
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class PatchworkError(Exception):
    """A request patchwork refused for good (4xx other than 429), or kept failing after the retries."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Patchwork:
    def __init__(self, url: str, token: str | None = None, *, retries: int = 6, backoff: float = 1.0,
                 max_wait: float = 300.0, timeout: float = 60.0, sleep=time.sleep):
        self.base = url.rstrip("/")
        if self.base.endswith(API):
            self.base = self.base[: -len(API)]
        self._token = token
        self.retries, self.backoff, self.max_wait, self.timeout = retries, backoff, max_wait, timeout
        self.sleep = sleep

    def __repr__(self) -> str:  # never the token
        return f"Patchwork({self.base!r})"

    # -- transport ---------------------------------------------------------------------------
    def _request(self, method: str, url: str, body: dict | None = None) -> tuple[bytes, dict]:
        if not url.startswith(("http://", "https://")):
            url = self.base + url
        headers = {"Accept": "application/json", "User-Agent": "patchbench-bot"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self._token and method != "GET":
            headers["Authorization"] = f"Token {self._token}"
        failures = 0
        while True:
            request = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return response.read(), dict(response.headers)
            except urllib.error.HTTPError as exc:
                exc.read()
                if exc.code == 429:
                    wait = min(_retry_after(exc.headers.get("Retry-After")), self.max_wait)
                    log.info("%s %s: rate limited, waiting %.1f s", method, _path(url), wait)
                    self.sleep(wait)
                    continue
                if exc.code < 500:
                    raise PatchworkError(f"{method} {_path(url)}: HTTP {exc.code} {exc.reason}", exc.code) from None
                problem = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                problem = str(getattr(exc, "reason", exc))
            failures += 1
            if failures > self.retries:
                raise PatchworkError(f"{method} {_path(url)}: {problem} ({failures} attempts)")
            wait = min(self.backoff * 2 ** (failures - 1), self.max_wait)
            log.warning("%s %s: %s; retrying in %.1f s", method, _path(url), problem, wait)
            self.sleep(wait)

    def get(self, path: str, **params) -> object:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        body, _ = self._request("GET", path + (f"?{query}" if query else ""))
        return json.loads(body)

    def get_all(self, path: str, **params) -> list:
        """Every item of a paginated list, following the Link: rel="next" headers."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        url, items = path + (f"?{query}" if query else ""), []
        while url:
            body, headers = self._request("GET", url)
            items.extend(json.loads(body))
            found = _NEXT.search(headers.get("Link", ""))
            url = found.group(1) if found else None
        return items

    # -- the calls the bot makes ------------------------------------------------------------------
    def project(self, name: str) -> dict:
        return self.get(f"{API}/projects/{urllib.parse.quote(name, safe='')}/")

    def events(self, project: str, category: str, since: str | None) -> list[dict]:
        """Events of `category` in `project` at or after `since` (patchwork's filter is inclusive), oldest first."""
        events = self.get_all(f"{API}/events/", project=project, category=category, since=since, per_page=100)
        return sorted(events, key=lambda e: (e["date"], e["id"]))

    def series(self, series_id: int) -> dict:
        return self.get(f"{API}/series/{series_id}/")

    def mbox(self, url: str) -> bytes:
        return self._request("GET", url)[0]

    def checks(self, patch_id: int, context: str) -> list[dict]:
        return self.get_all(f"{API}/patches/{patch_id}/checks/", context=context)

    def post_check(self, patch_id: int, state: str, context: str, description: str,
                   target_url: str | None) -> dict:
        body, _ = self._request("POST", f"{API}/patches/{patch_id}/checks/",
                                {"state": state, "context": context, "description": description,
                                 "target_url": target_url})
        return json.loads(body)


def _retry_after(value: str | None) -> float:
    """Seconds to wait from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return 1.0
    try:
        return max(float(value), 0.0)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(when.timestamp() - time.time(), 0.0) if when else 1.0


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path
