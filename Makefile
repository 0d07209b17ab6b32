PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-unit demo install jars polyglot peer-franz peer-confluent lint bench chaos cutoff raft-fuzz membership-soak test-many-streams main-job-kill metadata-snapshot-soak soak clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# A src layout: the editable install puts src/ on sys.path through a plain .pth, so Spark's
	# pkgutil.iter_modules() lists pyspark_vdl and format("vdl") resolves from any directory.
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) kcat jars polyglot
	# Bytecode for src/, which pip does not compile for an editable install: with
	# PYTHONDONTWRITEBYTECODE set, every broker, CLI and Spark Python worker process would
	# otherwise compile what it imports at each start (~1 CPU s over a `make demo`). Up to date,
	# a quarter of a second.
	$(PY) -m compileall -q src

# The clients of other languages the tests drive (tests/support/polyglot.py): franz-go, a Go
# program built into the git-ignored build/polyglot/ (modules pinned by go.mod/go.sum, fetched
# into Go's module cache here, never by a test), and kafkajs, `npm ci` from the committed lock
# file into tests/support/node/node_modules/.
FRANZ := build/polyglot/vdl-franz
$(FRANZ): $(wildcard tests/support/go/*.go) tests/support/go/go.mod tests/support/go/go.sum
	cd tests/support/go && go build -mod=readonly -o ../../../$(FRANZ) .
# rskafka, a pure-Rust client (tests/support/rust, crates pinned by its Cargo.lock).
# (rustup installs cargo in ~/.cargo/bin, which a non-login shell's PATH may lack)
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)
RSKAFKA := build/polyglot/vdl-rskafka
$(RSKAFKA): tests/support/rust/src/main.rs tests/support/rust/Cargo.toml tests/support/rust/Cargo.lock
	$(CARGO) build --quiet --locked --manifest-path tests/support/rust/Cargo.toml --target-dir build/rust
	cp build/rust/debug/vdl-rskafka $(RSKAFKA)
KAFKAJS := tests/support/node/node_modules/.installed
$(KAFKAJS): tests/support/node/package.json tests/support/node/package-lock.json
	cd tests/support/node && npm ci --no-audit --no-fund --loglevel=error
	touch $(KAFKAJS)
# franz-go's own test suites (kgo's run against a broker, kadm's are unit tests), compiled from
# the same pinned modules, and each package's source directory in the module cache beside them
# (.dir: Go runs a package's tests there, and some read its sources):
# tests/support/franz_suite.py runs them (make peer-franz; a subset in make test).
FRANZ_SUITES := build/polyglot/franz-kgo.test build/polyglot/franz-kadm.test
build/polyglot/franz-%.test: tests/support/go/go.mod tests/support/go/go.sum
	cd tests/support/go && go test -c -mod=readonly -o ../../../$@ github.com/twmb/franz-go/pkg/$* \
	  && go list -mod=readonly -f '{{.Dir}}' github.com/twmb/franz-go/pkg/$* > ../../../$@.dir
polyglot: $(FRANZ) $(RSKAFKA) $(KAFKAJS) $(FRANZ_SUITES)

# franz-go's whole kgo suite on 1 node and on 3 (KGO_TEST_RECORDS=$(FRANZ_RECORDS); franz-go's
# own default is 500000): every test's outcome, failing on one VDL does not explain (README).
FRANZ_RECORDS ?= 20000
peer-franz: $(STAMP) $(FRANZ_SUITES)
	$(PY) -m tests.support.franz_suite --records $(FRANZ_RECORDS)

# The JVM parts (jvm/pom.xml): Apache Kafka's broker, tools, Java client and Kafka Streams into
# jvm/lib/kafka/, an older Java client (kafka-clients 3.4) into jvm/lib/kafka-client-3/, Spark's
# Kafka connector and Delta into jvm/lib/spark/ (less what pyspark ships). Fetched from Maven
# Central once; tests never download.
JARS := jvm/lib/.fetched
$(JARS): jvm/pom.xml jvm/kafka/pom.xml jvm/kafka-client-3/pom.xml jvm/spark/pom.xml jvm/prune_spark_jars.py $(STAMP)
	rm -rf jvm/lib
	mvn -q -B -f jvm/pom.xml package
	$(PY) jvm/prune_spark_jars.py jvm/lib/spark
	touch $(JARS)

# The tests' Java programs (tests/support/java/): the harness (Kafka's Java client driven over
# stdin/stdout), Kafka Streams apps (a word count; windowed, join and standby topologies) and a
# Kafka Connect source connector (with the ServiceLoader manifest Connect's
# plugin.discovery=service_load finds it by), compiled against jvm/lib/kafka/ into the
# git-ignored jvm/lib/harness/.
HARNESS_SOURCES := $(wildcard tests/support/java/*.java)
HARNESS := jvm/lib/harness/.compiled
$(HARNESS): $(HARNESS_SOURCES) $(wildcard tests/support/java/META-INF/services/*) $(JARS)
	rm -rf jvm/lib/harness
	javac -Xlint:all -d jvm/lib/harness -cp 'jvm/lib/kafka/*' $(HARNESS_SOURCES)
	cp -r tests/support/java/META-INF jvm/lib/harness/
	touch $(HARNESS)

# The Spark driver's class-data-sharing archive (vdl_dev/class_archive.py): the classes the main
# job's warm-up and delta-spark's writes and reads load, which every later Spark session of the
# project maps instead of loading.
CLASS_ARCHIVE := jvm/lib/spark-classes.jsa
$(CLASS_ARCHIVE): $(JARS) $(STAMP) src/vdl_dev/class_archive.py
	$(PY) -m vdl_dev.class_archive

jars: $(JARS) $(HARNESS) $(CLASS_ARCHIVE)

kcat:
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; \
	  else echo "kcat is missing and we are not root: install it (apt-get install kcat)"; fi; }

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: install lint
	$(PY) -m pytest -q

# The pure tier: no sockets, processes, threads or sleeps (tests marked `unit`).
test-unit: $(STAMP)
	$(PY) -m pytest -q -m "unit and not slow" tests/unit

demo: install
	$(VENV)/bin/vdl demo

# confluent-kafka-python's own integration tests (of the release in .venv) against a fresh VDL
# cluster: tests/peers/confluent.py, which fetches their source and test requirements into the
# git-ignored build/peers/ (here only: `make test` never downloads). PEER_NODES=3 for 3 nodes,
# PEER_GROUP_PROTOCOL=consumer for KIP-848 consumers, PEER_SRC=a checkout or git dir to use.
peer-confluent: $(STAMP)
	$(PY) -m tests.peers.confluent

bench: install
	$(PY) -m benchmarks

# A long fault campaign (>= 100 faults, >= 10 minutes, 5 nodes); VDL_CHAOS_SEED=N replays one.
chaos: install
	$(PY) -m tests.faults.chaos --nodes 5 --faults 100 --min-duration 600

# The Raft simulator's fuzzers: 20,000 seeds (membership changes in half of them; the suite runs
# 1,200), and 5,000 of the quiescence fuzzer (many groups per node, node liveness; the suite runs 300).
# A node cut off from the others (Raft links only) with confluent-kafka, kafka-python and aiokafka
# producers bootstrapped at it: how long writes stall, per round; the p99 per client at the end.
ROUNDS ?= 12
cutoff: install
	$(PY) -m tests.faults.cutoff --rounds $(ROUNDS)

raft-fuzz: install
	VDL_RAFT_SEEDS=20000 $(PY) -m pytest -q tests/unit/raft/test_raft_fuzz.py
	VDL_QUIESCE_SEEDS=5000 $(PY) -m pytest -q tests/unit/raft/test_quiescence.py -k random_seeds

# Membership under faults: 30 random reassignments in a row, a node killed -9 in each, acks=all load
# (the suite runs 2); VDL_MEMBERSHIP_SEED=N replays one.
membership-soak: install
	VDL_MEMBERSHIP_ROUNDS=30 $(PY) -m pytest -q tests/faults/test_membership.py -k random_moves

# Metadata snapshots: 1,000,000 offset commits with the node's default snapshot settings, then a
# restart (the suite runs 30,000 with small settings); prints the directory's size and restart time.
metadata-snapshot-soak: install
	VDL_SNAPSHOT_COMMITS=1000000 $(PY) -m pytest -q -s -n 0 tests/integration/test_metadata_snapshots.py -k grow

# A 3-node cluster living for an hour (SOAK_DURATION=seconds to change it) under a mixed workload:
# three clients' producers and group committers over 200 groups, a Spark query, a Delta-tiered
# stream, reassignments and rolling restarts; samples into soak-results/ (soak.json, soak.png).
SOAK_DURATION ?= 3600
soak: install
	$(PY) -m tests.soak --duration $(SOAK_DURATION) --results soak-results

# The main job's driver killed -9 (its whole process group) mid-batch and restarted from its
# checkpoint: once held between a batch's enriched write and its Delta MERGE (as in make test),
# then at 3 random points; VDL_MAIN_JOB_KILLS=N for more.
VDL_MAIN_JOB_KILLS ?= 3
main-job-kill: install
	VDL_MAIN_JOB_KILLS=$(VDL_MAIN_JOB_KILLS) $(PY) -m pytest -q tests/dev/test_main_job_kill.py

# The many-streams process tests at 1,000 streams (make test runs them at 300).
test-many-streams: install
	VDL_MANY_STREAMS=1000 $(PY) -m pytest -q tests/faults/test_many_streams.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info tests/support/node/node_modules jvm/lib jvm/target jvm/*/target
