"""monitoring/: the Grafana dashboard and the Prometheus alert rules use only metric names a
broker serves (so a renamed metric breaks this test, not an operator's dashboard), and each
file is well formed for its tool."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from vdl_broker.metrics import BrokerCollector, BrokerMetrics
from vdl_broker.metrics.tables import TableCollector

MONITORING = Path(__file__).resolve().parents[3] / "monitoring"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
NAME = re.compile(r"\bvdl_[a-z_]+\b")


def served_names() -> set[str]:
    """Every sample name a broker can serve (counters and histograms, scrape-time gauges)."""
    families = [*BrokerMetrics().registry.collect(), *BrokerCollector(None, 0).describe(),  # type: ignore[arg-type]
                *TableCollector(None).describe()]
    return {family.name + suffix for family in families for suffix in SUFFIXES[family.type]}


def test_the_dashboard_uses_served_metrics_only() -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    assert len(exprs) >= 25
    used = {name for expr in exprs for name in NAME.findall(expr)}
    assert used - served_names() == set()
    # Every panel of the data source variable, every query narrowed to the chosen job and instance.
    assert all(p["datasource"] == {"type": "prometheus", "uid": "${datasource}"} for p in panels if p["type"] != "row")
    assert all('job=~"$job", instance=~"$instance"' in expr for expr in exprs)


def test_the_alert_rules_use_served_metrics_only() -> None:
    rules = yaml.safe_load((MONITORING / "prometheus-alerts.yml").read_text())["groups"][0]["rules"]
    assert {r["alert"] for r in rules} >= {"VdlNodeDown", "VdlUnavailableStreams", "VdlUnderReplicatedStreams",
                                          "VdlDiskFilling", "VdlConsumerGroupLagGrowing"}
    for rule in rules:
        assert rule["labels"]["severity"] in ("critical", "warning") and rule["annotations"]["summary"]
        assert set(NAME.findall(rule["expr"])) <= served_names(), rule["alert"]
