"""`deploy/grafana/cardcat.json` loads (valid JSON, the dashboard model's shape) and every panel's query
names only metrics cardcat exports: the ingress's declared ones (`catalog_api.kit.metrics.DECLARED`),
the database gauges of a scrape (`ops.scrape_metrics.SCRAPED_NAMES`) and the scanner's Ray metric.
tests/catalog_api/test_metrics.py checks the same names against a real `/metrics` scrape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "cardcat.json"
METRIC = re.compile(r"\b(?:ray_)?cardcat_[a-z0-9_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def panels(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for panel in node.get("panels", []):
        found.append(panel)
        found.extend(panels(panel))  # a collapsed row holds its panels
    return found


def metric_names(dashboard: dict[str, Any]) -> set[str]:
    """Every metric name the dashboard's queries mention."""
    return {
        name
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
        for name in METRIC.findall(target.get("expr", ""))
    }


def exported_names() -> set[str]:
    from catalog_api.kit.metrics import DECLARED
    from catalog_api.ops.scrape_metrics import SCRAPED_NAMES
    from serve_app.pipeline import STAGE_METRIC

    names = set(SCRAPED_NAMES)
    for metric in DECLARED:
        for family in metric.describe():
            names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    names.update(f"ray_{STAGE_METRIC}{suffix}" for suffix in SUFFIXES["histogram"])
    return names


def test_the_dashboard_is_valid_json_with_queries_on_every_panel():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and isinstance(dashboard["panels"], list)
    graphs = [panel for panel in panels(dashboard) if panel["type"] != "row"]
    assert len(graphs) >= 10
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in graphs:
        assert panel["title"] and panel["targets"], panel
        for target in panel["targets"]:
            assert METRIC.search(target["expr"]), f"{panel['title']}: no cardcat metric in {target['expr']}"
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]


def test_every_queried_metric_is_exported():
    used = metric_names(json.loads(DASHBOARD.read_text()))
    unknown = used - exported_names()
    assert not unknown, f"the dashboard queries metrics cardcat does not export: {sorted(unknown)}"
    # And the dashboard covers every concern: HTTP, rate limit, scans, stages, feeds, webhooks.
    for needed in (
        "cardcat_http_requests_total",
        "cardcat_http_request_duration_seconds_bucket",
        "cardcat_rate_limited_total",
        "cardcat_scans_total",
        "cardcat_scan_stage_seconds_bucket",
        "ray_cardcat_scanner_stage_seconds_bucket",
        "cardcat_feed_age_seconds",
        "cardcat_webhook_queue_depth",
        "cardcat_webhook_deliveries_total",
        "cardcat_webhook_failures_total",
    ):
        assert needed in used, needed


def test_the_check_catches_an_unknown_metric():
    """The comparison can fail: a misspelt metric in a query is reported."""
    query = {"expr": "rate(cardcat_http_request_total[5m])"}
    dashboard = {"panels": [{"type": "timeseries", "targets": [query]}]}
    assert metric_names(dashboard) - exported_names() == {"cardcat_http_request_total"}


@pytest.mark.parametrize("name", ["cardcat_http_requests_total", "cardcat_webhook_queue_depth"])
def test_known_names_are_exported(name: str):
    assert name in exported_names()
