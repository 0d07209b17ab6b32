"""`vdl demo`: a local VDL cluster, a realistic order workload, and a Spark job from VDL to Delta.

workload.py  deterministic order events (JSON, keyed by customer) and a fast producer
pipeline.py  the structured-streaming job (format("vdl") -> JSON -> windowed aggregate -> Delta,
             and enriched events back to a log stream)
run.py       `run_demo()` / `main(argv)`: starts and stops everything, prints what happened
"""
