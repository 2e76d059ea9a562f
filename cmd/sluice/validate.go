package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/sluicehq/sluice/config"
)

func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", "sluice validate --config FILE [--config FILE...]",
		"Validate reads configuration files as serve would and reports every problem\nwith its file, line and field. The exit status is 0 when they are valid, 1 when not.", stderr)
	var files stringList
	fs.Var(&files, "config", "a configuration `file` (native or envoyproxy/ratelimit format); repeat for several")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "validate: give at least one --config file")
		return 2
	}
	cfg, err := config.Load(files...)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	fmt.Fprintf(stdout, "ok: %d policies, %d domains in %d files\n", len(cfg.Policies), len(cfg.Domains), len(cfg.Files))
	return 0
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
	fs := newFlagSet("version", "sluice version", "Version prints the build's version and Go version.", stderr)
	if code := parseFlags(fs, args); code >= 0 {
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
