package redistest

import (
	"fmt"
	"strconv"
	"strings"
)

// CPU returns the CPU time the server has used, in seconds: INFO cpu's
// used_cpu_user + used_cpu_sys. Benchmarks divide its change over a run by
// the operations made, for the server's own cost per operation (steadier than
// throughput on a shared machine).
func (s *Server) CPU() (float64, error) {
	out, err := s.Do("INFO", "cpu")
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(out, "\n") {
		for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), f); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("redistest: INFO cpu: %s: %w", line, err)
				}
				sum += x
			}
		}
	}
	return sum, nil
}
