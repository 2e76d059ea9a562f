# Sluice — common tasks. `make test` is what CI runs.
GO      ?= go
PKGS    ?= ./...
BENCH   ?= .
BENCHTIME ?= 1s
COUNT   ?= 5
FUZZTIME ?= 20s
# staticcheck, pinned: `go run` fetches and builds it through the module proxy,
# so a clean machine needs nothing installed beyond Go.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# VERSION is what `sluice version` prints for `make build`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
BIN     ?= bin/sluice

.PHONY: test vet lint unit bench redis fmt fuzz build

## test: vet, gofmt and staticcheck, then every test with the race detector
## (installs redis-server if needed)
test: redis vet lint unit

vet:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

## lint: staticcheck (pinned by STATICCHECK) over every package and its tests
lint:
	$(GO) run $(STATICCHECK) $(PKGS)

unit:
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

## build: build ./cmd/sluice into $(BIN), `sluice version` stamped with
## VERSION (default: git describe --tags --always --dirty)
build:
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/sluice

## redis: make sure redis-server and redis-cli are installed (apt-get as root)
redis:
	@scripts/ensure-redis.sh

## bench: Go benchmarks with -benchmem (COUNT runs each; compare with benchstat)
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -count $(COUNT) $(PKGS)

## fuzz: run every fuzz target (func FuzzXxx in a _test.go file) for FUZZTIME
## each, carrying on past failures; `make test` already runs their seed
## corpora (testdata/fuzz/FuzzXxx). A failing input is written to
## testdata/fuzz/FuzzXxx: keep it once the bug is fixed.
fuzz:
	@failed=; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	  for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "== $$name ($$(dirname $$file))"; \
	    $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$(dirname $$file) || failed="$$failed $$name"; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')
