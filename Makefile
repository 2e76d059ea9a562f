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

.PHONY: test vet lint unit bench redis gateways fmt fuzz build

## test: vet, gofmt and staticcheck, every test with the race detector
## (installs redis-server if needed), then the deployment checks
test: redis gateways vet lint unit deploy-check

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

## gateways: make sure caddy and nginx are installed, for the forward-auth tests
gateways:
	@scripts/ensure-gateways.sh

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

## image: the container image (deploy/image/Containerfile) from a locally
## built static binary, with buildah and no registry; IMAGE names it
IMAGE   ?= localhost/sluice:dev
IMAGE_CONTEXT = deploy/image/build
.PHONY: image image-test
image:
	@scripts/ensure-buildah.sh
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w -X main.version=$(VERSION)' -o $(IMAGE_CONTEXT)/sluice ./cmd/sluice
	cp /etc/ssl/certs/ca-certificates.crt examples/sluice.yaml $(IMAGE_CONTEXT)/
	buildah --storage-driver vfs bud --quiet --isolation chroot -f deploy/image/Containerfile -t $(IMAGE) $(IMAGE_CONTEXT)

## image-test: run the image: sluice version, validate its configuration
image-test: image
	scripts/image-test.sh $(IMAGE)

## deploy-test: the operating kit's tests (deploy/, a module of its own):
## Kubernetes manifests, Helm chart, dashboard and alerts, against real helm,
## promtool, redis-server and sluice serve; then the image (buildah)
HELM_VERSION ?= v3.22.0
HELM ?= $(CURDIR)/bin/helm
.PHONY: deploy-test deploy-tools deploy-helm deploy-unit deploy-check
deploy-tools: redis deploy-helm
	@scripts/ensure-promtool.sh
deploy-helm:
	@test -x $(HELM) || GOBIN=$(CURDIR)/bin $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
deploy-test: deploy-tools
	@scripts/ensure-buildah.sh
	$(MAKE) deploy-unit image-test
deploy-unit:
	cd deploy && $(GO) vet ./... && HELM=$(HELM) $(GO) test -race -count=1 -timeout 20m ./...

## deploy-check (part of test): deploy-test under CI=true; elsewhere the
## deploy tests with what is installed (helm is always built; without
## promtool its tests skip) and the image only if buildah is installed
deploy-check:
	@if [ "$$CI" = true ]; then $(MAKE) deploy-test; exit; fi; \
	  $(MAKE) deploy-helm deploy-unit && \
	  if command -v buildah >/dev/null 2>&1; then $(MAKE) image-test; \
	  else echo "deploy-check: buildah is not installed, image-test skipped (make deploy-test installs it)"; fi

## dashboard-png: redraw docs/deploy-dashboard.png from a real run (a minute
## of sluice bench on Redis, scraped by a real Prometheus; installs Debian's
## prometheus package if missing; needs no helm)
.PHONY: dashboard-png
dashboard-png: redis
	@scripts/ensure-promtool.sh
	cd deploy && $(GO) test -count=1 -run TestRenderDashboard -timeout 10m . -render $(CURDIR)/docs/deploy-dashboard.png
