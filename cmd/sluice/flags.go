package main

import (
	"flag"
	"fmt"
	"github.com/sluicehq/sluice/config"
	"io"
	"strings"
)

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// newFlagSet returns a FlagSet whose -help prints the command's usage line,
// its description and its flags.
func newFlagSet(name, usageLine, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\nFlags:\n", usageLine, description)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and returns the exit status to stop with, or -1 to
// go on: 0 after -help, 2 for a usage error.
func parseFlags(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	return -1
}

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
