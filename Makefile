# ringlog build and test entry points. `make help` lists them.
GO        ?= go
BIN       := bin/ringlog
COMMIT    := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
VERSION   := $(shell git describe --tags --always 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Packages with concurrency run under the race detector in `make test`.
# The load generator's tests (./loadgen/..., about two minutes against real
# brokers) run in `make test-loadgen`, which CI runs after `make test`:
# with them `make test` went past its 15 minutes.
RACE_PKGS := ./engine/... ./iouring/... ./netpath/... ./broker/... ./internal/... ./coordinator/... ./controller/... ./replication/... ./results/... ./examples/...
LOADGEN_PKGS := ./loadgen/...
FUZZTIME  ?= 30s
CHAOS_ROUNDS ?= 5
FAULT_RUNS ?= 20

.PHONY: help build cross test test-loadgen test-faults test-admin test-harness test-groups test-tiered test-netfaults chaos-net test-sync-all test-sync-rest test-short run cluster bench bench-engine fuzz chaos faults vet clean profile

help:
	@echo "make build        build $(BIN) and bin/fakebroker (franz-go's kfake, the in-memory baseline for bench)"
	@echo "make cross        build ringlog for macOS (arm64, amd64) and vet the client packages there"
	@echo "make test         vet, unit tests with -race, integration tests with real clients"
	@echo "make test-faults  the process-level fault tests (leader kills, full and failing disks) on both write paths"
	@echo "make test-loadgen the load generator's tests (-race) against real brokers"
	@echo "make test-tiered  the tiered-storage integration tests (3 brokers, S3 server process, kill -9, object-store outage)"
	@echo "make test-netfaults the network-fault schedule (brokers in netns, nftables cuts and loss, history checker), both write paths"
	@echo "make chaos-net    that schedule NETFAULT_RUNS times in a row (default 20) on NETFAULT_IO (uring|sync); NETFAULT_SEED=N|random: randomized schedules"
	@echo "make test-admin   the admin integration tests (configs, DeleteRecords, log dirs, transactions, quotas, reassignment, throttle, rebalance/decommission, scale-out)"
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
CROSS_VET_PKGS := ./loadgen/... ./results/... ./examples/...
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -ldflags "$(LDFLAGS)" -o /dev/null ./cmd/ringlog
	GOOS=darwin GOARCH=amd64 $(GO) build -ldflags "$(LDFLAGS)" -o /dev/null ./cmd/ringlog
	GOOS=darwin GOARCH=arm64 $(GO) vet $(CROSS_VET_PKGS)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

# The default test run: static checks, race-enabled unit tests (the engine
# under both write paths), then the process-level integration tests (real
# broker, franz-go, kcat, librdkafka): all of them on the io_uring write
# path, and on the pwrite/fdatasync fallback the ones whose outcome depends
# on the write path (storage, crash recovery, fetch, replication,
# idempotence, transactions). Loadgen's process tests drive the real
# broker binary. `make test-sync-all` runs everything on the fallback too.
# The client-compatibility tests (kcat, librdkafka, franz-go groups) do
# not depend on the write path: they run on the fallback in
# test-sync-rest, which keeps `make test` within its 15 minutes.
SYNC_TESTS ?= TestFranzGoProduceConsumeAllCodecs|TestRestartKeepsDataAndClusterID|TestKill9UnderAcksAllLoad|TestFetch|TestReplicationRF3|TestIdempotent|TestTxnCommitAbortVisibility
# The process-level fault tests (leader kills under an idempotent
# producer, full and failing disks, ListOffsets across a leader change)
# take about two minutes per write path: `make test-faults` runs them on
# both paths (CI runs it after `make test`), which keeps `make test` under
# 15 minutes on a 2-core machine.
FAULT_TESTS ?= TestFailoverAcksAnswered|TestDiskFull|TestDiskError|TestSlowFsync|TestListOffsetsAfterLeaderChange
# The admin integration tests (configs, records, producer and
# transaction listings, quotas, reassignment, replication throttle,
# `ringlog admin`, brokers joining, the scale-out scenario) run in
# `make test-admin`, which CI runs
# after `make test`; they do not depend on the write path.
ADMIN_TESTS ?= TestAdmin
# The harness integration tests (load agents, OMB workload
# files, consumer workloads, reports in headless Chromium) run in
# `make test-harness`, which CI runs after `make test`.
HARNESS_TESTS ?= TestHarness
# The KIP-848 consumer-protocol integration tests (franz-go
# members over a 3-broker cluster through leaves, kills, joins and a
# coordinator kill -9; the side-by-side rebalance benchmark is behind
# RINGLOG_GROUP848_BENCH=1) run in `make test-groups`, which CI runs after
# `make test`.
GROUP848_TESTS ?= TestConsumerProto
# The tiered-storage integration tests (3 brokers and the test
# S3 server as its own process; 2 GiB through a 30 s local window with a
# leader kill -9 and a 60 s object-store outage, read errors and remote
# retention, a follower restarting from the remote tier; the benchmark is
# behind RINGLOG_TIERED_BENCH=1) run in `make test-tiered`, which CI runs
# after `make test-groups`.
TIERED_TESTS ?= TestTiered
# The network-fault schedule (brokers in network namespaces,
# nftables partitions, one-way cuts, loss, with kill -9 and SIGSTOP on
# top, and the history checker; about four minutes per write path) runs
# in `make test-netfaults`, once per path, which CI runs; `make
# chaos-net` repeats it (NETFAULT_RUNS, default 20, on NETFAULT_IO).
# Needs root, iproute2 and nftables (docs/NETWORK-FAULTS.md).
NETFAULT_TESTS ?= TestNetworkFaults|TestNetworkDelay
NETFAULT_RUNS ?= 20
NETFAULT_IO ?= uring
# NETFAULT_SEED=N (or random: a new seed per run) runs randomized
# schedules of NETFAULT_STEPS steps instead of the fixed one.
NETFAULT_SEED ?=
NETFAULT_STEPS ?= 12
# The tiered packages' unit tests (-race, about a minute) run there too,
# not in `make test`, which is near its 15 minutes.
TIERED_PKGS := ./tiered/...
test: vet build
	RINGLOG_TEST_BROKER_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 10m $(RACE_PKGS)
	@echo "== integration tests with --io uring"
	RINGLOG_TEST_IO=uring RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -skip '^($(FAULT_TESTS)|$(ADMIN_TESTS)|$(HARNESS_TESTS)|$(GROUP848_TESTS)|$(TIERED_TESTS)|$(NETFAULT_TESTS))' ./cmd/...
	@echo "== write-path-dependent integration tests with --io sync"
	RINGLOG_TEST_IO=sync RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -run '^($(SYNC_TESTS))' ./cmd/...

test-sync-all: build
	RINGLOG_TEST_IO=sync RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m ./cmd/...

# The integration tests `make test` does not run on the fallback: CI runs
# this after `make test`, so together the whole suite passes on both paths.
test-sync-rest: build
	RINGLOG_TEST_IO=sync RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -skip '^($(SYNC_TESTS)|$(FAULT_TESTS)|$(ADMIN_TESTS)|$(HARNESS_TESTS)|$(GROUP848_TESTS)|$(TIERED_TESTS)|$(NETFAULT_TESTS))' ./cmd/...

test-loadgen: build
	RINGLOG_TEST_BROKER_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 10m $(LOADGEN_PKGS)

test-admin: build
	RINGLOG_TEST_IO=uring RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -run '^($(ADMIN_TESTS))' ./cmd/...

test-harness: build
	RINGLOG_TEST_IO=uring RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -run '^($(HARNESS_TESTS))' ./cmd/...

test-groups: build
	RINGLOG_TEST_IO=uring RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m -run '^($(GROUP848_TESTS))' ./cmd/...

test-tiered: build
	$(GO) test -race -count=1 -timeout 10m $(TIERED_PKGS)
	RINGLOG_TEST_IO=uring RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 20m -run '^($(TIERED_TESTS))' ./cmd/...

test-faults: build
	@echo "== fault tests with --io uring"
	RINGLOG_TEST_IO=uring RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 10m -run '^($(FAULT_TESTS))' ./cmd/...
	@echo "== fault tests with --io sync"
	RINGLOG_TEST_IO=sync RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 10m -run '^($(FAULT_TESTS))' ./cmd/...

test-netfaults: build
	@for io in uring sync; do echo "== network faults with --io $$io"; \
	  RINGLOG_TEST_IO=$$io RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 10m -run '^($(NETFAULT_TESTS))$$' -v ./cmd/ringlog/ > bin/netfaults-$$io.log 2>&1; rc=$$?; \
	  grep -E '^(netfaults:|--- |ok|FAIL)' bin/netfaults-$$io.log; [ $$rc -eq 0 ] || { tail -80 bin/netfaults-$$io.log; exit $$rc; }; done

chaos-net: build
	@for i in $$(seq 1 $(NETFAULT_RUNS)); do seed="$(NETFAULT_SEED)"; [ "$$seed" != random ] || seed=$$RANDOM$$RANDOM; \
	  echo "== run $$i of $(NETFAULT_RUNS), --io $(NETFAULT_IO)$${seed:+, seed $$seed}"; \
	  RINGLOG_NETFAULTS_SEED=$$seed RINGLOG_NETFAULTS_STEPS=$(NETFAULT_STEPS) RINGLOG_TEST_IO=$(NETFAULT_IO) RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 120m -run '^($(NETFAULT_TESTS))$$' -v ./cmd/ringlog/ > bin/chaos-net-$$i.log 2>&1; rc=$$?; \
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
	@RINGLOG_CHAOS_ROUNDS=$(CHAOS_ROUNDS) RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 30m -run 'TestFailoverUnderLoad' -v ./cmd/ringlog/ > bin/chaos.log 2>&1; rc=$$?; \
	  grep -E '^(chaos:|--- |ok|FAIL|\s+failover_test)' bin/chaos.log; echo "full output: bin/chaos.log"; exit $$rc

# The leader-kill scenario (3 brokers, idempotent acks=all producer at 2,000
# msg/s on 6 partitions, kill -9 and restart of two partition leaders)
# FAULT_RUNS times on one cluster: every produce answered within its
# timeout, the producer finishes, purgatories empty, checker clean. One
# run is part of `make test`.
faults: build
	@RINGLOG_FAILOVER_ACK_RUNS=$(FAULT_RUNS) RINGLOG_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 60m -run '^TestFailoverAcksAnswered$$' -v ./cmd/ringlog/ > bin/faults.log 2>&1; rc=$$?; \
	  grep -E '^(failover-acks:|--- |ok|FAIL|\s+failover_acks_test)' bin/faults.log; echo "full output: bin/faults.log"; exit $$rc

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

clean:
	rm -rf bin
