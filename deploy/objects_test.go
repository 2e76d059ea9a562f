package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// objects are the Kubernetes objects of a manifest set or a rendered chart,
// decoded into the API types.
type objects struct {
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors []*serviceMonitor
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor the
// kit uses; its CRD types are not worth a dependency.
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// readyzStoreTimeout is how long /readyz and /readyz/store may wait for the
// store (httpapi's readyTimeout).
const readyzStoreTimeout = 2 * time.Second

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strict rejects unknown and duplicate fields, as kubectl's server-side field
// validation does.
var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})

// decodeObjects decodes every document of a multi-document YAML stream.
func decodeObjects(data []byte, into *objects) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return err
		}
		if meta.Kind == "ServiceMonitor" {
			var sm serviceMonitor
			if err := yaml.UnmarshalStrict(doc, &sm); err != nil {
				return fmt.Errorf("ServiceMonitor: %w", err)
			}
			if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Metadata.Name == "" || len(sm.Spec.Selector.MatchLabels) == 0 || len(sm.Spec.Endpoints) == 0 {
				return fmt.Errorf("ServiceMonitor %q: apiVersion, name, selector and endpoints are required", sm.Metadata.Name)
			}
			into.serviceMonitors = append(into.serviceMonitors, &sm)
			continue
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("%s %s: %w", meta.APIVersion, meta.Kind, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			into.deployments = append(into.deployments, o)
		case *corev1.Service:
			into.services = append(into.services, o)
		case *corev1.ConfigMap:
			into.configMaps = append(into.configMaps, o)
		case *corev1.Secret:
			into.secrets = append(into.secrets, o)
		case *policyv1.PodDisruptionBudget:
			into.pdbs = append(into.pdbs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			into.hpas = append(into.hpas, o)
		default:
			return fmt.Errorf("unexpected object %T", obj)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for line := range strings.SplitSeq(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// sluiceDeployment returns the Deployment running sluice serve.
func (o *objects) sluiceDeployment(t *testing.T) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	for _, d := range o.deployments {
		for i, c := range d.Spec.Template.Spec.Containers {
			if len(c.Args) > 0 && c.Args[0] == "serve" {
				return d, &d.Spec.Template.Spec.Containers[i]
			}
		}
	}
	t.Fatal("no Deployment runs sluice serve")
	return nil, nil
}

// flagValues returns the values of every --name=value argument.
func flagValues(args []string, name string) []string {
	var vs []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// flagValue returns a --name=value argument's value.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// selects reports whether selector's labels all appear in labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkSluiceObjects checks what any deployment of Sluice must get right, and
// returns the configuration files the pods read, in serve's order.
func checkSluiceObjects(t *testing.T, o *objects) []configFile {
	t.Helper()
	d, c := o.sluiceDeployment(t)
	pod := d.Spec.Template.Spec
	podLabels := d.Spec.Template.Labels
	if !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment %s: selector %v does not select its pods %v", d.Name, d.Spec.Selector.MatchLabels, podLabels)
	}

	// Probes: liveness must not depend on Redis; readiness may (/readyz/store).
	// Both on the health port, which a flood of the others cannot starve.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] == 0 || ports["grpc"] == 0 || ports["health"] == 0 {
		t.Errorf("container ports %v: want http, grpc and health", ports)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		paths []string
	}{{c.LivenessProbe, []string{"/healthz"}}, {c.ReadinessProbe, []string{"/readyz", "/readyz/store", "/healthz"}}} {
		if p.probe == nil || p.probe.HTTPGet == nil || !slices.Contains(p.paths, p.probe.HTTPGet.Path) || p.probe.HTTPGet.Port.String() != "health" {
			t.Errorf("probe %+v: want an HTTP GET of %v on the health port", p.probe, p.paths)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && strings.HasPrefix(c.ReadinessProbe.HTTPGet.Path, "/readyz") &&
		time.Duration(c.ReadinessProbe.TimeoutSeconds)*time.Second <= readyzStoreTimeout {
		t.Errorf("readiness probe timeout %ds: /readyz may take %v probing the store", c.ReadinessProbe.TimeoutSeconds, readyzStoreTimeout)
	}
	for flag, port := range map[string]int32{"http-addr": ports["http"], "grpc-addr": ports["grpc"], "health-addr": ports["health"]} {
		v, ok := flagValue(c.Args, flag)
		if !ok {
			v = map[string]string{"http-addr": ":8080", "grpc-addr": ":8081", "health-addr": ":8082"}[flag] // serve's defaults
		}
		if v != fmt.Sprintf(":%d", port) {
			t.Errorf("--%s is %q but the container port is %d", flag, v, port)
		}
	}

	// Security: non-root, read-only root, nothing to escalate to.
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod: runAsNonRoot is not set")
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container: want readOnlyRootFilesystem and no privilege escalation, got %+v", sc)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("container resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}

	// Shutdown: the grace period covers the preStop sleep and the drain.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("container: no preStop sleep")
	}
	drain := 10 * time.Second
	if v, ok := flagValue(c.Args, "shutdown-timeout"); ok {
		var err error
		if drain, err = time.ParseDuration(v); err != nil {
			t.Fatalf("--shutdown-timeout=%s: %v", v, err)
		}
	}
	need := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + drain
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %v: want more than preStop + shutdown timeout = %v", pod.TerminationGracePeriodSeconds, need)
	}

	// Services reach the pods' ports.
	if len(o.services) == 0 {
		t.Error("no Service")
	}
	var httpService *corev1.Service
	for _, s := range o.services {
		if !selects(s.Spec.Selector, podLabels) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if ports[p.TargetPort.String()] == 0 {
				t.Errorf("Service %s: port %s targets %q, which the pod does not expose", s.Name, p.Name, p.TargetPort.String())
			}
			if p.Name == "http" {
				httpService = s
			}
		}
	}
	if httpService == nil {
		t.Error("no Service exposes the pods' http port")
	}
	for _, p := range o.pdbs {
		if !selects(p.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("PodDisruptionBudget %s selects no sluice pod", p.Name)
		}
	}
	for _, h := range o.hpas {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != d.Name {
			t.Errorf("HorizontalPodAutoscaler %s scales %+v, not Deployment %s", h.Name, h.Spec.ScaleTargetRef, d.Name)
		}
	}
	for _, sm := range o.serviceMonitors {
		if httpService == nil || !selects(sm.Spec.Selector.MatchLabels, httpService.Labels) || sm.Spec.Endpoints[0].Port != "http" {
			t.Errorf("ServiceMonitor %s does not select the http port of a sluice Service", sm.Metadata.Name)
		}
	}

	// The configuration comes from a ConfigMap mounted as a directory: a
	// subPath mount would never see an update.
	var files []configFile
	for _, path := range flagValues(c.Args, "config") {
		text, ok := configMapFile(t, o, d, c, path)
		if !ok {
			t.Fatalf("--config=%s is not in a mounted ConfigMap", path)
		}
		files = append(files, configFile{name: filepath.Base(path), text: text})
	}
	if len(files) == 0 {
		t.Fatal("serve has no --config")
	}
	return files
}

// configFile is one configuration file the pods read.
type configFile struct{ name, text string }

// configMapFile returns the text of the file at path as the container sees it
// in a ConfigMap volume.
func configMapFile(t *testing.T, o *objects, d *appsv1.Deployment, c *corev1.Container, path string) (string, bool) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if m.SubPath != "" {
			t.Errorf("volume mount %s uses subPath: ConfigMap updates would not arrive", m.Name)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			for _, cm := range o.configMaps {
				if cm.Name == v.ConfigMap.Name {
					text, ok := cm.Data[rel]
					return text, ok
				}
			}
		}
	}
	return "", false
}
