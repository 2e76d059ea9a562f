package main

import (
	"flag"
	"fmt"

	"github.com/sluicehq/sluice/internal/config"
)

// configBounds are the flags that bound one configuration: the files of a
// load together, and each version from the xDS server (config.Limits).
type configBounds struct {
	descriptors, depth int
}

func (b *configBounds) addFlags(fs *flag.FlagSet) {
	fs.IntVar(&b.descriptors, "max-descriptors", config.DefaultMaxDescriptors,
		"the most envoyproxy/ratelimit descriptors one configuration may define: the files together, or one version from the xDS server; past it the configuration is refused and the one in force stays")
	fs.IntVar(&b.depth, "max-descriptor-depth", config.DefaultMaxDepth,
		fmt.Sprintf("how deep descriptors may nest, from 1 to %d", config.MaxDepthLimit))
}

// validate returns what is wrong with the flags, or "".
func (b *configBounds) validate() string {
	switch {
	case b.descriptors <= 0:
		return "--max-descriptors must be positive"
	case b.depth <= 0 || b.depth > config.MaxDepthLimit:
		return fmt.Sprintf("--max-descriptor-depth must be from 1 to %d", config.MaxDepthLimit)
	}
	return ""
}

func (b *configBounds) limits() config.Limits {
	return config.Limits{Descriptors: b.descriptors, Depth: b.depth}
}
