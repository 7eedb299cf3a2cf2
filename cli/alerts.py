"""``tritonwatch alerts status|silence``: what is firing for which model, and silencing a model.

Talks to Alertmanager's v2 API (``/api/v2/alerts``, ``/api/v2/silences``) with requests.

``status`` prints one line per alert, sorted by model::

    MODEL           ALERT                     SEVERITY  STATE       SINCE                 SUMMARY
    fraud_detector  TritonSLOErrorBudgetBurn  page      active      2026-12-02T16:20:01Z  fraud_detector is ...

``silence`` creates a silence on ``model=<M>`` (for a rollout) and prints its id and end time.
An unreachable Alertmanager or an error answer is one line and exit code 1.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TextIO

from tritonwatch.errors import UsageError

HELP = "show firing alerts per model, or silence a model, through Alertmanager's API"
DEFAULT_URL = "http://127.0.0.1:9093"
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Alert:
    name: str
    model: str
    severity: str
    state: str  # active | suppressed | unprocessed
    since: str
    summary: str
    silenced_by: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> Alert:
        labels = raw.get("labels") or {}
        status = raw.get("status") or {}
        return cls(
            name=str(labels.get("alertname", "")),
            model=str(labels.get("model", "-")),
            severity=str(labels.get("severity", "-")),
            state=str(status.get("state", "")),
            since=str(raw.get("startsAt", "")),
            summary=str((raw.get("annotations") or {}).get("summary", "")),
            silenced_by=tuple(status.get("silencedBy") or ()),
            labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        )


class AlertmanagerClient:
    """A small client for Alertmanager's v2 API; every failure is a one-line ``TritonwatchError``."""

    def __init__(self, url: str, timeout: float = TIMEOUT_S) -> None:
        import requests

        self.url = url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        import requests

        from tritonwatch.errors import TritonwatchError

        url = f"{self.url}{path}"
        try:
            resp = self._session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.exceptions.ConnectionError:
            raise TritonwatchError(
                f"cannot reach Alertmanager at {self.url} (connection refused or no route)"
            ) from None
        except requests.exceptions.Timeout:
            raise TritonwatchError(
                f"Alertmanager at {self.url} did not answer within {self.timeout:g}s"
            ) from None
        except requests.exceptions.RequestException as exc:
            raise TritonwatchError(f"--alertmanager {self.url}: {type(exc).__name__}") from None
        if resp.status_code >= 400:
            first = (resp.text.strip().splitlines() or [""])[0][:200]
            raise TritonwatchError(
                f"Alertmanager at {self.url} answered {resp.status_code} to {method} {path}: {first}"
            )
        try:
            return resp.json()
        except ValueError:
            raise TritonwatchError(f"{url} did not answer JSON: is this Alertmanager?") from None

    def alerts(self, model: str | None = None) -> list[Alert]:
        """Every alert Alertmanager holds (active, silenced, inhibited), sorted by model and name."""
        params: dict[str, Any] = {
            "active": "true",
            "silenced": "true",
            "inhibited": "true",
            "unprocessed": "true",
        }
        if model:
            params["filter"] = f'model="{model}"'
        raw = self._request("GET", "/api/v2/alerts", params=params)
        alerts = [Alert.from_api(a) for a in raw]
        return sorted(alerts, key=lambda a: (a.model, a.name, a.severity, a.labels))

    def silence(
        self,
        matchers: dict[str, str],
        duration: timedelta,
        comment: str,
        author: str,
        now: datetime | None = None,
    ) -> tuple[str, datetime]:
        """Silence alerts whose labels equal ``matchers``; returns the silence id and its end."""
        start = now or datetime.now(timezone.utc)
        end = start + duration
        body = {
            "matchers": [
                {"name": k, "value": v, "isRegex": False, "isEqual": True}
                for k, v in sorted(matchers.items())
            ],
            "startsAt": _iso(start),
            "endsAt": _iso(end),
            "createdBy": author,
            "comment": comment,
        }
        answer = self._request("POST", "/api/v2/silences", json=body)
        return str(answer.get("silenceID", "")), end


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _short_time(text: str) -> str:
    return text[:19] + "Z" if len(text) >= 19 else text


def print_status(alerts: Sequence[Alert], out: TextIO) -> None:
    if not alerts:
        print("no alerts", file=out)
        return
    rows = [("MODEL", "ALERT", "SEVERITY", "STATE", "SINCE", "SUMMARY")]
    for a in alerts:
        state = "silenced" if a.silenced_by else a.state
        rows.append((a.model, a.name, a.severity, state, _short_time(a.since), a.summary))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5], file=out)


# --- CLI ----------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tritonwatch.flags import env_defaults

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = sub.add_parser(
        "status", help="what is firing, for which model", description="what is firing, for which model"
    )
    silence = sub.add_parser(
        "silence",
        help="silence a model's alerts (e.g. for a rollout)",
        description="silence a model's alerts",
    )
    for p in (status, silence):
        p.add_argument(
            "--alertmanager",
            default=DEFAULT_URL,
            metavar="URL",
            help=f"Alertmanager base URL (default: {DEFAULT_URL})",
        )
    status.add_argument("--model", help="only this model's alerts")
    silence.add_argument("--model", required=True, help="the model to silence (matcher model=<M>)")
    silence.add_argument(
        "--for",
        dest="silence_for",
        default="2h",
        metavar="DURATION",
        help="how long, e.g. 30m, 2h (default: 2h)",
    )
    silence.add_argument("--comment", required=True, help="why (shown in Alertmanager)")
    silence.add_argument("--author", default=None, help="who (default: the current user)")
    for p in (status, silence):
        env_defaults(p)


def run(args: argparse.Namespace) -> int:
    from tritonwatch.slo import parse_duration

    client = AlertmanagerClient(args.alertmanager)
    if args.action == "status":
        print_status(client.alerts(args.model), sys.stdout)
        return 0
    # dest silence_for, not duration: TRITONWATCH_DURATION is load's and demo's --duration (seconds).
    seconds = parse_duration(args.silence_for, "--for")
    if seconds < 60:
        raise UsageError(f"--for: must be at least 1m (got {args.silence_for})")
    author = args.author or _user()
    if not args.model.strip():
        raise UsageError("--model: must name a model (got an empty value)")
    silence_id, end = client.silence({"model": args.model}, timedelta(seconds=seconds), args.comment, author)
    print(f"silenced model={args.model} until {_iso(end)} (silence {silence_id}, by {author})")
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "tritonwatch"
