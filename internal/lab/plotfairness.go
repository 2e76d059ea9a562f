package lab

import (
	"fmt"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// fairnessFigure draws, per tenant, what each variant admitted per period
// and, dashed across, the tenant's max-min fair share; and beside it each
// variant's most admitted in one window over L.
func (r *Report) fairnessFigure() (*figure, error) {
	f := &figure{title: fmt.Sprintf("fairness: %d tenants sharing one limit, tenant-0 offering 100× its share\n%d nodes, L = %d per period, %s",
		len(r.Rows[0].Tenants), r.Rows[0].Nodes, r.Rows[0].Bound, r.storeName())}
	p := f.newPanel("admitted per period against each tenant's max-min fair share", "tenant", "units per period", barsWidth(2*len(r.Rows[0].Tenants)))
	names := make([]string, len(r.Rows[0].Tenants))
	width := 0.8 / float64(len(r.Rows))
	for i, ts := range r.Rows[0].Tenants {
		names[i] = ts.Tenant
		var bs []barSpec
		for _, row := range r.Rows {
			if len(row.Tenants) != len(names) {
				return nil, fmt.Errorf("fairness: row %s has %d tenants, want %d", row.Variant, len(row.Tenants), len(names))
			}
			a := row.Tenants[i].Admitted
			bs = append(bs, barSpec{series: seriesOf(r.Scenario, row), legend: row.Variant, value: a, text: fmt.Sprintf("%.1f", a)})
		}
		if _, err := f.addBars(p, float64(i), width, bs); err != nil {
			return nil, err
		}
		l, err := plotter.NewLine(plotter.XYs{{X: float64(i) - 0.45, Y: ts.FairShare}, {X: float64(i) + 0.45, Y: ts.FairShare}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = palette[seriesFairShare], vg.Points(2), []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		f.addLegend(seriesFairShare, string(seriesFairShare), l.Color, l)
	}
	categories(p, names...)
	if err := f.overshootBars(f.newPanel("most admitted in one window ÷ L", "design", "admitted ÷ L", barsWidth(len(r.Rows))), r); err != nil {
		return nil, err
	}
	return f, nil
}
