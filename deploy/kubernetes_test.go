package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// manifestsDir holds the plain manifests, applied with kubectl apply -k.
const manifestsDir = "kubernetes"

// manifestObjects decodes strictly every resource kustomization.yaml names —
// what kubectl apply -k would create — and returns them with those names.
func manifestObjects(t *testing.T) (objects, []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifestsDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kust struct {
		APIVersion string              `json:"apiVersion"`
		Kind       string              `json:"kind"`
		Labels     []map[string]any    `json:"labels"`
		Resources  []string            `json:"resources"`
		Images     []map[string]string `json:"images"`
	}
	if err := yaml.UnmarshalStrict(raw, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	var o objects
	for _, r := range kust.Resources {
		data, err := os.ReadFile(filepath.Join(manifestsDir, r))
		if err != nil {
			t.Errorf("kustomization.yaml: resource %s: %v", r, err)
			continue
		}
		if err := decodeObjects(data, &o); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	return o, kust.Resources
}

// TestManifests decodes every manifest of deploy/kubernetes strictly and checks
// them as a whole: what kubectl apply -k would create.
func TestManifests(t *testing.T) {
	o, resources := manifestObjects(t)
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(resources, name) {
			t.Errorf("%s is not in kustomization.yaml's resources", name)
		}
	}
	if len(o.pdbs) != 1 || len(o.hpas) != 1 || len(o.configMaps) != 1 {
		t.Errorf("want one PodDisruptionBudget, HorizontalPodAutoscaler and ConfigMap, got %d, %d, %d", len(o.pdbs), len(o.hpas), len(o.configMaps))
	}
	if d, _ := o.sluiceDeployment(t); d.Spec.Replicas != nil {
		t.Error("the Deployment sets replicas, which every kubectl apply would reset under the autoscaler")
	}
	configs := checkSluiceObjects(t, &o)
	validateConfig(t, "configmap.yaml", configs)
	probesAnswer(t, &o, configs)
	config := configs[0].text
	// The fail policy divides by exactly the autoscaler's maximum: more
	// would throw limit away for nothing, fewer would let the pods together
	// admit more than the limit.
	if cfg, pods := checkFailPolicy(t, &o, configs); cfg.Store.OnError != "local" || cfg.Store.Nodes != pods {
		t.Errorf("configmap.yaml: store.on_error %q, store.nodes %d; want local, divided by hpa.yaml's maxReplicas %d", cfg.Store.OnError, cfg.Store.Nodes, pods)
	}

	// The store URL names the Redis Service of redis.yaml.
	var redisService bool
	for _, s := range o.services {
		if s.Name == "sluice-redis" && len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port == 6379 {
			redisService = true
		}
	}
	if !redisService || !strings.Contains(config, "url: redis://sluice-redis:6379") {
		t.Errorf("the configuration's store is not the Redis of redis.yaml (service found: %v)", redisService)
	}
}

// helm runs the helm command: $HELM, else helm on PATH.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmRun(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// helmRun runs helm and returns its output and error.
func helmRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("helm"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("helm is not installed: run make deploy-test, which builds it")
			}
			t.Skip("helm is not installed: run make deploy-test, which builds it")
		}
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// TestChartRejectsBadValues: the values schema refuses what would render a
// configuration sluice rejects, or a pod that cannot work.
func TestChartRejectsBadValues(t *testing.T) {
	for _, set := range []string{"store.onError=maybe", "store.url=http://redis:6379", "readinessPath=/", "logFormat=xml", "service.httpPort=0"} {
		out, err := helmRun(t, "template", "rel", chart, "--set", set)
		if err == nil || !strings.Contains(out, "schema") {
			t.Errorf("helm template --set %s: want a schema error, got %v\n%s", set, err, out)
		}
	}
}

const chart = "helm/sluice"

func TestChartLint(t *testing.T) {
	out := helm(t, "lint", "--strict", chart)
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Fatalf("helm lint:\n%s", out)
	}
}

// TestChartRenders renders the chart with its defaults and with every option
// turned the other way, decodes each object strictly and checks it.
func TestChartRenders(t *testing.T) {
	cases := []struct {
		name string
		set  []string
		// what the rendering must contain
		hpa, pdb, serviceMonitor, secret bool
		passwordFile                     bool
		replicas                         int32
		onError                          string // the fail policy rendered
		nodes                            int    // store.nodes rendered
	}{
		{name: "defaults", hpa: true, pdb: true, onError: "local", nodes: 10},
		{
			name: "no autoscaling, password, ServiceMonitor, closed",
			set: []string{"autoscaling.enabled=false", "replicaCount=3", "podDisruptionBudget.enabled=false",
				"store.password=s3cret", "store.onError=closed", "serviceMonitor.enabled=true",
				"service.httpPort=9080", "service.grpcPort=9081", "preStopSleepSeconds=15", "shutdownTimeout=20s", "terminationGracePeriodSeconds=45",
				"store.url=rediss://redis.example:6380"},
			serviceMonitor: true, secret: true, passwordFile: true, replicas: 3, onError: "closed", nodes: 3,
		},
		{
			name: "existing secret, Envoy domains",
			set:  []string{"store.existingSecret=redis-auth", "store.existingSecretKey=password", "service.headless=false", "readinessPath=/healthz"},
			hpa:  true, pdb: true, passwordFile: true, onError: "local", nodes: 10,
		},
		{
			name: "autoscaler up to 25, strict readiness",
			set:  []string{"autoscaling.maxReplicas=25", "readinessPath=/readyz/store"},
			hpa:  true, pdb: true, onError: "local", nodes: 25,
		},
		{
			name: "no autoscaling, local",
			set:  []string{"autoscaling.enabled=false", "replicaCount=4"},
			pdb:  true, replicas: 4, onError: "local", nodes: 4,
		},
		{
			name: "nodes set: pods of another release share the Redis",
			set:  []string{"store.nodes=16"},
			hpa:  true, pdb: true, onError: "local", nodes: 16,
		},
	}
	domains := filepath.Join(t.TempDir(), "domains.yaml")
	if err := os.WriteFile(domains, []byte(`extraConfigs:
  envoy-edge.yaml:
    domain: edge
    descriptors:
      - key: remote_address
        rate_limit: {unit: second, requests_per_unit: 10}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "rel", chart}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			if strings.Contains(tc.name, "domains") {
				args = append(args, "-f", domains)
			}
			var o objects
			if err := decodeObjects([]byte(helm(t, args...)), &o); err != nil {
				t.Fatal(err)
			}
			files := checkSluiceObjects(t, &o)
			validateConfig(t, tc.name, files)
			probesAnswer(t, &o, files)
			config := files[0].text
			if cfg, _ := checkFailPolicy(t, &o, files); cfg.Store.OnError != tc.onError || cfg.Store.Nodes != tc.nodes {
				t.Errorf("store.on_error %q, store.nodes %d; want %s, %d", cfg.Store.OnError, cfg.Store.Nodes, tc.onError, tc.nodes)
			}
			if got := len(o.hpas) == 1; got != tc.hpa {
				t.Errorf("HorizontalPodAutoscaler rendered: %v, want %v", got, tc.hpa)
			}
			if got := len(o.pdbs) == 1; got != tc.pdb {
				t.Errorf("PodDisruptionBudget rendered: %v, want %v", got, tc.pdb)
			}
			if got := len(o.serviceMonitors) == 1; got != tc.serviceMonitor {
				t.Errorf("ServiceMonitor rendered: %v, want %v", got, tc.serviceMonitor)
			}
			if got := len(o.secrets) == 1; got != tc.secret {
				t.Errorf("Secret rendered: %v, want %v", got, tc.secret)
			}
			if got := strings.Contains(config, "password_file: /etc/sluice-secret/redis-password"); got != tc.passwordFile {
				t.Errorf("password_file in the configuration: %v, want %v", got, tc.passwordFile)
			}
			d, _ := o.sluiceDeployment(t)
			if tc.hpa != (d.Spec.Replicas == nil) {
				t.Errorf("Deployment replicas %v: set exactly when there is no autoscaler", d.Spec.Replicas)
			}
			if tc.replicas != 0 && (d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas) {
				t.Errorf("Deployment replicas %v, want %d", d.Spec.Replicas, tc.replicas)
			}
			if tc.passwordFile {
				checkPasswordMount(t, &o)
			}
			wantReady := "/readyz"
			for _, s := range tc.set {
				if v, ok := strings.CutPrefix(s, "readinessPath="); ok {
					wantReady = v
				}
			}
			if _, c := o.sluiceDeployment(t); c.ReadinessProbe.HTTPGet.Path != wantReady {
				t.Errorf("readiness probe %s, want %s", c.ReadinessProbe.HTTPGet.Path, wantReady)
			}
			if got := len(o.services) == 2; got != !slices.Contains(tc.set, "service.headless=false") {
				t.Errorf("%d Services: want the headless one unless service.headless=false", len(o.services))
			}
			for _, s := range tc.set {
				if v, ok := strings.CutPrefix(s, "store.onError="); ok && !strings.Contains(config, `on_error: "`+v+`"`) {
					t.Errorf("store.onError=%s did not reach the configuration:\n%s", v, config)
				}
			}
			if strings.Contains(tc.name, "domains") && (len(files) != 2 || files[1].name != "envoy-edge.yaml" || !strings.Contains(files[1].text, "domain: edge")) {
				t.Errorf("extraConfigs did not reach serve: %v", files)
			}
		})
	}
}

// checkPasswordMount checks that the Redis password file is a Secret mounted
// where the configuration's password_file says, and never in the environment.
func checkPasswordMount(t *testing.T, o *objects) {
	t.Helper()
	d, c := o.sluiceDeployment(t)
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("the password is in the environment (%s)", e.Name)
		}
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/etc/sluice-secret" {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && len(v.Secret.Items) == 1 && v.Secret.Items[0].Path == "redis-password" {
				for _, s := range o.secrets {
					if s.Name == v.Secret.SecretName && len(s.Data[v.Secret.Items[0].Key]) == 0 {
						t.Errorf("Secret %s has no %s", s.Name, v.Secret.Items[0].Key)
					}
				}
				return
			}
		}
	}
	t.Error("no Secret is mounted at /etc/sluice-secret/redis-password")
}
