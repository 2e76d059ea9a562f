package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteJSON writes the report as one JSON object:
// {"scenario": …, "rows": [{"variant", "nodes", "sent", "admitted",
// "max_in_span", "bound", "overshoot"}, …]}; accuracy rows add
// "wrongly_allowed_pct", "wrongly_denied_pct" and the decision_ variants;
// fairness rows "min_share_ratio", "utilization", "heaviest_share" and
// "tenants"; usage rows "used", "charged", "in_flight_bound" (budget) or
// "leaked_slots" (slots).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people: a heading, an aligned table, the
// span the numbers were measured over and one sentence saying what they show.
func (r *Report) WriteTable(w io.Writer) error {
	accuracy := len(r.Rows) > 0 && r.Rows[0].WronglyAllowedPct != nil
	hybrid := len(r.Rows) > 0 && r.Rows[0].StoreCallsPerDecision != nil
	fairness := len(r.Rows) > 0 && r.Rows[0].MinShareRatio != nil
	usage := len(r.Rows) > 0 && r.Rows[0].InFlightBound != nil
	if _, err := fmt.Fprintf(w, "%s (store %s)\n\n", r.Scenario, r.Store); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := fmt.Sprintf("%-*s", longestVariant(r), "variant") + "\tnodes\tsent\tadmitted\tmax_in_span\tbound\tovershoot\t"
	if accuracy {
		head += "wrongly_allowed\twrongly_denied\tdecision_wrongly_allowed\tdecision_wrongly_denied\t"
	}
	if hybrid {
		head += "proven_bound\tstore_calls_per_decision\tutilization\t"
	}
	if fairness {
		head += "min_share_ratio\tutilization\theaviest_share\t"
	}
	if usage {
		head += "used\tcharged\tin_flight_bound\tleaked_slots\t"
	}
	fmt.Fprintln(tw, head)
	for _, row := range r.Rows {
		// Variant names are left-aligned by padding them to the longest.
		line := fmt.Sprintf("%-*s\t%d\t%d\t%d\t%d\t%d\t%.3f\t", longestVariant(r), row.Variant,
			row.Nodes, row.Sent, row.Admitted, row.MaxInSpan, row.Bound, row.Overshoot)
		if accuracy {
			line += fmt.Sprintf("%.4f%%\t%.4f%%\t%.4f%%\t%.4f%%\t", *row.WronglyAllowedPct, *row.WronglyDeniedPct,
				*row.DecisionWronglyAllowedPct, *row.DecisionWronglyDeniedPct)
		}
		if hybrid {
			bound := "-"
			if row.ProvenBound != nil {
				bound = fmt.Sprintf("%.3f", *row.ProvenBound)
			}
			line += fmt.Sprintf("%s\t%.4f\t%.3f\t", bound, *row.StoreCallsPerDecision, *row.Utilization)
		}
		if fairness {
			line += fmt.Sprintf("%.3f\t%.3f\t%.3f\t", *row.MinShareRatio, *row.Utilization, *row.HeaviestShare)
		}
		if usage {
			line += orDash(row.Used) + "\t" + orDash(row.Charged) + "\t" + orDash(row.InFlightBound) + "\t" + orDash(row.LeakedSlots) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nmax_in_span: the most admitted in %s.\n%s\n", r.Span, r.Summary)
	return err
}

// orDash prints a count a row may not have.
func orDash(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func longestVariant(r *Report) int {
	n := len("variant")
	for _, row := range r.Rows {
		n = max(n, len(row.Variant))
	}
	return n
}
