"""Grafana provisioning for compose/: the datasource the dashboards default to, and the provider."""

from __future__ import annotations

from pathlib import Path

import yaml

from tritonwatch.dashboards import panels

ROOT = Path(__file__).resolve().parent.parent
PROVISIONING = ROOT / "compose" / "grafana" / "provisioning"


def test_datasource_is_the_dashboards_default() -> None:
    data = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    assert data["apiVersion"] == 1
    [ds] = data["datasources"]
    assert ds["type"] == "prometheus"
    assert ds["name"] == panels.DEFAULT_DATASOURCE
    assert ds["isDefault"] is True
    assert ds["url"].startswith("http://")


def test_dashboard_provider_reads_files_and_keeps_them_read_only() -> None:
    data = yaml.safe_load((PROVISIONING / "dashboards" / "tritonwatch.yml").read_text())
    [provider] = data["providers"]
    assert provider["type"] == "file"
    assert provider["allowUiUpdates"] is False
    assert provider["options"]["path"].startswith("/var/lib/grafana/dashboards")
