// Package deploy holds the tests of Sluice's operating kit: the Kubernetes
// manifests, the Helm chart, the Grafana dashboard and the Prometheus alerts.
// It is a module of its own so that the Kubernetes API types it decodes with
// stay out of the main module.
package deploy
