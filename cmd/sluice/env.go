package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/internal/cli"
)

// envPrefix starts the environment variables that stand in for flags.
const envPrefix = "SLUICE_"

// envName is the environment variable for a flag: --http-addr is
// SLUICE_HTTP_ADDR.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// withEnvHelp adds to fs's help that its flags can come from the environment.
func withEnvHelp(fs *flag.FlagSet) {
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(fs.Output(), "\nEvery flag can also be set with an environment variable %s<FLAG> (--http-addr\n"+
			"is %s); a flag on the command line wins. %s takes a comma-separated list.\n",
			envPrefix, envName("http-addr"), envName("config"))
	}
}

// applyEnv sets every flag of fs that the command line left unset from its
// environment variable, when that is set (even to ""). A list flag takes a
// comma-separated list. It returns the exit status to stop with, or -1.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) int {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	code := -1
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || code >= 0 {
			return
		}
		name := envName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if list, isList := f.Value.(*cli.StringList); isList {
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					_ = list.Set(item)
				}
			}
			return
		}
		if err := f.Value.Set(v); err != nil {
			fmt.Fprintf(fs.Output(), "%s: %s=%q: %s\n", fs.Name(), name, v, cli.ValueReason(f, err.Error()))
			code = 2
		}
	})
	return code
}

// The variables envoyproxy/ratelimit reads its configuration directory from:
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, with its defaults.
const (
	runtimeRootDefault = "/srv/runtime_data/current"
	runtimeAppDefault  = "config"
)

// runtimeConfigDir is the configuration directory envoyproxy/ratelimit would
// read given its RUNTIME_* variables; "" when none of them is set, so that
// its container manifests work unchanged but nothing is guessed otherwise.
func runtimeConfigDir(lookup func(string) (string, bool)) string {
	root, hasRoot := lookup("RUNTIME_ROOT")
	sub, hasSub := lookup("RUNTIME_SUBDIRECTORY")
	app, hasApp := lookup("RUNTIME_APPDIRECTORY")
	if !hasRoot && !hasSub && !hasApp {
		return ""
	}
	if root == "" {
		root = runtimeRootDefault
	}
	if app == "" {
		app = runtimeAppDefault
	}
	return filepath.Join(root, sub, app)
}

// configPaths is what --config (or SLUICE_CONFIG) named, else the
// envoyproxy/ratelimit runtime directory; nil when neither is given.
func configPaths(flagged []string, lookup func(string) (string, bool)) []string {
	if len(flagged) > 0 {
		return flagged
	}
	if dir := runtimeConfigDir(lookup); dir != "" {
		return []string{dir}
	}
	return nil
}
