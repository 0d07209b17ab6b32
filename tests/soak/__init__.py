"""The soak (`make soak`, `python -m tests.soak`): a 3-node cluster living for a long time
(default 1 hour; `--duration` or SOAK_DURATION=seconds) under a mixed workload, sampled as it
goes, then checked.

What runs (tests/soak/soak.py):
- acks=all producers of confluent-kafka (plain and idempotent), kafka-python (idempotent) and
  aiokafka on `soak-main`, kafka-python and aiokafka on `soak-moving` (one replica, moved whole
  from node to node), an idempotent confluent-kafka producer on `soak-tiered`, a stream that is
  a Delta table (vdl.table.path); every acknowledgement is recorded;
- group committers of each client (confluent-kafka, kafka-python, aiokafka; threads) spread over
  200 consumer groups: each serves one group at a time, resuming from its committed offset
  (which must be what was last committed), reading and committing every 100 ms;
- a Spark streaming query (one local SparkSession) reading `soak-main` with
  commitOffsetsToGroup=soak-spark (`--no-spark` leaves it out; the short test in
  tests/faults/test_soak.py does, as a SparkSession's start costs more than its time budget
  allows, and tests/spark covers the option);
- an operator: a reassignment of `soak-moving` every 5 min per hour of run, a rolling restart
  (SIGTERM each node in turn, wait until ready and every stream fully in sync) every 10 min per
  hour of run (intervals scale with --duration);
- every stream has retention (2 MiB of 512 KiB segments, checked every 10 s), as a real
  cluster's streams have: their directories stop growing a few minutes in; a recorder reads
  each stream's committed records as they come, so the final checks also cover what retention
  deleted before the end (a range deleted before it was read is reported as unchecked);
- a sampler: every node's RSS, open files and threads (its process tree), the disk use of its
  metadata directory and of each stream's directory, and each restart's time from process start
  to its readiness line.

At the end: every acknowledged record is at its acknowledged offset, an idempotent producer's
records are stored once, the Delta table holds every offset once with the log's value, every
group's committed offset reads back as committed, the Spark query's group offset is stored.
Goals, measured and reported (not failing the run unless --strict-goals), in a goal table (met,
missed, or unclear when the run's noise cannot tell; soak.evaluate_goals), meaningful although every
node restarts each rolling round:
- RSS and open files flat within 5 % per hour after warm-up: each node's processes compared at the
  same age after their start across the soak (what a new process carries more than the one
  before), and the slope within each process past its own warm-up (a leak each restart hides):
  from when its tail caches are full (each node's vdl_tail_cache_bytes, sampled; they fill after
  a start up to what the logs hold or tail_cache_bytes, memory that is warm-up, not growth);
- metadata disk flat within 5 % per hour: the peaks and troughs of its sawtooth after the first
  truncation (the log is deleted a 4 MiB segment at a time behind a snapshot);
- restart time at the end at most 10 % above the start (end <= 1.10 x start: restarts must not get
  slower, a faster one meets it): each node's last restarts against its first (medians), with the
  CPU time to ready beside it (the machine's load, sampled too, moves wall time);
- 0 acknowledged records lost (and no idempotent record stored twice), counted exactly.
Writes soak.json and soak.png to the results directory (default soak-results/) and prints a table.
"""
