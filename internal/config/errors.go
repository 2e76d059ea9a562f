package config

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong in a configuration file, located precisely
// enough for an editor to jump to it.
type Problem struct {
	// File is the file's name as given to Load or Parse.
	File string
	// Line and Column are 1-based; 0 when the problem concerns the whole
	// file (it cannot be read, or is not YAML).
	Line, Column int
	// Field is the YAML path of the offending field, such as
	// policies[2].limit or descriptors[0].rate_limit.unit; empty for
	// whole-file problems.
	Field string
	// Message says what is wrong and, where it helps, what is allowed.
	Message string
}

// Error is returned by Load and Parse. It lists every problem found, not just
// the first, so that one edit-and-retry cycle fixes a whole file.
type Error struct {
	// Problems are sorted by file (in the order the files were given), then
	// by line and column.
	Problems []Problem
}

// Error prints one line per problem, as file:line:col: field: message,
// leaving out the parts a problem does not have.
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
			if p.Column > 0 {
				fmt.Fprintf(&b, ":%d", p.Column)
			}
		}
		b.WriteString(": ")
		if p.Field != "" {
			b.WriteString(p.Field)
			b.WriteString(": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}

// maxProblems bounds the list: past that, a file is broken wholesale and a
// longer list would only bury the first, most useful, lines.
const maxProblems = 1000

// problems collects the problems of one Load or Parse.
type problems struct {
	list    []Problem
	dropped int
}

func (ps *problems) add(p Problem) {
	if len(ps.list) >= maxProblems {
		ps.dropped++
		return
	}
	ps.list = append(ps.list, p)
}

// err returns the collected problems as an *Error, sorted, or nil when there
// are none. files gives the order in which files sort.
func (ps *problems) err(files []string) error {
	if len(ps.list) == 0 {
		return nil
	}
	order := make(map[string]int, len(files))
	for i, f := range files {
		if _, ok := order[f]; !ok {
			order[f] = i
		}
	}
	list := append([]Problem(nil), ps.list...)
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.File != b.File {
			return order[a.File] < order[b.File]
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	if ps.dropped > 0 {
		list = append(list, Problem{
			File:    list[len(list)-1].File,
			Message: fmt.Sprintf("%d more problems not shown", ps.dropped),
		})
	}
	return &Error{Problems: list}
}

// fileParser walks one file's YAML tree, reporting problems against it.
type fileParser struct {
	file   string
	out    *problems
	budget *budget // what the configuration may still define; shared by its files
}

// errorf reports a problem at node n (nil: the whole file) for field path.
func (p *fileParser) errorf(n *yaml.Node, field, format string, args ...any) {
	pr := Problem{File: p.file, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		pr.Line, pr.Column = n.Line, n.Column
	}
	p.out.add(pr)
}

// StoreProblem returns a Problem about field, a path in the store section
// such as store.tls.ca_file, located at the field's line in the file that set
// the section (at the nearest enclosing field written there). Problems that
// only opening the store finds — a password file that cannot be read, a TLS
// key that does not parse — are reported through it, so that they carry
// file:line: field like every other.
func (c *Config) StoreProblem(field, message string) Problem {
	pr := Problem{File: c.storeFile, Field: field, Message: message}
	n := deref(c.storeBody)
	if n == nil {
		return pr
	}
	keys := strings.Split(field, ".")
	for _, key := range keys[1:] {
		next := mappingValue(n, key)
		if next == nil {
			break
		}
		n = next
	}
	pr.Line, pr.Column = n.Line, n.Column
	return pr
}

// mappingValue returns the value of key in mapping n, aliases resolved; nil
// when n is not a mapping or has no such key.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return deref(n.Content[i+1])
		}
	}
	return nil
}
