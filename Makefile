# happy — build, test and measure. `make help` lists the targets.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/happy-dev/happy/internal/buildinfo.Version=$(VERSION)
BIN       := bin/happy
TOOLS     := $(CURDIR)/bin/tools
STATICCHECK_VERSION := v0.8.2
GORELEASER_VERSION  := v2.17.0
CYCLONEDX_VERSION   := v1.10.0
# make release publishes nothing by default; RELEASE_FLAGS= (empty) lets
# goreleaser create the GitHub release as a draft (needs GITHUB_TOKEN).
RELEASE_FLAGS ?= --skip=publish
FUZZTIME  ?= 10s
BENCHTIME ?= 1s

.PHONY: help build install test faults e2e bench fuzz lint release release-snapshot release-check clean

help:
	@echo "build    static binary at $(BIN)"
	@echo "install  go install ./cmd/happy (into \$$GOBIN or \$$HOME/go/bin)"
	@echo "test     unit, golden, in-process server and fake-agent tests, with -race"
	@echo "faults   the fault suite: real processes killed with SIGKILL, full disks (root or CI)"
	@echo "e2e      end-to-end tests with the real agent CLIs (see .ci/run)"
	@echo "bench    benchmarks (happy --version cost, model, crypto, relay, server)"
	@echo "fuzz     a short run of every fuzz target (FUZZTIME=$(FUZZTIME) each)"
	@echo "lint     go vet, gofmt -l and staticcheck"
	@echo "release  on a tagged commit: archives, checksums, SBOMs and npm packages in dist/"
	@echo "release-snapshot  the same for any commit, without a tag (version X.Y.Z-snapshot.gCOMMIT)"

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/happy

install:
	CGO_ENABLED=0 $(GO) install -trimpath -ldflags '$(LDFLAGS)' ./cmd/happy

test:
	$(GO) test -race -count=1 -timeout 15m ./...

# The fault suite: the tests of cmd/happy built with the faults tag play a
# fault a user meets (the relay killed late in a turn while another home
# follows, the relay's or the home's disk full) against real processes.
# The full-disk cases mount a small tmpfs in a mount namespace of their own
# (root; skipped elsewhere, failing when CI is set). docs/ARCHITECTURE.md,
# "Tests", lists the faults that make test covers.
faults:
	$(GO) test -race -count=1 -timeout 20m -tags faults -run '^TestFault' ./cmd/happy/

# The e2e package runs in go test's local directory mode (no package
# argument), which prints the test output even when it passes: the
# real-agent matrix's table is at its end. E2E_PARALLEL matrix cells run at
# once; E2E_UPDATE=1 rewrites the golden files.
E2E_PARALLEL ?= 3
e2e:
	eval "$$(./scripts/install-agents.sh)" && cd e2e && $(GO) test -tags e2e -count=1 -timeout 40m -parallel $(E2E_PARALLEL) -run 'E2E' $(if $(E2E_UPDATE),-update)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 30m ./...

fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

lint: $(TOOLS)/staticcheck
	$(GO) vet ./...
	$(GO) vet -tags faults ./cmd/happy/
	$(GO) vet -tags e2e ./e2e/
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/staticcheck -tags faults ./cmd/happy/
	$(TOOLS)/staticcheck -tags e2e ./e2e/

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Release archives (.goreleaser.yaml), then the npm packages from them
# (scripts/npmpack). goreleaser and cyclonedx-gomod (the SBOMs) are pinned
# tools in bin/tools, outside go.mod.
release: release-check
	PATH="$(TOOLS):$$PATH" $(TOOLS)/goreleaser release --clean $(RELEASE_FLAGS)
	$(GO) run ./scripts/npmpack -dist dist

# A clone without a remote (goreleaser then takes no commit for the
# snapshot's version) gets the project's URL for this command only.
SNAPSHOT_GIT_ENV := $(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/happy-dev/happy.git)

release-snapshot: release-check
	$(SNAPSHOT_GIT_ENV) PATH="$(TOOLS):$$PATH" $(TOOLS)/goreleaser release --clean --snapshot
	$(GO) run ./scripts/npmpack -dist dist

release-check: $(TOOLS)/goreleaser $(TOOLS)/cyclonedx-gomod
	$(TOOLS)/goreleaser check

$(TOOLS)/goreleaser:
	GOBIN=$(TOOLS) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

$(TOOLS)/cyclonedx-gomod:
	GOBIN=$(TOOLS) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION)

clean:
	rm -rf bin dist
