"""What a delivered report says: the mail's subject and parts, the webhook's summary (``deliver`` sends).

The summary names the week, the nearest saturation (the earliest date the report leads with, model or
GPU), the findings that are new this week (all of them without an archive), and where the full report
is: ``--report-url``/<week>/report.html, else the path of report.html as written.
"""

from __future__ import annotations

from pathlib import Path

from tritonwatch.reports import render
from tritonwatch.reports.deliver import Delivery, DeliveryError, message, post_webhook, send_mail
from tritonwatch.reports.figures import BY_RATE, lead_weeks, saturation_date
from tritonwatch.reports.findings import NEW

MAX_LISTED = 10  # new findings named in the webhook's text; the rest counted


def nearest_saturation(report: render.Report) -> str:
    """``model resnet:1 in 2.3 weeks (2026-12-23)``, or that nothing saturates within the forecasts."""
    end = report.week.end
    candidates = [
        (w, f"model {f.name}", saturation_date(f.forecast, end))
        for f in report.models
        if f.capacity_source in BY_RATE and (w := lead_weeks(f.forecast)) is not None
    ]
    candidates += [
        (w, f"GPU {g.uuid}", saturation_date(g.forecast, end))
        for g in report.gpus
        if (w := lead_weeks(g.forecast)) is not None
    ]
    if not candidates:
        return "nothing saturates within the forecasts"
    w, subject, date = min(candidates)
    return f"{subject} now (past capacity)" if w == 0.0 else f"{subject} in {w:.1f} weeks ({date})"


def subject(report: render.Report, week: str) -> str:
    n = len(report.findings)
    return f"Triton capacity report {week}: {n} finding{'s' if n != 1 else ''}, nearest saturation: " + (
        nearest_saturation(report)
    )


def summary(report: render.Report, week: str, where: str, archived: bool) -> str:
    """The webhook's text (plain, a few lines: every chat renders it); with an archive, the new findings."""
    shown = [x for x in report.findings if x.status == NEW] if archived else report.findings
    listed = [f"{x.severity} · {x.label}: {x.text}" for x in shown]
    models = ", ".join(f.name for f in report.models)
    lines = [
        f"Triton capacity report {week} ({len(report.models)} models: {models})",
        f"Nearest saturation: {nearest_saturation(report)}",
        f"{'New findings' if archived else 'Findings'}: {len(listed)}",
        *[f"- {x}" for x in listed[:MAX_LISTED]],
    ]
    if len(listed) > MAX_LISTED:
        lines.append(f"- and {len(listed) - MAX_LISTED} more in the report")
    lines.append(f"Full report: {where}")
    return "\n".join(lines)


def send(delivery: Delivery, report: render.Report, week: str, folder: Path, archived: bool) -> list[str]:
    """Mail and post the report written in ``folder``; what was delivered, one line each. Every
    delivery is tried; the failures are raised together, one line (DeliveryError)."""
    where = (
        f"{delivery.report_url}/{week}/report.html" if delivery.report_url else str(folder / "report.html")
    )
    done, failed = [], []
    if delivery.mail_to and delivery.smtp is not None:
        cid = {c.key: f"{c.key}@tritonwatch" for c in report.charts}
        page = render.html_page(report, chart_src=lambda c: f"cid:{cid[c.key]}")
        msg = message(
            subject(report, week),
            delivery.mail_from,
            delivery.mail_to,
            render.markdown(report),
            page,
            [(cid[c.key], c.png) for c in report.charts],
        )
        try:
            send_mail(delivery.smtp, msg)
            done.append(f"mailed to {', '.join(delivery.mail_to)} via {delivery.smtp.url}")
        except DeliveryError as exc:
            failed.append(str(exc))
    if delivery.webhook:
        try:
            post_webhook(delivery.webhook, summary(report, week, where, archived))
            done.append(f"posted to {delivery.webhook}")
        except DeliveryError as exc:
            failed.append(str(exc))
    if failed:
        raise DeliveryError(f"delivery failed (the report is written: {where}): {'; '.join(failed)}")
    return done
