"""TEST-ONLY: the scrape configuration the Prometheus Operator makes of a ServiceMonitor, for the
fields the chart's operator ServiceMonitor uses, so that a real Prometheus scrapes the operator
as it would under the Prometheus Operator (whose controller cannot be built here).

Written from the Prometheus Operator's own golden files (pkg/prometheus/testdata, e.g.
GenerateRelabelConfig.golden and HonorLabelsOverriding.golden): the same job name, endpoints
discovery in the selected namespaces, the selector's keep rules, the target labels it sets
(namespace, service, pod, container, job from the Service's name then from `jobLabel`,
endpoint) and honor_labels. A field this module does not translate is refused, so the chart
cannot grow one that the scrape test would silently drop.
"""

from __future__ import annotations

import re
from typing import Any

SPEC_FIELDS = frozenset({"jobLabel", "namespaceSelector", "selector", "endpoints"})
ENDPOINT_FIELDS = frozenset({"port", "path", "honorLabels", "interval", "scrapeTimeout"})


def sanitize(name: str) -> str:
    """A Kubernetes label name as a Prometheus meta label's suffix."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _refuse_unknown(found: dict[str, Any], known: frozenset[str], where: str) -> None:
    if unknown := set(found) - known:
        raise ValueError(
            f"{where}: {sorted(unknown)} not translated (tests/e2e/prometheus_operator.py)"
        )


def scrape_configs(monitor: dict[str, Any]) -> list[dict[str, Any]]:
    """One scrape config per endpoint of `monitor`, as the Prometheus Operator writes it."""
    meta, spec = monitor["metadata"], monitor["spec"]
    _refuse_unknown(spec, SPEC_FIELDS, "ServiceMonitor spec")
    selector = spec["selector"]
    _refuse_unknown(selector, frozenset({"matchLabels"}), "ServiceMonitor selector")
    namespaces = spec["namespaceSelector"]["matchNames"]
    configs = []
    for index, endpoint in enumerate(spec["endpoints"]):
        _refuse_unknown(endpoint, ENDPOINT_FIELDS, "ServiceMonitor endpoint")
        relabel: list[dict[str, Any]] = [
            {"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}
        ]
        for key, value in sorted(selector.get("matchLabels", {}).items()):
            label = sanitize(key)
            relabel.append({
                "action": "keep",
                "source_labels": [f"__meta_kubernetes_service_label_{label}",
                                  f"__meta_kubernetes_service_labelpresent_{label}"],
                "regex": f"({value});true",
            })  # fmt: skip
        relabel.append({"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"],
                        "regex": endpoint["port"]})  # fmt: skip
        for kind, target in (("Node", "node"), ("Pod", "pod")):
            relabel.append({
                "source_labels": ["__meta_kubernetes_endpoint_address_target_kind",
                                  "__meta_kubernetes_endpoint_address_target_name"],
                "separator": ";", "regex": f"{kind};(.*)", "replacement": "${1}",
                "target_label": target,
            })  # fmt: skip
        relabel += [
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
             "regex": "(Failed|Succeeded)"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job",
             "replacement": "${1}"},
        ]  # fmt: skip
        if job_label := spec.get("jobLabel"):
            relabel.append({
                "source_labels": [f"__meta_kubernetes_service_label_{sanitize(job_label)}"],
                "target_label": "job", "regex": "(.+)", "replacement": "${1}",
            })  # fmt: skip
        relabel.append({"target_label": "endpoint", "replacement": endpoint["port"]})
        config: dict[str, Any] = {
            "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "kubernetes_sd_configs": [{"role": "endpoints", "namespaces": {"names": namespaces}}],
            "metrics_path": endpoint.get("path", "/metrics"),
            "relabel_configs": relabel,
        }
        for field, key in (("interval", "scrape_interval"), ("scrapeTimeout", "scrape_timeout")):
            if field in endpoint:
                config[key] = endpoint[field]
        configs.append(config)
    return configs
