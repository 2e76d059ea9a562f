package main

import (
	"flag"

	"github.com/sluicehq/sluice/internal/config"
)

// storeFlags is what a command's flags and environment say of the store,
// beside the configuration's store section: --store, --store-per-second,
// --store-key-prefix, and the TLS files of envoyproxy/ratelimit's
// REDIS_TLS_*. serve and validate read them alike (addStoreFlags, then
// ratelimit's variables as the flags' defaults) and derive the store from
// them alike (section), so that validate checks the store serve would open.
type storeFlags struct {
	url       string        // --store
	perSecond string        // --store-per-second
	keyPrefix string        // --store-key-prefix
	env       *ratelimitEnv // ratelimit's variables; nil for proxy, which does not read them
}

// addStoreFlags defines --store-per-second and --store-key-prefix on fs
// (--store is each command's own, with its own help).
func addStoreFlags(fs *flag.FlagSet, perSecond, keyPrefix *string) {
	fs.StringVar(perSecond, "store-per-second", "", "`URL` of a second Redis for the limits of periods under a minute, as envoyproxy/ratelimit's REDIS_PERSECOND (overrides store.per_second_url)")
	fs.StringVar(keyPrefix, "store-key-prefix", "", "`prefix` of every Redis key and channel, before Sluice's own \"sluice:\", so that several deployments share a Redis (overrides store.key_prefix)")
}

// section is the store section in force for cfg: its own with the flags
// applied — --store's URL, else the file's, else memory://; the per-second
// Redis; the key prefix; and REDIS_TLS_*'s files when the URL is the one
// ratelimit's variables built. The one derivation of the store: serve opens
// it, and serve, validate and proxy check it (storestack.Check).
func (f storeFlags) section(cfg *config.Config) config.Store {
	st := cfg.Store
	if f.url != "" {
		st.URL = f.url
	}
	if st.URL == "" {
		st.URL = "memory://"
	}
	if f.perSecond != "" {
		st.PerSecondURL = f.perSecond
	}
	if tc := f.env.usedStoreTLS(st.URL); tc != nil {
		st.TLS = tc
	}
	if f.keyPrefix != "" {
		st.KeyPrefix = f.keyPrefix
	}
	return st
}

// problem is what makes the flags unusable whatever the configuration, as a
// usage error; "" when nothing does.
func (f storeFlags) problem() string {
	if msg := config.CheckKeyPrefix(f.keyPrefix); msg != "" {
		return "--store-key-prefix " + msg
	}
	return ""
}
