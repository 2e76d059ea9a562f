# Sluice — common tasks. `make test` is what CI runs.
GO      ?= go
PKGS    ?= ./...
BENCH   ?= .
BENCHTIME ?= 1s
COUNT   ?= 5

.PHONY: test vet unit bench redis fmt

## test: vet plus every test with the race detector (installs redis-server if needed)
test: redis vet unit

vet:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

unit:
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

## redis: make sure redis-server and redis-cli are installed (apt-get as root)
redis:
	@scripts/ensure-redis.sh

## bench: Go benchmarks with -benchmem (COUNT runs each; compare with benchstat)
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -count $(COUNT) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')
