package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/sluicehq/sluice/internal/suggest"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// newFlagSet returns a FlagSet whose --help prints the command's usage line,
// its description and its flags, each spelled --name.
func newFlagSet(name, usageLine, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\nFlags:\n", usageLine, description)
		printFlags(fs)
	}
	return fs
}

// printFlags is flag.PrintDefaults with one spelling, --name, the one every
// text of this command uses.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n        %s", line, strings.ReplaceAll(usage, "\n", "\n        "))
		if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" {
			if reflect.Indirect(reflect.ValueOf(f.Value)).Kind() == reflect.String {
				def = fmt.Sprintf("%q", def)
			}
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

// parseFlags parses args, which must hold flags only, and returns the exit
// status to stop with, or -1 to go on: 0 after --help, 2 for a usage error.
func parseFlags(fs *flag.FlagSet, args []string) int {
	rest, code := parseArgs(fs, args)
	if code < 0 && len(rest) > 0 {
		msg := fmt.Sprintf("unexpected argument %q (this command takes flags only)", rest[0])
		if ext := strings.ToLower(filepath.Ext(rest[0])); fs.Lookup("config") != nil && (ext == ".yaml" || ext == ".yml") {
			msg = fmt.Sprintf("unexpected argument %q; did you mean --config %s?", rest[0], rest[0])
		}
		return usageError(fs, msg)
	}
	return code
}

// parseArgs parses flags and positional arguments in any order (a "--" ends
// the flags) and returns the positional ones with the exit status to stop
// with, or -1 to go on. A mistake gets one line naming it and where help is,
// not the whole help.
func parseArgs(fs *flag.FlagSet, args []string) (positional []string, code int) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	restore := func() { fs.SetOutput(out); fs.Usage = usage }
	for {
		err := fs.Parse(args)
		if err != nil {
			restore()
			if errors.Is(err, flag.ErrHelp) {
				fs.Usage()
				return nil, 0
			}
			return nil, usageError(fs, flagMessage(fs, err))
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			restore()
			return append(positional, rest...), -1
		}
		if len(rest) == 0 {
			restore()
			return positional, -1
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// usageError prints msg and where the command's help is, and returns 2.
func usageError(fs *flag.FlagSet, msg string) int {
	fmt.Fprintf(fs.Output(), "sluice %s: %s (sluice %s -h lists the flags)\n", fs.Name(), msg, fs.Name())
	return 2
}

var (
	unknownFlag  = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	missingValue = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]*): (.*)$`)
)

// flagMessage rewrites the flag package's errors with --name spellings, a
// guess at a mistyped flag, and what a value should look like.
func flagMessage(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		s := "unknown flag --" + m[1]
		if guess := closest(m[1], flagNames(fs)); guess != "" {
			s += "; did you mean --" + guess + "?"
		}
		return s
	}
	if m := missingValue.FindStringSubmatch(msg); m != nil {
		return "flag --" + m[1] + " needs a value"
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s %q: %s", m[2], m[1], valueReason(fs.Lookup(m[2]), m[3]))
	}
	return msg
}

// valueReason says what a flag's value should look like, in words rather
// than the flag package's "parse error".
func valueReason(f *flag.Flag, reason string) string {
	if f == nil {
		return reason
	}
	if reason == "value out of range" {
		return "out of range"
	}
	getter, ok := f.Value.(flag.Getter)
	if !ok {
		return reason
	}
	switch getter.Get().(type) {
	case bool:
		return "want true or false"
	case int, int64, uint, uint64:
		return "want a whole number"
	case float64:
		return "want a number"
	case time.Duration:
		return "want a duration such as 500ms, 2s or 1m"
	}
	return reason
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// closest returns the candidate nearest to s by edit distance when it is
// near enough to be a typo, or one that s is a prefix of; "" otherwise.
func closest(s string, candidates []string) string {
	best, bestDist := "", 0
	for _, c := range candidates {
		d := suggest.Distance(s, c)
		if best == "" || d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" && bestDist <= max(1, min(len(s), len(best))/3) {
		return best
	}
	var prefixed []string
	for _, c := range candidates {
		if strings.HasPrefix(c, s) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}
