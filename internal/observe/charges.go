package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
)

// charges counts the units charged per policy (sluice_charged_units_total)
// and the charges that left a key owing (sluice_charges_owing_total),
// registered with the Observer's other metrics.
type charges struct {
	units, owing *prometheus.CounterVec
}

func newCharges(r *prometheus.Registry) charges {
	c := charges{
		units: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_charged_units_total",
			Help: "Units of usage charged per policy after the fact (POST /v1/charge), recorded even beyond the limit.",
		}, []string{"policy"}),
		owing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_charges_owing_total",
			Help: "Charges per policy that left their key owing units (more used than the limit had left).",
		}, []string{"policy"}),
	}
	r.MustRegister(c.units, c.owing)
	return c
}

// Charge counts one charge of units under its configured policy p; owing
// says it left the key in debt.
func (o *Observer) Charge(p *config.Policy, units int64, owing bool) {
	o.charges.units.WithLabelValues(p.Name).Add(float64(units))
	if owing {
		o.charges.owing.WithLabelValues(p.Name).Inc()
	}
}
