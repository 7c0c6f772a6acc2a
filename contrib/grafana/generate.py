#!/usr/bin/env python3
"""Writes bitchat-bridge.json beside it, the Grafana dashboard for bitchat-bridge's /metrics.

Run it after changing a panel here (the JSON is committed; nothing runs this at build or test time).
Every metric name used must be in the catalogue (Sources/Bridge/Operations/BridgeMetrics.swift):
Tests/BridgeTests/MetricsCatalogueTests.swift checks the JSON, and that every family has a panel.
"""
import json
import pathlib

SEL = '{instance=~"$instance"}'


def target(expr, legend):
    return {"datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": expr, "legendFormat": legend,
            "refId": "ABCDEFGHIJ"[0]}


def panel(title, targets, kind="timeseries", unit="short", description=""):
    for i, t in enumerate(targets):
        t["refId"] = "ABCDEFGHIJ"[i]
    p = {"type": kind, "title": title, "description": description,
         "datasource": {"type": "prometheus", "uid": "${datasource}"}, "targets": targets,
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {}}
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "colorMode": "value"}
    return p


rate = lambda m, by: f"sum by ({by}) (rate({m}{SEL}[$__rate_interval])) * 60"

rows = [
    ("Health and process", [
        panel("Health, per component", [target(f"min by (component) (bitchat_bridge_health{SEL})", "{{component}}")], kind="stat",
              description="1 while the component passes its /healthz check (bitchat_bridge_health)."),
        panel("Build", [target(f"max by (version, commit) (bitchat_bridge_build_info{SEL})", "{{version}} {{commit}}")], kind="stat",
              description="The release and commit running (bitchat_bridge_build_info)."),
        panel("CPU, cores", [target(f"sum(rate(process_cpu_seconds_total{SEL}[$__rate_interval]))", "cpu")], unit="none"),
        panel("Resident memory", [target(f"sum(process_resident_memory_bytes{SEL})", "resident")], unit="bytes"),
        panel("File descriptors", [target(f"sum(process_open_fds{SEL})", "open"), target(f"sum(process_max_fds{SEL})", "max")]),
        panel("Started", [target(f"max(process_start_time_seconds{SEL}) * 1000", "started")], kind="stat", unit="dateTimeAsIso"),
    ]),
    ("Traffic", [
        panel("Forwarded per minute, by direction", [target(rate("bitchat_bridge_forwarded_total", "direction"), "{{direction}}")],
              unit="short", description="Messages carried across (bitchat_bridge_forwarded_total)."),
        panel("Hidden per minute, by direction and rule",
              [target(rate("bitchat_bridge_hidden_total", "direction, rule"), "{{direction}} {{rule}}")],
              description="Block list (rule=blocked) and spam filter hides (bitchat_bridge_hidden_total)."),
        panel("Mesh relay gate per minute, by outcome", [target(rate("bitchat_bridge_mesh_relay_gate_total", "outcome"), "{{outcome}}")]),
        panel("Deposits per minute", [
            target(f"sum(rate(bitchat_bridge_deposits_total{SEL}[$__rate_interval])) * 60", "accepted"),
            target(rate("bitchat_bridge_deposits_dropped_total", "reason"), "dropped {{reason}}")]),
        panel("Presence published per minute", [target(rate("bitchat_bridge_presence_sent_total", "kind"), "{{kind}}")]),
        panel("Carriers dropped per minute", [target(rate("bitchat_bridge_carriers_dropped_total", "reason"), "{{reason}}")]),
    ]),
    ("Nostr relays", [
        panel("Relays up", [target(f"sum(bitchat_bridge_relay_up{SEL})", "up"), target(f"count(bitchat_bridge_relay_up{SEL})", "configured")],
              kind="stat"),
        panel("Relay up, per relay", [target(f"bitchat_bridge_relay_up{SEL}", "{{relay}}")]),
        panel("Relay state", [target(f'sum by (state) (bitchat_bridge_relay_state{SEL})', "{{state}}")]),
        panel("Reconnects per minute", [target(rate("bitchat_bridge_relay_reconnects_total", "relay"), "{{relay}}")]),
        panel("Relay clock offset", [target(f"bitchat_bridge_relay_clock_offset_seconds{SEL}", "{{relay}}")], unit="s",
              description="The relay's clock minus the bridge's at connect; phones drop events beyond ±900 s "
                          "(bitchat_bridge_relay_clock_offset_seconds)."),
        panel("Events per minute", [
            target(f"sum(rate(bitchat_bridge_events_received_total{SEL}[$__rate_interval])) * 60", "received"),
            target(f"sum(rate(bitchat_bridge_events_verified_total{SEL}[$__rate_interval])) * 60", "verified"),
            target(rate("bitchat_bridge_events_rejected_total", "reason"), "rejected {{reason}}"),
            target(rate("bitchat_bridge_events_dropped_total", "reason"), "dropped {{reason}}")]),
    ]),
    ("Mesh", [
        panel("Mesh peers and links", [target(f"sum(bitchat_bridge_mesh_peers{SEL})", "peers"),
                                       target(f"sum(bitchat_bridge_mesh_links{SEL})", "links")]),
        panel("Stranger cache", [target(f"sum(bitchat_bridge_stranger_cache_entries{SEL})", "entries"),
                                 target(f"sum(rate(bitchat_bridge_stranger_cache_evictions_total{SEL}[$__rate_interval])) * 60",
                                        "evicted/min")]),
        panel("Pin refusals per minute", [
            target(f"sum(rate(bitchat_bridge_identity_pin_refusals_total{SEL}[$__rate_interval])) * 60", "refused")]),
    ]),
    ("Courier gateway (private mail)", [
        panel("Courier mail kept", [target(f"sum by (state) (bitchat_bridge_courier_mail{SEL})", "{{state}}")],
              description="Deposits held (published as drops) and drops waiting for their peer (bitchat_bridge_courier_mail)."),
        panel("Courier deposits per minute", [target(rate("bitchat_bridge_courier_deposits_total", "outcome"), "{{outcome}}")]),
        panel("Courier drops per minute", [target(rate("bitchat_bridge_courier_drops_total", "outcome"), "{{outcome}}")]),
        panel("Courier deliveries per minute", [target(rate("bitchat_bridge_courier_deliveries_total", "outcome"), "{{outcome}}")]),
        panel("Courier publishes per minute", [target(rate("bitchat_bridge_courier_publishes_total", "outcome"), "{{outcome}}")]),
        panel("Courier airtime waits per minute", [target(rate("bitchat_bridge_courier_airtime_waits_total", "cap"), "{{cap}}")],
              description="Ready handovers held back, by cap: downlink_budget means public chat had the mesh's slots."),
        panel("Courier watch", [target(f"sum(bitchat_bridge_courier_watched_peers{SEL})", "watched peers"),
                                target(f"sum(bitchat_bridge_courier_subscriptions{SEL})", "subscriptions"),
                                target(f"max(bitchat_bridge_courier_filter_tags{SEL})", "tags per filter")]),
    ]),
    ("Queues and storage", [
        panel("Queue depth", [target(f"sum by (queue) (bitchat_bridge_queue_depth{SEL})", "{{queue}}")]),
        panel("Queue drops per minute", [target(rate("bitchat_bridge_queue_dropped_total", "queue"), "{{queue}}")]),
        panel("Store failures per minute", [target(rate("bitchat_bridge_store_failures_total", "store"), "{{store}}")]),
        panel("Blocked keys", [target(f"sum(bitchat_bridge_blocked_keys{SEL})", "blocked")], kind="stat"),
        panel("Moderation log records", [target(f"sum(bitchat_bridge_moderation_log_records{SEL})", "records")], kind="stat"),
        panel("Site records (targets; unacknowledged)", [target(f"max(bitchat_bridge_site_records{SEL})", "targets"),
                                                         target(f"sum(bitchat_bridge_site_records_unacknowledged{SEL})", "unacknowledged")],
              kind="stat"),
        panel("Site records per minute", [target(rate("bitchat_bridge_site_records_total", "outcome"), "{{outcome}}")]),
        panel("Stages heard", [target(f"max(bitchat_bridge_site_stages{SEL})", "stages")], kind="stat"),
        panel("Uptime", [target(f"max(bitchat_bridge_uptime_seconds{SEL})", "uptime")], kind="stat", unit="s"),
    ]),
]



def catalogue():
    """(name, kind, labels) of every family, from the metric table in docs/operations.md (checked against the catalogue)."""
    readme = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    table = readme.split("<!-- metrics-table")[1].split("<!-- /metrics-table -->")[0]
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith(("`bitchat_bridge_", "`process_")):
            labels = [] if cells[2] in ("—", "-", "") else [l.strip() for l in cells[2].split(",")]
            yield cells[0].strip("`"), cells[1], labels


# Every family without a hand-made panel above gets one, grouped by prefix, so the dashboard shows the
# whole catalogue however it grows (the catalogue test requires a panel per family).
shown = json.dumps(rows)
detail_rows = {"Mesh engine and transport": [], "Relay details": [], "Sync and board": [], "More": []}
for name, kind, labels in catalogue():
    if f'"{name}' in shown or name + "{" in shown or name + "[" in shown or f"({name}" in shown:
        continue
    by = ", ".join(labels)
    legend = " ".join("{{" + l + "}}" for l in labels) or name
    if kind == "counter":
        expr = f"sum by ({by}) (rate({name}{SEL}[$__rate_interval])) * 60" if labels else \
            f"sum(rate({name}{SEL}[$__rate_interval])) * 60"
        title = name.removeprefix("bitchat_bridge_").removesuffix("_total").replace("_", " ") + " per minute"
    else:
        expr = f"sum by ({by}) ({name}{SEL})" if labels else f"sum({name}{SEL})"
        title = name.removeprefix("bitchat_bridge_").replace("_", " ")
    group = ("Mesh engine and transport" if name.startswith("bitchat_bridge_mesh_") else
             "Relay details" if name.startswith("bitchat_bridge_relay_") else
             "Sync and board" if name.startswith(("bitchat_bridge_sync_", "bitchat_bridge_board_")) else "More")
    detail_rows[group].append(panel(title[0].upper() + title[1:], [target(expr, legend)], description=f"{name}"))
rows += [(title, group) for title, group in detail_rows.items() if group]

panels = []
y = 0
next_id = 1
for title, group in rows:
    panels.append({"type": "row", "title": title, "id": next_id, "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
    next_id += 1
    y += 1
    for i, p in enumerate(group):
        p["id"] = next_id
        next_id += 1
        p["gridPos"] = {"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 8}
        panels.append(p)
    y += ((len(group) + 2) // 3) * 8

dashboard = {
    "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource", "pluginId": "prometheus"}],
    "title": "bitchat-bridge",
    "uid": "bitchat-bridge",
    "description": "bitchat-bridge /metrics: what crosses between Nostr and the mesh, what is hidden, relays, mesh, queues.",
    "tags": ["bitchat", "nostr", "mesh"],
    "schemaVersion": 38,
    "version": 1,
    "editable": True,
    "refresh": "30s",
    "time": {"from": "now-6h", "to": "now"},
    "timezone": "utc",
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
        {"name": "instance", "type": "query", "label": "Bridge", "multi": True, "includeAll": True,
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": "label_values(bitchat_bridge_uptime_seconds, instance)", "refId": "instance"},
         "definition": "label_values(bitchat_bridge_uptime_seconds, instance)", "refresh": 2, "allValue": ".*"},
    ]},
    "annotations": {"list": []},
    "panels": panels,
}

out = pathlib.Path(__file__).resolve().parent / "bitchat-bridge.json"
out.write_text(json.dumps(dashboard, indent=2) + "\n")
print(f"wrote {out} ({len(panels)} panels)")
