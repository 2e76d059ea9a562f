package service

import "testing"

// metric returns the value of the series of the metric name with the labels
// given as name, value pairs in s's registry; 0 when it has none.
func metric(t *testing.T, s *Service, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue series
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// series counts the series of the metric name in s's registry.
func series(t *testing.T, s *Service, name string) int {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
