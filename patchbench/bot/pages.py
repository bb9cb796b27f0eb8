"""Static result pages: one per series, one per patch; plain HTML and CSS, nothing to run.

Layout under the pages directory: `series/<id>/index.html` and `series/<id>/patch-<patch id>.html`,
so that any web server (or `patchbench bot serve`) can serve them and checks can link to them.
Files are written whole and renamed into place: a reader never sees half a page.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

STYLE = """body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
.success{background:#dfd}.warning{background:#ffd}.fail{background:#fdd}.pending{background:#eee}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto}code{font-family:monospace}"""


def series_path(series_id: int) -> str:
    return f"series/{series_id}/index.html"


def patch_path(series_id: int, patch_id: int) -> str:
    return f"series/{series_id}/patch-{patch_id}.html"


def page_url(base_url: str | None, series_id: int, patch_id: int | None) -> str | None:
    """Where the page of a patch (of the series, for None) is served; None without a base URL."""
    if not base_url:
        return None
    page = series_path(series_id) if patch_id is None else patch_path(series_id, patch_id)
    return f"{base_url.rstrip('/')}/{page}"


def write_pages(root: Path, outcome: dict) -> None:
    _write(root / series_path(outcome["id"]), _series_page(outcome))
    for patch in outcome["patches"]:
        _write(root / patch_path(outcome["id"], patch["id"]), _patch_page(outcome, patch))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    scratch.write_text(text, encoding="utf-8")
    os.replace(scratch, path)


def _e(text) -> str:
    return html.escape(str(text if text is not None else ""))


def _document(title: str, body: list[str]) -> str:
    return "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>", *body, "</body></html>", ""])


def _header(outcome: dict) -> list[str]:
    lines = [f"<h1>{_e(outcome['name'] or 'series ' + str(outcome['id']))}</h1>",
             f"<p>patchwork series {outcome['id']}, v{_e(outcome['version'])}"]
    if outcome.get("web_url"):
        lines[-1] += f' (<a href="{_e(outcome["web_url"])}">on patchwork</a>)'
    lines[-1] += "</p>"
    if outcome.get("base"):
        lines.append(f"<p>base <code>{_e(outcome['base'][:12])}</code> ({_e(outcome['base_reason'])})</p>")
    return lines


def _results_table(results: list[dict], patches: dict[int, dict]) -> list[str]:
    rows = ["<table><tr><th>stage</th><th>patch</th><th>state</th><th>description</th></tr>"]
    for result in results:
        patch = patches.get(result["patch"])
        where = "whole series" if patch is None else \
            f'<a href="patch-{patch["id"]}.html">{_e(patch["name"])}</a>'
        rows.append(f'<tr class="{_e(result["state"])}"><td>{_e(result["stage"])}</td><td>{where}</td>'
                    f'<td>{_e(result["state"])}</td><td>{_e(result["description"])}</td></tr>')
    rows.append("</table>")
    return rows


def _details(result: dict) -> list[str]:
    body = []
    for finding in result.get("findings", []):
        body.append(f'<h3 class="{"fail" if finding["severity"] == "error" else "warning"}">'
                    f'{_e(finding["severity"])}: {_e(finding["rule"])}</h3>')
        body.append(f"<p><code>{_e(finding['file'])}:{finding['line']}</code> in "
                    f"<code>{_e(finding['function'])}()</code>: {_e(finding['message'])}</p>")
        body.append(f"<pre>{finding['line']:>6} | {_e(finding['code'])}</pre>")
    for warning in result.get("warnings", []):
        flag = f" [{_e(warning['flag'])}]" if warning.get("flag") else ""
        body.append(f"<p>new {_e(warning['kind'])}: <code>{_e(warning['file'])}:{warning['line']}</code> "
                    f"{_e(warning['function'] or '')}: {_e(warning['message'])}{flag}</p>")
    if result.get("reason"):
        body.append(f"<pre>{_e(result['reason'])}</pre>")
    if result.get("worker"):
        body.append(f"<p>{_e(result['stage'])} ran on farm worker <code>{_e(result['worker'])}</code></p>")
    if result.get("excerpt"):
        body.append("<h3>boot console</h3>")
        body.append(f"<pre>{_e(result['excerpt'])}</pre>")
    return body


def _series_page(outcome: dict) -> str:
    patches = {p["id"]: p for p in outcome["patches"]}
    body = _header(outcome) + ["<h2>results</h2>"] + _results_table(outcome["results"], patches)
    body.append("<h2>patches</h2><ol>")
    body += [f'<li><a href="patch-{p["id"]}.html">{_e(p["name"])}</a></li>' for p in outcome["patches"]]
    body.append("</ol>")
    for result in outcome["results"]:
        if result["patch"] is None:
            body += _details(result)
    return _document(outcome["name"] or f"series {outcome['id']}", body)


def _patch_page(outcome: dict, patch: dict) -> str:
    mine = [r for r in outcome["results"] if r["patch"] in (None, patch["id"])]
    body = [f"<h1>{_e(patch['name'])}</h1>",
            f'<p>patch {patch["id"]} of <a href="index.html">{_e(outcome["name"] or "the series")}</a>'
            + (f' (<a href="{_e(patch["web_url"])}">on patchwork</a>)' if patch.get("web_url") else "")
            + f"; Message-Id <code>{_e(patch['msgid'])}</code></p>"]
    body += _results_table(mine, {patch["id"]: patch})
    for result in mine:
        body += _details(result)
    return _document(patch["name"], body)
