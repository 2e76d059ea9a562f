# The Sluice container image: a static binary on an empty base.
#
#   docker build -t sluice --build-arg VERSION=$(git describe --tags --always) .
#   docker run --rm -p 8080:8080 -p 8081:8081 -p 8082:8082 sluice
#
# The final stage is the same as deploy/image/Containerfile, which `make image`
# builds with buildah from a locally built binary (no registry needed).
#
# Ports: 8080 HTTP API (/v1/check, /v1/policies, /healthz, /readyz, /metrics),
# 8081 gRPC (Envoy's rate limit API and grpc.health.v1.Health), 8082 health
# (/healthz, /readyz, /metrics alone, which a flood of the others cannot starve).
#
# Health: the image has no shell and no curl, so there is no HEALTHCHECK
# instruction. Probe over the network instead: HTTP GET /healthz (liveness) and
# /readyz (readiness) on port 8082, as deploy/kubernetes does, or gRPC health on
# 8081. Outside Kubernetes, `sluice check --server http://HOST:8080 --policy P
# --key probe --cost 0` asks a running service without consuming anything.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/sluice ./cmd/sluice

FROM scratch
# CA certificates, for rediss:// stores.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY examples/sluice.yaml /etc/sluice/sluice.yaml
ENV PATH=/usr/local/bin
# 65532: the conventional "nonroot" user of distroless images; no passwd
# entry is needed.
USER 65532:65532
EXPOSE 8080 8081 8082
ENTRYPOINT ["sluice"]
CMD ["serve", "--config", "/etc/sluice/sluice.yaml"]
