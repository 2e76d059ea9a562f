package service

import "github.com/sluicehq/sluice/internal/config"

// ApplyDynamic puts in force cfg, the configuration from a dynamic source
// (package xdsconfig's client), merged over the files' configuration with
// config.Overlay: a domain both define is cfg's. File reloads keep it merged
// in; the next ApplyDynamic replaces it whole. When the two clash (a policy
// name both use), the configuration in force stays and the error says why,
// for the source to reject the update. Counters in the store are untouched,
// as on Reload.
func (s *Service) ApplyDynamic(cfg *config.Config) error {
	s.configMu.Lock()
	defer s.configMu.Unlock()
	merged, err := config.Overlay(s.files, cfg)
	if err != nil {
		return err
	}
	s.dynamic = cfg
	s.install(merged)
	s.log.Debug("dynamic configuration applied", "sources", len(cfg.Files), "policies", len(merged.Policies),
		"domains", len(merged.Domains))
	return nil
}
