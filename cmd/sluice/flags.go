package main

import (
	"github.com/sluicehq/sluice/internal/config"
)

// storeSection is the configuration's store section with the --store flag
// applied: the flag's URL, else the file's, else memory://.
func storeSection(cfg *config.Config, flagURL string) config.Store {
	st := cfg.Store
	if flagURL != "" {
		st.URL = flagURL
	}
	if st.URL == "" {
		st.URL = "memory://"
	}
	return st
}
