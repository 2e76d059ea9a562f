package lab

import (
	"fmt"
	"strings"
)

// usageFigure draws the usage scenario's two halves side by side: the
// budget, the most used in one window ÷ L with the documented worst case of
// check, then charge marked across each bar; and the slots, the slots the
// live nodes could use once the killed node's lease had passed ÷ L.
func (r *Report) usageFigure() (*figure, error) {
	if len(r.Rows) != 4 || r.Rows[0].InFlightBound == nil || r.Rows[2].LeakedSlots == nil {
		return nil, fmt.Errorf("usage: want two budget rows and two slot rows")
	}
	f := &figure{title: fmt.Sprintf("usage: costs known after the response, and a node killed while holding in-flight slots\n%d nodes, L = %d per period (budget) and L slots with a lease of one period, %s",
		r.Rows[0].Nodes, r.Rows[0].Bound, r.storeName())}
	budget := f.newPanel("units used in one window ÷ L (budget)", "design", "units used ÷ L", barsWidth(2))
	slots := f.newPanel("slots usable after the killed node's lease ÷ L", "design", "usable slots ÷ L", barsWidth(2))
	highest := 0.0
	var budgetNames, slotNames []string
	var marks []func()
	for i, row := range r.Rows[:2] {
		bound := float64(*row.InFlightBound) / float64(row.Bound)
		highest = max(highest, row.Overshoot, bound)
		budgetNames = append(budgetNames, strings.Replace(row.Variant, ": ", ":\n", 1))
		bars, err := f.addBars(budget, float64(i), 0.6, []barSpec{{series: seriesOf(r.Scenario, row), legend: usageLegend(row),
			value: row.Overshoot, textAt: bound,
			text: fmt.Sprintf("%.3f\n%d used, %d charged", row.Overshoot, *row.Used, *row.Charged)}})
		if err != nil {
			return nil, err
		}
		// The most a window may use by docs/semantics.md: L + N·(the largest
		// cost) − 1, over L.
		marks = append(marks, func() {
			f.boundMark(budget, bars[0], bound, seriesChargeBound, string(seriesChargeBound), palette[seriesChargeBound])
		})
	}
	for i, row := range r.Rows[2:] {
		usable := float64(row.Bound-*row.LeakedSlots) / float64(row.Bound)
		slotNames = append(slotNames, strings.Replace(row.Variant, ": ", ":\n", 1))
		if _, err := f.addBars(slots, float64(i), 0.6, []barSpec{{series: seriesOf(r.Scenario, row), legend: usageLegend(row),
			value: usable, text: fmt.Sprintf("%.2f\n%d of %d slots leaked", usable, *row.LeakedSlots, row.Bound)}}); err != nil {
			return nil, err
		}
	}
	categories(budget, budgetNames...)
	categories(slots, slotNames...)
	f.ratioAxis(budget, highest)
	f.ratioAxis(slots, 1)
	for _, mark := range marks {
		mark()
	}
	return f, nil
}

// usageLegend names a design once for both panels.
func usageLegend(row Row) string {
	if row.Naive {
		return "naive: charge what fits; a counter"
	}
	return "sluice: Limiter.Charge; slots with a lease"
}
