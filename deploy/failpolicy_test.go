package deploy

import (
	"testing"

	"github.com/sluicehq/sluice/internal/config"
)

// maxPods is the most pods of sluice serve the objects can run at once: the
// autoscaler's maxReplicas, else the Deployment's replicas (1 when unset).
func maxPods(t *testing.T, o *objects) int {
	t.Helper()
	d, _ := o.sluiceDeployment(t)
	for _, h := range o.hpas {
		if h.Spec.ScaleTargetRef.Name == d.Name {
			return int(h.Spec.MaxReplicas)
		}
	}
	if d.Spec.Replicas != nil {
		return int(*d.Spec.Replicas)
	}
	return 1
}

// checkFailPolicy checks that the configuration the pods read never fails
// open while Redis cannot decide and, failing local, divides every limit by
// at least the most pods that can run — else those pods together would admit
// up to pods × the limit. It returns the configuration (as sluice reads the
// first file) and that pod count.
func checkFailPolicy(t *testing.T, o *objects, files []configFile) (*config.Config, int) {
	t.Helper()
	cfg, err := config.Parse(files[0].name, []byte(files[0].text))
	if err != nil {
		t.Fatalf("%s: %v", files[0].name, err)
	}
	st, pods := cfg.Store, maxPods(t, o)
	switch st.OnError {
	case "", config.OnErrorLocal:
		if st.Nodes < pods {
			t.Errorf("store.on_error local with store.nodes %d, but up to %d pods run: together they would admit up to %d/%d × each limit", st.Nodes, pods, pods, max(1, st.Nodes))
		}
	case config.OnErrorClosed:
	default:
		t.Errorf("store.on_error %q: every request is admitted while Redis cannot decide", st.OnError)
	}
	return cfg, pods
}
