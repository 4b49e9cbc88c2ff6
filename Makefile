# ringlog build and test entry points. `make help` lists them.
GO        ?= go
BIN       := bin/ringlog
COMMIT    := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
VERSION   := $(shell git describe --tags --always 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Every package but the end-to-end suites: `make test` runs their unit
# tests under the race detector.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /e2e/)
# The end-to-end suites (e2e/<area>, one package each, on the shared
# e2e/harness) run real brokers: the binary, or in the test process where
# a test never kills, pauses or restarts one (docs/TESTING.md). `make
# test` runs the fast ones on the io_uring write path; `make e2e` runs
# every suite, on both write paths where the outcome depends on the write
# path. -p 1: one suite at a time. Within a suite, tests that only wait
# on their own brokers (elections, session timeouts, long polls) call
# t.Parallel and run four at a time; tests that measure latency, rates,
# memory or timing bounds do not, and run alone before them.
E2E_FAST := ./e2e/core ./e2e/replication
E2E = RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -p 1 -parallel 4 -count=1
FUZZTIME  ?= 30s
CHAOS_ROUNDS ?= 5
FAULT_RUNS ?= 20

.PHONY: help build cross test e2e test-sync test-loadgen test-faults test-admin test-groups test-tiered test-netfaults test-docs chaos-net test-short run cluster bench bench-engine fuzz chaos faults vet clean profile

help:
	@echo "make build        build $(BIN) and bin/fakebroker (franz-go's kfake, the in-memory baseline for bench)"
	@echo "make cross        build ringlog for macOS (arm64, amd64) and vet the client packages there"
	@echo "make test         vet, every package's unit tests with -race, the core and replication e2e suites"
	@echo "make e2e          every end-to-end suite below (CI runs it after make test)"
	@echo "make test-sync    the core and replication e2e suites on the pwrite/fdatasync write path"
	@echo "make test-faults  e2e/faults: leader kills, full and failing disks, slow fsyncs, on both write paths"
	@echo "make test-admin   e2e/admin: configs, records, transactions, quotas, reassignment, throttle, joins, scale-out"
	@echo "make test-loadgen e2e/loadgen: the load harness against real brokers (agents, workloads, reports, SASL)"
	@echo "make test-groups  e2e/groups and e2e/share: classic, KIP-848 and share groups with franz-go, kcat and librdkafka"
	@echo "make test-tiered  e2e/tiered: 3 brokers, S3 server process, kill -9, object-store outage"
	@echo "make test-netfaults e2e/netfaults: brokers in netns, nftables cuts and loss, history checker, both write paths"
	@echo "make test-docs    e2e/docs: the command blocks of README.md and docs/*.md, read from the files, run on fresh brokers"
	@echo "make chaos-net    that schedule NETFAULT_RUNS times in a row (default 20) on NETFAULT_IO (uring|sync); NETFAULT_SEED=N|random: randomized schedules"
	@echo "make run          run a single broker on 127.0.0.1:9092 with data in ./data"
	@echo "make cluster      run a 3-node cluster on 127.0.0.1:9092-9094 (data in ./cluster-data) until Ctrl-C"
	@echo "make bench        start a local 3-broker cluster, run the default load, print the HDR report"
	@echo "make bench-engine go test -bench for the storage engine"
	@echo "make profile      3 local brokers, 60 s acks=all load with a consumer; broker CPU/heap/mutex/block profiles (and perf) of the window, then the report"
	@echo "make chaos        failover test under acks=all load for CHAOS_ROUNDS rounds (default $(CHAOS_ROUNDS)), prints the checker's counts"
	@echo "make faults       the kill -9 failover scenario FAULT_RUNS times (default $(FAULT_RUNS)): every produce answered in time, checker clean"
	@echo "make fuzz         run every fuzz target for FUZZTIME (default $(FUZZTIME))"

# bin/fakebroker is franz-go's in-memory kfake behind serve's flags: the
# baseline `ringlog bench --brokers 1 --broker-bin bin/fakebroker` measures.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/ringlog
	$(GO) build -o bin/fakebroker ./loadgen/internal/fakebroker

# The broker is Linux-only; on macOS the binary is a client (README,
# Platforms): it must build there, and the client packages must vet.
CROSS_VET_PKGS := ./loadgen/... ./results/... ./examples/... ./internal/launch/...
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -ldflags "$(LDFLAGS)" -o /dev/null ./cmd/ringlog
	GOOS=darwin GOARCH=amd64 $(GO) build -ldflags "$(LDFLAGS)" -o /dev/null ./cmd/ringlog
	GOOS=darwin GOARCH=arm64 $(GO) vet $(CROSS_VET_PKGS)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

# The default test run: static checks, every package's unit tests with
# -race (the engine under both write paths), then the core and replication
# end-to-end suites (real broker processes, franz-go, kcat, librdkafka) on
# the io_uring write path.
test: vet build
	RINGLOG_TEST_BROKER_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 10m $(UNIT_PKGS)
	@echo "== end-to-end: core and replication, --io uring"
	RINGLOG_TEST_IO=uring $(E2E) -timeout 15m $(E2E_FAST)

# Every end-to-end suite; CI runs it after `make test`.
e2e: test-sync test-faults test-admin test-loadgen test-groups test-tiered test-docs test-netfaults

# The core and replication suites on the pwrite/fdatasync fallback, so
# every broker test passes on both write paths.
test-sync: build
	RINGLOG_TEST_IO=sync $(E2E) -timeout 15m $(E2E_FAST)

# Leader kills under an idempotent producer, a restarted leader's high
# watermark, full and failing disks, slow fsyncs, ListOffsets across a
# leader change: on both write paths.
test-faults: build
	@echo "== fault tests with --io uring"
	RINGLOG_TEST_IO=uring $(E2E) -timeout 10m ./e2e/faults
	@echo "== fault tests with --io sync"
	RINGLOG_TEST_IO=sync $(E2E) -timeout 10m ./e2e/faults

# Configs, DeleteRecords, log dirs, transactions, quotas, reassignment,
# replication throttle, `ringlog admin`, brokers joining, scale-out.
test-admin: build
	RINGLOG_TEST_IO=uring $(E2E) -timeout 15m ./e2e/admin

# The load harness against real brokers: agents, OMB workload files,
# consumer workloads, reports in headless Chromium, SASL, sizing.
test-loadgen: build
	RINGLOG_TEST_IO=uring $(E2E) -timeout 15m ./e2e/loadgen

# Classic and KIP-848 consumer groups: franz-go, kcat and librdkafka
# members through leaves, kills, joins and coordinator failover (the
# side-by-side rebalance benchmark is behind RINGLOG_GROUP848_BENCH=1).
test-groups: build
	RINGLOG_TEST_IO=uring $(E2E) -timeout 15m ./e2e/groups ./e2e/share

# Tiered storage: 3 brokers and the test S3 server as its own process, 2 GiB
# through a 30 s local window with a leader kill -9 and an object-store
# outage, read errors, remote retention, a follower restarting from the
# remote tier (the benchmark is behind RINGLOG_TIERED_BENCH=1).
test-tiered: build
	RINGLOG_TEST_IO=uring $(E2E) -timeout 20m ./e2e/tiered

# The documentation's commands: every shell block of README.md and
# docs/*.md is run (read from the file at test time, on the ports it names,
# so nothing else may hold 9092-9095, 9192-9195 or 9644-9647) or skipped
# with a reason in a doc-test marker; an unmarked block fails
# (docs/TESTING.md). Needs kcat and curl.
test-docs: build
	$(E2E) -timeout 10m ./e2e/docs

# Network partitions and the network-fault schedule (brokers in network
# namespaces, nftables partitions, one-way cuts, loss, kill -9 and SIGSTOP
# on top, the history checker; about five minutes per write path), once
# per path. `make
# chaos-net` repeats it (NETFAULT_RUNS, default 20, on NETFAULT_IO).
# Needs root, iproute2 and nftables (docs/NETWORK-FAULTS.md).
NETFAULT_RUNS ?= 20
NETFAULT_IO ?= uring
# NETFAULT_SEED=N (or random: a new seed per run) runs randomized
# schedules of NETFAULT_STEPS steps instead of the fixed one.
NETFAULT_SEED ?=
NETFAULT_STEPS ?= 12
test-netfaults: build
	@for io in uring sync; do echo "== network faults with --io $$io"; \
	  RINGLOG_TEST_IO=$$io $(E2E) -timeout 10m -v ./e2e/netfaults > bin/netfaults-$$io.log 2>&1; rc=$$?; \
	  grep -E '^(netfaults:|--- |ok|FAIL)' bin/netfaults-$$io.log; [ $$rc -eq 0 ] || { tail -80 bin/netfaults-$$io.log; exit $$rc; }; done

chaos-net: build
	@for i in $$(seq 1 $(NETFAULT_RUNS)); do seed="$(NETFAULT_SEED)"; [ "$$seed" != random ] || seed=$$RANDOM$$RANDOM; \
	  echo "== run $$i of $(NETFAULT_RUNS), --io $(NETFAULT_IO)$${seed:+, seed $$seed}"; \
	  RINGLOG_NETFAULTS_SEED=$$seed RINGLOG_NETFAULTS_STEPS=$(NETFAULT_STEPS) RINGLOG_TEST_IO=$(NETFAULT_IO) $(E2E) -timeout 120m -run '^(TestNetworkFaults|TestNetworkDelay)$$' -v ./e2e/netfaults > bin/chaos-net-$$i.log 2>&1; rc=$$?; \
	  grep -E '^(netfaults:|--- |ok|FAIL)' bin/chaos-net-$$i.log; [ $$rc -eq 0 ] || { echo "run $$i failed: bin/chaos-net-$$i.log"; exit $$rc; }; done

test-short:
	$(GO) test -short -count=1 ./...

run: build
	./$(BIN) serve --data-dir ./data

cluster: build
	./$(BIN) dev cluster --nodes 3 --base-dir ./cluster-data

bench: build
	./$(BIN) bench

bench-engine:
	$(GO) test -run '^$$' -bench . -benchmem ./engine/

# The standard profiled workload (BENCHMARKS.md section 8): profiles land
# in bench-results/profile-<time>/profiles/broker-N/. DURATION, WARMUP,
# RATE and OUT override the defaults (60s, 10s, 20000 msg/s).
profile:
	scripts/profile.sh

# Kill -9 / SIGSTOP rounds against a 5-node cluster under acks=all load,
# then the checker (lost, duplicated, reordered acknowledged records;
# replicas byte-identical). One round also runs in `make test`.
chaos: build
	@RINGLOG_CHAOS_ROUNDS=$(CHAOS_ROUNDS) $(E2E) -timeout 30m -run 'TestFailoverUnderLoad' -v ./e2e/replication > bin/chaos.log 2>&1; rc=$$?; \
	  grep -E '^(chaos:|--- |ok|FAIL|\s+failover_test)' bin/chaos.log; echo "full output: bin/chaos.log"; exit $$rc

# The leader-kill scenario (3 brokers, idempotent acks=all producer at 2,000
# msg/s on 6 partitions, kill -9 and restart of two partition leaders)
# FAULT_RUNS times on one cluster: every produce answered within its
# timeout, the producer finishes, purgatories empty, checker clean. One
# run is part of `make test`.
faults: build
	@RINGLOG_FAILOVER_ACK_RUNS=$(FAULT_RUNS) $(E2E) -timeout 60m -run '^TestFailoverAcksAnswered$$' -v ./e2e/faults > bin/faults.log 2>&1; rc=$$?; \
	  grep -E '^(failover-acks:|--- |ok|FAIL|\s+failover_acks_test)' bin/faults.log; echo "full output: bin/faults.log"; exit $$rc

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

clean:
	rm -rf bin
