package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
)

// Result label values of sluice_slot_releases_total.
const (
	ReleaseReleased = "released"
	ReleaseNotHeld  = "not_held"
)

func newReleases() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_slot_releases_total",
		Help: "Releases of in-flight slots (concurrency policies) per policy: released, or not_held (the token was wrong, already used, or its lease had ended: nothing changed).",
	}, []string{"policy", "result"})
}

// Released counts a release of one of p's slots: held says whether the
// token held one.
func (o *Observer) Released(p *config.Policy, held bool) {
	result := ReleaseNotHeld
	if held {
		result = ReleaseReleased
	}
	o.releases.WithLabelValues(p.Name, result).Inc()
}
