package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/storestack"
)

const validateDescription = `Validate reads configuration files as serve would and reports every problem
with its file, line and field: the files themselves, then the store section as
serve would open it (the password and TLS files it names are read; nothing is
connected to). A directory stands for every *.yaml and *.yml file in it.
As for serve, SLUICE_CONFIG, SLUICE_STORE, SLUICE_STORE_PER_SECOND and
SLUICE_STORE_KEY_PREFIX stand in for the flags, envoyproxy/ratelimit's
variables for the store (REDIS_*, REDIS_PERSECOND_*, CACHE_KEY_PREFIX) are read
as serve reads them, and without files RUNTIME_ROOT, RUNTIME_SUBDIRECTORY and
RUNTIME_APPDIRECTORY name the directory.
The exit status is 0 when they are valid, 1 when not, 2 for a usage error.`

func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice validate", "sluice validate [--store URL] FILE|DIR... (or --config FILE|DIR...)", validateDescription, stderr)
	var files cli.StringList
	fs.Var(&files, "config", "a configuration `file` or directory (native or envoyproxy/ratelimit format); repeat for several")
	var store storeFlags
	fs.StringVar(&store.url, "store", "", "the store `URL` serve would be given with --store; overrides the config's store.url")
	addStoreFlags(fs, &store.perSecond, &store.keyPrefix)
	// The store's flags take their defaults from ratelimit's variables, as
	// serve's do.
	store.env = readRatelimitEnv(os.LookupEnv)
	store.env.setDefaults(fs)
	var bounds configBounds
	bounds.addFlags(fs)
	positional, code := cli.ParseArgs(fs, args)
	if code >= 0 {
		return code
	}
	// Files named here win; else, as serve does, SLUICE_CONFIG, then the
	// RUNTIME_* directory. SLUICE_STORE and the others stand in for the
	// store's flags, so that a check in serve's environment checks what
	// serve would open.
	named := append(append([]string(nil), files...), positional...)
	if code := applyEnv(fs, os.LookupEnv); code >= 0 {
		return code
	}
	if code := store.env.check(fs, os.LookupEnv, stderr); code >= 0 {
		return code
	}
	if msg := store.problem(); msg != "" {
		return cli.UsageError(fs, msg)
	}
	paths := named
	if len(paths) == 0 {
		paths = configPaths(files, os.LookupEnv)
	}
	if len(paths) == 0 {
		return cli.UsageError(fs, "name at least one configuration file or directory")
	}
	if msg := bounds.validate(); msg != "" {
		return cli.UsageError(fs, msg)
	}
	cfg, err := loadConfig(paths, store, bounds.limits())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range append(cfg.Warnings(), storestack.Warnings(store.section(cfg))...) {
		fmt.Fprintln(stderr, "warning:", w)
	}
	fmt.Fprintf(stdout, "ok: %s, %s in %s\n", count(len(cfg.Policies), "policy", "policies"),
		count(len(cfg.Domains), "domain", "domains"), count(len(cfg.Files), "file", "files"))
	return 0
}

// loadConfig is the one validation serve (at start and at every reload) and
// validate share: the files within lim, then the store section as serve
// would open it with the store's flags, files read but nothing connected
// to.
func loadConfig(paths []string, store storeFlags, lim config.Limits) (*config.Config, error) {
	cfg, err := lim.Load(paths...)
	if err != nil {
		return nil, err
	}
	if err := storestack.Check(cfg, store.section(cfg)); err != nil {
		return nil, err
	}
	return cfg, nil
}

// version is set at build time with -ldflags "-X main.version=v1.2.3"; by
// default it is the module version or VCS revision Go recorded.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel-" + rev
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("sluice version", "sluice version", "Version prints the build's version and Go version.", stderr)
	if code := cli.ParseFlags(fs, args); code >= 0 {
		return code
	}
	info, _ := debug.ReadBuildInfo()
	goVersion := "unknown"
	if info != nil {
		goVersion = info.GoVersion
	}
	fmt.Fprintf(stdout, "sluice %s (%s)\n", buildVersion(), goVersion)
	return 0
}

// count says n things, in the singular for one.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
