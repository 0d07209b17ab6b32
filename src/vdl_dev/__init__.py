"""Local development: `vdl dev-cluster` and `vdl demo` (the CLI imports this package only for them).

dev_cluster.py  DevCluster: n local `vdl-broker` processes in their own process groups (also the
                process-level test harness), and `run_dev_cluster` behind `vdl dev-cluster`
cluster.py      the demo's cluster: a DevCluster on free loopback ports, its state in cluster.json
workload.py     deterministic order events (JSON, keyed by customer) and a fast producer
pipeline.py     the structured-streaming job (format("vdl") -> JSON -> windowed aggregate -> Delta,
                and enriched events back to a log stream)
run.py          `run_demo()` / `main(argv)`: starts and stops everything, prints what happened

dev_cluster.py needs only the plain install; the demo needs the [spark] extra.
"""
