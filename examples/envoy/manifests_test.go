package envoy

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// sluiceServices returns the gRPC port of each Service of the shipped
// Kubernetes manifests (deploy/kubernetes/service.yaml), by name: where the
// Istio and Envoy Gateway snippets must send their rate limit calls.
func sluiceServices(t *testing.T) map[string]uint32 {
	t.Helper()
	const file = "deploy/kubernetes/service.yaml"
	out := map[string]uint32{}
	for _, doc := range yamlDocs(t, file, readFile(t, file)) {
		ports, _ := field(doc, "spec", "ports").([]any)
		for _, p := range ports {
			if field(p, "name") == "grpc" {
				n, _ := field(p, "port").(int)
				out[field(doc, "metadata", "name").(string)] = uint32(n)
			}
		}
	}
	if out["sluice"] == 0 || out["sluice-headless"] == 0 {
		t.Fatalf("%s: want the Services sluice and sluice-headless with a grpc port, got %v", file, out)
	}
	return out
}

// sluiceGRPCPort is Sluice's gRPC port: the manifests' Services', the port
// sluice serve listens on by default (--grpc-addr :8081), which the
// Deployment keeps.
func sluiceGRPCPort(t *testing.T) uint32 {
	t.Helper()
	ports := sluiceServices(t)
	if ports["sluice"] != ports["sluice-headless"] {
		t.Fatalf("the Services' gRPC ports differ: %v", ports)
	}
	return ports["sluice"]
}

// docBlocks returns the fenced code blocks of a Markdown file by the "## "
// section they are in, each with its info string (the language).
func docBlocks(t *testing.T, path string) map[string][]codeBlock {
	t.Helper()
	out := map[string][]codeBlock{}
	section := ""
	var open *codeBlock
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case open != nil && strings.HasPrefix(line, "```"):
			out[section] = append(out[section], *open)
			open = nil
		case open != nil:
			open.text += line + "\n"
		case strings.HasPrefix(line, "```"):
			open = &codeBlock{lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	if open != nil {
		t.Fatalf("%s: a code block is not closed", path)
	}
	return out
}

// codeBlock is a fenced code block of a Markdown file.
type codeBlock struct{ lang, text string }

// yamlBlocks returns the YAML documents of the yaml blocks in a section of
// docs/gateways.md.
func yamlBlocks(t *testing.T, section string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, b := range docBlocks(t, gatewaysDoc)[section] {
		if b.lang == "yaml" {
			docs = append(docs, yamlDocs(t, gatewaysDoc+", "+section, []byte(b.text))...)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("%s has no yaml block under ## %s", gatewaysDoc, section)
	}
	return docs
}

// gatewaysDoc documents the Istio and Envoy Gateway snippets.
const gatewaysDoc = "docs/gateways.md"
