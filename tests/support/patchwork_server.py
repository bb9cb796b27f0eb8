"""A stand-in for a patchwork server, on loopback, for the CI bot's tests.

It serves the shapes of patchwork's REST API 1.3 (tests/support/shared.py PATCHWORK_SPEC) for
what the bot and the client tools (git-pw, pwclient) use: the API index, projects, events, series,
patches, covers, checks (list, read, create with a token) and mbox downloads, with patchwork's
pagination (page, per_page, Link: rel="next") and its inclusive `since` filter on events.

Series are loaded from real mails (`git format-patch` output): `add_series` files a cover letter
and patches the way patchwork's parser would, emitting series-created, patch-created and, once
every patch is in, series-completed events.

Every request from the bot (User-Agent patchbench-bot) and every JSON answer is validated against
the OpenAPI description with openapi-core; violations are collected in `violations`. Faults can be
scheduled (`fail_next`): 5xx answers, and 429 with Retry-After.
"""

from __future__ import annotations

import email
import hashlib
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email import policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.shared import PATCHWORK_SPEC

TOKEN = "pw-test-token-5f0c1d2e3a"
_PREFIX = re.compile(r"^\s*\[(?P<prefix>[^\]]*)\]\s*(?P<rest>.*)$", re.S)


def _load_spec():
    from openapi_core import Config, OpenAPI
    # The published description repeats a tag name, which the strict spec check rejects; the
    # paths and schemas, which are what requests and answers are checked against, are sound.
    return OpenAPI.from_file_path(str(PATCHWORK_SPEC), config=Config(spec_validator_cls=None))


@dataclass
class Fault:
    status: int
    retry_after: str | None = None


@dataclass
class World:
    """Everything the server holds; guarded by the server's lock."""

    projects: list[dict] = field(default_factory=list)
    people: dict[str, dict] = field(default_factory=dict)
    series: dict[int, dict] = field(default_factory=dict)
    patches: dict[int, dict] = field(default_factory=dict)
    covers: dict[int, dict] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    checks: dict[int, list[dict]] = field(default_factory=dict)
    mails: dict[tuple[str, int], bytes] = field(default_factory=dict)   # ("patch"|"cover", id) -> mail
    next_id: int = 1
    clock: datetime = field(default_factory=lambda: datetime.now(timezone.utc).replace(tzinfo=None))

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def now(self) -> str:
        # strictly increasing event times, as patchwork's ordering by date relies on
        self.clock = max(self.clock + timedelta(milliseconds=1), datetime.now(timezone.utc).replace(tzinfo=None))
        return self.clock.isoformat()


class PatchworkServer:
    def __init__(self, validate: bool = True):
        self.world = World()
        self.lock = threading.Lock()
        self.api = _load_spec() if validate else None
        self.violations: list[str] = []
        self.requests: list[tuple[str, str, str]] = []   # (method, path with query, user agent)
        self.faults: list[Fault] = []
        self.fault_every: tuple[int, Fault] | None = None
        # called as observer(method, path, status) after each request is handled, before it is answered
        self.observer = None
        self.bot_user = {"id": 1, "username": "patchbench-bot", "first_name": "", "last_name": "",
                         "email": "bot@example.org"}
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> PatchworkServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- loading ---------------------------------------------------------------------------------
    def add_project(self, link_name: str, list_id: str) -> dict:
        with self.lock:
            pid = len(self.world.projects) + 1
            project = {"id": pid, "url": f"{self.url}/api/1.3/projects/{pid}/", "name": link_name,
                       "link_name": link_name, "list_id": list_id, "list_email": f"{link_name}@example.org",
                       "web_url": f"{self.url}/project/{link_name}/", "scm_url": "", "webscm_url": "",
                       "maintainers": [], "subject_match": "", "list_archive_url": None,
                       "list_archive_url_format": None, "commit_url_format": ""}
            self.world.projects.append(project)
            return project

    def add_series(self, project: str, mails: list[bytes], total: int | None = None) -> dict:
        """File mails (a cover letter and/or patches of one posting) as one series; `total` overrides
        the N of n/N (to post only part of a series)."""
        with self.lock:
            w = self.world
            proj = next(p for p in w.projects if p["link_name"] == project)
            parsed = [_parse_mail(raw) for raw in mails]
            known = {item["msgid"] for item in [*w.patches.values(), *w.covers.values()]}
            if any(mail["msgid"] in known for mail in parsed):
                raise ValueError("a mail with this Message-Id is filed already (patchwork drops it)")
            first = parsed[0]
            sid = w.new_id()
            person = self._person(first["from"])
            series = {"id": sid, "project": proj, "name": None, "date": w.now(), "submitter": person,
                      "version": first["version"], "total": total or first["total"], "received_total": 0,
                      "cover_letter": None, "patches": []}
            w.series[sid] = series
            self._event("series-created", proj, series=sid)
            for mail, raw in zip(parsed, mails):
                if mail["number"] == 0:
                    cid = w.new_id()
                    w.covers[cid] = {"id": cid, "series": sid, **mail, "submitter": self._person(mail["from"]),
                                     "date": w.now()}
                    w.mails[("cover", cid)] = mail["raw"]
                    series["cover_letter"] = cid
                    series["name"] = mail["title"]
                    self._event("cover-created", proj, cover=cid)
                    continue
                pid = w.new_id()
                w.patches[pid] = {"id": pid, "series": sid, **mail, "submitter": self._person(mail["from"]),
                                  "date": w.now(), "state": "new", "archived": False}
                w.mails[("patch", pid)] = mail["raw"]
                series["patches"].append(pid)
                series["received_total"] += 1
                if series["name"] is None:
                    series["name"] = mail["title"]
                self._event("patch-created", proj, patch=pid)
            if series["received_total"] >= series["total"]:
                self._event("series-completed", proj, series=sid)
            return self._series(series)

    def _person(self, sender: str) -> dict:
        name, address = email.utils.parseaddr(sender)
        if address not in self.world.people:
            pid = len(self.world.people) + 1
            self.world.people[address] = {"id": pid, "url": f"{self.url}/api/1.3/people/{pid}/",
                                          "name": name or address, "email": address}
        return self.world.people[address]

    def _event(self, category: str, project: dict, **payload) -> None:
        self.world.events.append({"id": len(self.world.events) + 1, "category": category,
                                  "project": project, "date": self.world.now(), "payload": payload})

    # -- faults ------------------------------------------------------------------------------------
    def fail_next(self, status: int, count: int = 1, retry_after: str | None = None) -> None:
        with self.lock:
            self.faults += [Fault(status, retry_after)] * count

    def take_fault(self) -> Fault | None:
        with self.lock:
            if self.faults:
                return self.faults.pop(0)
            if self.fault_every and len(self.requests) % self.fault_every[0] == 0:
                return self.fault_every[1]
        return None

    # -- representations (the spec's shapes) ------------------------------------------------------
    def _project_embedded(self, proj: dict) -> dict:
        keys = ("id", "url", "name", "link_name", "list_id", "list_email", "web_url", "scm_url", "webscm_url",
                "list_archive_url", "list_archive_url_format", "commit_url_format")
        return {k: proj[k] for k in keys}

    def _series_embedded(self, series: dict) -> dict:
        sid = series["id"]
        return {"id": sid, "url": f"{self.url}/api/1.3/series/{sid}/", "web_url": f"{self.url}/project/"
                f"{series['project']['link_name']}/list/?series={sid}", "name": series["name"],
                "date": series["date"], "version": series["version"], "mbox": f"{self.url}/series/{sid}/mbox/"}

    def _patch_embedded(self, patch: dict) -> dict:
        pid = patch["id"]
        return {"id": pid, "url": f"{self.url}/api/1.3/patches/{pid}/", "web_url": f"{self.url}/patch/{pid}/",
                "msgid": patch["msgid"], "list_archive_url": None, "date": patch["date"], "name": patch["name"],
                "mbox": f"{self.url}/patch/{pid}/mbox/"}

    def _cover_embedded(self, cover: dict) -> dict:
        cid = cover["id"]
        return {"id": cid, "url": f"{self.url}/api/1.3/covers/{cid}/", "web_url": f"{self.url}/cover/{cid}/",
                "msgid": cover["msgid"], "list_archive_url": None, "date": cover["date"], "name": cover["name"],
                "mbox": f"{self.url}/cover/{cid}/mbox/"}

    def _series(self, series: dict) -> dict:
        w = self.world
        cover = w.covers.get(series["cover_letter"]) if series["cover_letter"] else None
        return {**self._series_embedded(series), "project": self._project_embedded(series["project"]),
                "submitter": series["submitter"], "total": series["total"],
                "received_total": series["received_total"],
                "received_all": series["received_total"] >= series["total"],
                "cover_letter": self._cover_embedded(cover) if cover else None,
                "patches": [self._patch_embedded(w.patches[p]) for p in series["patches"]]}

    def _patch(self, patch: dict, detail: bool = False) -> dict:
        w = self.world
        series = w.series[patch["series"]]
        checks = w.checks.get(patch["id"], [])
        state = "pending"
        for wanted in ("fail", "warning", "success"):
            if any(c["state"] == wanted for c in checks):
                state = wanted
                break
        data = {**self._patch_embedded(patch), "project": self._project_embedded(series["project"]),
                "commit_ref": None, "pull_url": None, "state": patch["state"], "archived": patch["archived"],
                "hash": patch["hash"], "submitter": patch["submitter"], "delegate": None,
                "series": [self._series_embedded(series)],
                "comments": f"{self.url}/api/1.3/patches/{patch['id']}/comments/",
                "check": state, "checks": f"{self.url}/api/1.3/patches/{patch['id']}/checks/",
                "tags": {}, "related": []}
        if detail:
            data.update(headers={}, content=patch["body"], diff=patch["diff"], prefixes=patch["prefixes"])
        return data

    def _cover(self, cover: dict) -> dict:
        series = self.world.series[cover["series"]]
        return {**self._cover_embedded(cover), "project": self._project_embedded(series["project"]),
                "submitter": cover["submitter"], "series": [self._series_embedded(series)],
                "comments": f"{self.url}/api/1.3/covers/{cover['id']}/comments/",
                "headers": {}, "content": cover["body"]}

    def _event_json(self, event: dict) -> dict:
        w = self.world
        payload = {}
        for key, value in event["payload"].items():
            if key == "series":
                payload[key] = self._series_embedded(w.series[value])
            elif key == "patch":
                payload[key] = self._patch_embedded(w.patches[value])
            elif key == "cover":
                payload[key] = self._cover_embedded(w.covers[value])
        return {"id": event["id"], "category": event["category"],
                "project": self._project_embedded(event["project"]), "date": event["date"], "actor": None,
                "payload": payload}

    def _check(self, patch_id: int, check: dict) -> dict:
        return {"id": check["id"], "url": f"{self.url}/api/1.3/patches/{patch_id}/checks/{check['id']}/",
                "user": self.bot_user, "date": check["date"], "state": check["state"],
                "target_url": check["target_url"], "context": check["context"],
                "description": check["description"]}

    # -- checks posted, for the tests --------------------------------------------------------------
    def all_checks(self) -> list[tuple[int, str, str, str, str | None]]:
        with self.lock:
            return sorted((pid, c["context"], c["state"], c["description"] or "", c["target_url"])
                          for pid, checks in self.world.checks.items() for c in checks)

    # -- request handling --------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers, body: bytes) -> tuple[int, dict, bytes]:
        parsed = urllib.parse.urlsplit(raw_path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        path = parsed.path
        agent = headers.get("User-Agent", "")
        with self.lock:
            self.requests.append((method, raw_path, agent))
        if path.startswith("/api/") and agent.startswith("patchbench-bot"):
            self._validate_request(method, path, query, headers, body)
        fault = self.take_fault()
        if fault is not None:
            extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            return fault.status, extra, b'{"detail": "stand-in fault"}'
        with self.lock:
            self._current = path   # the page links of this answer point back at it
            status, extra, payload = self._route(method, path, query, headers, body)
        if self.observer is not None:
            self.observer(method, path, status)
        if isinstance(payload, (dict, list)):
            data = json.dumps(payload).encode()
            if path.startswith("/api/"):
                self._validate_response(method, path, query, status, data)
            extra.setdefault("Content-Type", "application/json")
            return status, extra, data
        return status, extra, payload

    def _validate_request(self, method, path, query, headers, body) -> None:
        if self.api is None:
            return
        from openapi_core.testing import MockRequest
        request = MockRequest(self.url, method.lower(), path.rstrip("/") or "/", args=query,
                              headers=dict(headers), data=body or None,
                              content_type=headers.get("Content-Type") or "application/json")
        for error in self.api.iter_request_errors(request):
            detail = "; ".join(str(e) for e in getattr(error, "schema_errors", [])) or repr(error.__cause__ or "")
            self.violations.append(f"request {method} {path}: {error!r} {detail}")

    def _validate_response(self, method, path, query, status, data) -> None:
        if self.api is None:
            return
        from openapi_core.testing import MockRequest, MockResponse
        request = MockRequest(self.url, method.lower(), path.rstrip("/") or "/", args=query,
                              headers={"Authorization": f"Token {TOKEN}"})
        for error in self.api.iter_response_errors(request, MockResponse(data, status_code=status)):
            detail = "; ".join(str(e)[:200] for e in getattr(error, "schema_errors", []))
            self.violations.append(f"response {method} {path} {status}: {error!r} {detail}")

    def _route(self, method: str, path: str, query: dict, headers, body: bytes):
        w = self.world
        api = re.match(r"^/api/1\.3(/.*)?$", path)
        if not api:
            return self._web(path)
        rest = (api.group(1) or "/").rstrip("/") + "/"
        if rest == "/":
            return 200, {}, {name: f"{self.url}/api/1.3/{name}/" for name in
                             ("bundles", "covers", "events", "patches", "people", "projects", "series", "users")}
        if rest == "/projects/":
            return self._page(query, [self._project_embedded(p) | {"maintainers": []} for p in w.projects])
        if m := re.match(r"^/projects/([^/]+)/$", rest):
            proj = next((p for p in w.projects if str(p["id"]) == m[1] or p["link_name"] == m[1]), None)
            return (200, {}, proj) if proj else _not_found()
        if rest == "/events/":
            return self._events(query)
        if rest == "/series/":
            items = [s for s in w.series.values() if self._in_project(s["project"], query)]
            return self._page(query, [self._series(s) for s in sorted(items, key=lambda s: s["id"])])
        if m := re.match(r"^/series/(\d+)/$", rest):
            series = w.series.get(int(m[1]))
            return (200, {}, self._series(series)) if series else _not_found()
        if rest == "/patches/":
            items = [p for p in w.patches.values() if self._in_project(w.series[p["series"]]["project"], query)
                     and ("series" not in query or str(p["series"]) == query["series"])
                     and ("msgid" not in query or p["msgid"].strip("<>") == query["msgid"])]
            return self._page(query, [self._patch(p) for p in sorted(items, key=lambda p: p["id"])])
        if m := re.match(r"^/patches/(\d+)/$", rest):
            patch = w.patches.get(int(m[1]))
            return (200, {}, self._patch(patch, detail=True)) if patch else _not_found()
        if m := re.match(r"^/covers/(\d+)/$", rest):
            cover = w.covers.get(int(m[1]))
            return (200, {}, self._cover(cover)) if cover else _not_found()
        if m := re.match(r"^/patches/(\d+)/checks/$", rest):
            pid = int(m[1])
            if pid not in w.patches:
                return _not_found()
            if method == "POST":
                return self._create_check(pid, headers, body)
            checks = [c for c in w.checks.get(pid, [])
                      if all(c[k] == query[k] for k in ("context", "state") if k in query)]
            return self._page(query, [self._check(pid, c) for c in checks])
        if m := re.match(r"^/patches/(\d+)/checks/(\d+)/$", rest):
            check = next((c for c in w.checks.get(int(m[1]), []) if c["id"] == int(m[2])), None)
            return (200, {}, self._check(int(m[1]), check)) if check else _not_found()
        return _not_found()

    @staticmethod
    def _in_project(project: dict, query: dict) -> bool:
        return "project" not in query or query["project"] in (str(project["id"]), project["link_name"])

    def _events(self, query: dict):
        events = [e for e in self.world.events if self._in_project(e["project"], query)
                  and ("category" not in query or e["category"] == query["category"])
                  and ("since" not in query or e["date"] >= _iso(query["since"]))
                  and ("before" not in query or e["date"] < _iso(query["before"]))
                  and ("series" not in query or str(e["payload"].get("series")) == query["series"])]
        newest_first = query.get("order", "-date") != "date"
        events.sort(key=lambda e: (e["date"], e["id"]), reverse=newest_first)
        return self._page(query, [self._event_json(e) for e in events])

    def _page(self, query: dict, items: list):
        per_page = int(query.get("per_page", 30))
        page = int(query.get("page", 1))
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        if page * per_page < len(items):
            links.append(f'<{self.url}{self._current}?{urllib.parse.urlencode({**query, "page": page + 1})}>; rel="next"')
        if page > 1:
            links.append(f'<{self.url}{self._current}?{urllib.parse.urlencode({**query, "page": page - 1})}>; rel="prev"')
        return 200, ({"Link": ", ".join(links)} if links else {}), chunk

    def _create_check(self, pid: int, headers, body: bytes):
        if headers.get("Authorization") != f"Token {TOKEN}":
            return 403, {}, {"detail": "Authentication credentials were not provided."}
        try:
            data = json.loads(body) if headers.get("Content-Type", "").startswith("application/json") \
                else dict(urllib.parse.parse_qsl(body.decode()))
        except ValueError:
            return 400, {}, {"detail": "bad body"}
        if data.get("state") not in ("pending", "success", "warning", "fail") or \
                not re.match(r"^[-a-zA-Z0-9_]+$", data.get("context") or ""):
            return 400, {}, {"state": ["bad"], "context": ["bad"]}
        check = {"id": self.world.new_id(), "date": self.world.now(), "state": data["state"],
                 "context": data.get("context") or "default", "description": data.get("description"),
                 "target_url": data.get("target_url") or None}
        self.world.checks.setdefault(pid, []).append(check)
        return 201, {}, self._check(pid, check)

    def _web(self, path: str):
        w = self.world
        if m := re.match(r"^/series/(\d+)/mbox/$", path):
            series = w.series.get(int(m[1]))
            if not series:
                return _not_found()
            return 200, {"Content-Type": "text/plain; charset=utf-8",
                         "Content-Disposition": f"attachment; filename=series-{series['id']}.patch"}, \
                b"".join(_mbox_entry(w.mails[("patch", p)]) for p in series["patches"])
        if m := re.match(r"^/(patch|cover)/(\d+)/mbox/$", path):
            raw = w.mails.get((m[1], int(m[2])))
            if raw is None:
                return _not_found()
            return 200, {"Content-Type": "text/plain; charset=utf-8",
                         "Content-Disposition": f"attachment; filename={m[1]}-{m[2]}.patch"}, _mbox_entry(raw)
        return _not_found()


def _not_found():
    return 404, {}, {"detail": "Not found."}


def _iso(value: str) -> str:
    """A `since`/`before` value as the naive UTC ISO text events are compared with."""
    when = datetime.fromisoformat(value)
    if when.tzinfo:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    return when.isoformat()


def _mbox_entry(raw: bytes) -> bytes:
    body = re.sub(rb"(?m)^(>*From )", rb">\1", raw)
    return b"From patchwork Mon Sep 17 00:00:00 2001\n" + body.rstrip(b"\n") + b"\n\n"


def _parse_mail(raw: bytes) -> dict:
    if raw.startswith(b"From "):
        raw = raw.split(b"\n", 1)[1]   # git format-patch's mbox separator line
    msg = email.message_from_bytes(raw, policy=policy.default)
    subject = " ".join(str(msg["Subject"]).split())
    match = _PREFIX.match(subject)
    prefix, title = (match["prefix"], match["rest"]) if match else ("", subject)
    words = prefix.replace(",", " ").split()
    number, total, version = 1, 1, 1
    for word in words:
        if m := re.fullmatch(r"(\d+)/(\d+)", word):
            number, total = int(m[1]), int(m[2])
        elif m := re.fullmatch(r"[vV](\d+)", word):
            version = int(m[1])
    kept = [w for w in words if w.upper() != "PATCH"]
    text = msg.get_body(("plain",)).get_content() if msg.is_multipart() else msg.get_content()
    body, _, diff = text.partition("\n---\n")
    return {"msgid": str(msg["Message-Id"]).strip(), "from": str(msg["From"]), "title": title,
            "name": (f"[{','.join(kept)}] " if kept else "") + title, "number": number if words else 1,
            "total": total, "version": version, "prefixes": kept, "body": body, "diff": diff,
            "hash": hashlib.sha1(diff.encode()).hexdigest(), "raw": raw}


def _handler(server: PatchworkServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, data = server.handle(method, self.path, self.headers, body)
            try:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass   # the client was killed (the kill tests do that on purpose)

        def do_GET(self):
            self._serve("GET")

        def do_POST(self):
            self._serve("POST")

        def log_message(self, *args):
            pass

    return Handler
