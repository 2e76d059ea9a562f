package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/cli"
)

// FuzzParseArgs: whatever the arguments, parsing ends in go on, help or a
// usage error of exactly one line; positional arguments come back in order,
// and a suggested flag exists.
func FuzzParseArgs(f *testing.F) {
	for _, seed := range []string{
		"a.yaml b.yaml", "--config a.yaml b.yaml", "a.yaml --store memory:// b.yaml", "-- --config",
		"--confg x", "--store", "-h", "--help=false", "--config=a --config=b", "---x", "-", "--", "--=x",
		"--stor=redis://h a", "\x00 --\x00",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		var errb strings.Builder
		fs := cli.NewFlagSet("sluice validate", "sluice validate FILE...", "d", &errb)
		var files cli.StringList
		fs.Var(&files, "config", "file")
		fs.String("store", "", "URL")
		positional, code := cli.ParseArgs(fs, args)
		switch code {
		case -1:
			if errb.Len() != 0 {
				t.Fatalf("%q: went on but printed %q", args, errb.String())
			}
			last := -1
			for _, p := range positional {
				i := indexFrom(args, p, last+1)
				if i < 0 {
					t.Fatalf("%q: positional %q not among the arguments in order (%q)", args, p, positional)
				}
				last = i
			}
		case 0:
			if !strings.HasPrefix(errb.String(), "Usage: ") {
				t.Fatalf("%q: help printed %q", args, errb.String())
			}
		case 2:
			out := errb.String()
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || strings.Contains(out, "Usage:") {
				t.Fatalf("%q: usage error is not one line: %q", args, out)
			}
			if _, guess, ok := strings.Cut(out, "did you mean --"); ok {
				name, _, _ := strings.Cut(guess, "?")
				if fs.Lookup(name) == nil {
					t.Fatalf("%q: suggested a flag that does not exist: %q", args, out)
				}
			}
		default:
			t.Fatalf("%q: exit code %d", args, code)
		}
	})
}

func indexFrom(list []string, s string, from int) int {
	for i := from; i < len(list); i++ {
		if list[i] == s {
			return i
		}
	}
	return -1
}
