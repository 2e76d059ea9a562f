package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parsed is what one file contributes, before the files are merged.
type parsed struct {
	file      string
	store     *Store
	storeNode *yaml.Node // the store: key, for clashes between files
	storeBody *yaml.Node // the store section's mapping, to locate its fields
	policies  []placed
	domain    *Domain
	domainKey *yaml.Node // the domain value, for clashes between files
	proxy     *proxySection
}

// placed is a policy with the node and path a name clash is reported at.
type placed struct {
	pol     *Policy
	node    *yaml.Node
	field   string
	derived bool // named after its place in an Envoy descriptor tree
	invalid bool // reported already; only its name is kept, to find duplicates
}

// Load reads and merges configuration files; a directory stands for the
// files Expand lists in it. At most one of them may have a
// store section; policy names (native ones and those derived from Envoy
// descriptors) must be unique across all of them; an Envoy domain may be
// defined in one file only. Every problem in every file is reported in one
// *Error, so a broken deployment is fixed in one pass.
//
// The files are read within the default Limits; Limits.Load sets others.
func Load(paths ...string) (*Config, error) { return Limits{}.Load(paths...) }

func load(b *budget, paths []string) (*Config, error) {
	ps := &problems{}
	if len(paths) == 0 {
		ps.add(Problem{Message: "no configuration files given"})
		return nil, ps.err(nil)
	}
	var files []*parsed
	var names []string
	seen := map[string]string{}
	for _, given := range paths {
		expanded, err := expand(given)
		if err != nil {
			ps.add(Problem{File: given, Message: err.Error()})
			names = append(names, given)
			continue
		}
		for _, path := range expanded {
			clean := filepath.Clean(path)
			if first, dup := seen[clean]; dup {
				msg := "given twice"
				if first != path {
					msg += " (also as " + first + ")"
				}
				ps.add(Problem{File: path, Message: msg})
				continue
			}
			seen[clean] = path
			names = append(names, path)
			data, err := readFile(path)
			if err != nil {
				ps.add(Problem{File: path, Message: err.Error()})
				continue
			}
			if f := parseFile(path, data, ps, b); f != nil {
				files = append(files, f)
			}
		}
	}
	return finish(files, ps, names)
}

// Expand returns the files that paths stand for, as Load reads them: a file
// as given, a directory as the *.yaml and *.yml files directly in it, sorted
// by name. Names starting with a dot are skipped (editors' temporary files,
// the ..data link of a Kubernetes ConfigMap) and so are subdirectories. The
// error reports the first path that cannot be expanded, such as a directory
// without such files.
func Expand(paths ...string) ([]string, error) {
	var files []string
	for _, p := range paths {
		expanded, err := expand(p)
		if err != nil {
			return files, fmt.Errorf("%s: %w", p, err)
		}
		files = append(files, expanded...)
	}
	return files, nil
}

// expand is Expand for one path. A path that is not a directory, including
// one that cannot be read, is returned as it is, for readFile to report.
func expand(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read the directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		file := filepath.Join(path, name)
		if fi, err := os.Stat(file); err == nil && fi.IsDir() {
			continue // a link to a directory, or a directory named x.yaml
		}
		files = append(files, file)
	}
	if len(files) == 0 {
		return nil, errors.New("the directory holds no *.yaml or *.yml file")
	}
	return files, nil
}

// Parse reads one file's contents; file names it in Config.Files and in
// problems. Load is Parse for each file plus the merge rules.
func Parse(file string, data []byte) (*Config, error) {
	ps := &problems{}
	var files []*parsed
	if f := parseFile(file, data, ps, Limits{}.budget()); f != nil {
		files = append(files, f)
	}
	cfg := merge(files, ps)
	if err := ps.err([]string{file}); err != nil {
		return nil, err
	}
	cfg.Files = []string{file}
	return cfg, nil
}

// readFile reads at most one byte past the size limit, so that a huge file
// (or a device) is refused without being read whole.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot open: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("file is larger than the maximum %d bytes (4 MiB)", maxFileSize)
	}
	return data, nil
}

// parseFile parses one file, telling the two formats apart by the domain key:
// envoyproxy/ratelimit files must load unchanged, and they always have one.
// It returns nil when the file cannot be used at all.
func parseFile(file string, data []byte, ps *problems, b *budget) *parsed {
	p := &fileParser{file: file, out: ps, budget: b}
	root := p.document(data)
	if root == nil {
		return nil
	}
	return parseRoot(p, root)
}

// parseRoot is parseFile for a document's top node.
func parseRoot(p *fileParser, root *yaml.Node) *parsed {
	file := p.file
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "", "the top level must be a mapping: store: and policies: "+
			"(Sluice's format) or domain: and descriptors: (envoyproxy/ratelimit's), got %s", describe(root))
		return nil
	}
	out := &parsed{file: file}
	envoy := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "domain" {
			envoy = true
		}
	}
	if envoy {
		p.envoy(root, out)
	} else {
		p.native(root, out)
	}
	// A descriptor's limits and those below it are collected in tree order:
	// put them in file order, so that a clash blames the later definition.
	byLine := func(a, b placed) int { return cmp.Compare(a.pol.Line, b.pol.Line) }
	if !slices.IsSortedFunc(out.policies, byLine) { // a document built in memory has no lines: it is
		slices.SortStableFunc(out.policies, byLine)
	}
	return out
}

// ReservedPrefix starts the names of policies Sluice makes itself (Envoy's
// per-request limit overrides, the readiness probe); no configured policy may
// use it, or it would share their state and metrics.
const ReservedPrefix = "sluice."

// merge builds the Config from the parsed files, reporting what clashes
// between them (and between policies of one file).
func merge(files []*parsed, ps *problems) *Config {
	n := 0
	for _, f := range files {
		n += len(f.policies)
	}
	cfg := &Config{Policies: make(map[string]*Policy, n), Domains: map[string]*Domain{}}
	var storeFile *parsed
	domainAt := map[string]string{}   // domain name -> "file:line" of its definition
	invalidAt := map[string]*Policy{} // policies reported invalid, by name
	for _, f := range files {
		p := &fileParser{file: f.file, out: ps}
		if f.store != nil {
			if storeFile != nil {
				p.errorf(f.storeNode, "store", "a store section is already set in %s:%d; only one file may set it",
					storeFile.file, storeFile.storeNode.Line)
			} else {
				storeFile, cfg.Store = f, *f.store
				cfg.storeFile, cfg.storeBody = f.file, f.storeBody
			}
		}
		if d := f.domain; d != nil {
			if prev, dup := domainAt[d.Name]; dup {
				p.errorf(f.domainKey, "domain", "domain %q is already defined at %s; a domain is defined in one file only",
					d.Name, prev)
			} else {
				cfg.Domains[d.Name] = d
				domainAt[d.Name] = location(f.file, f.domainKey.Line)
			}
		}
		for _, pl := range f.policies {
			name := pl.pol.Name
			if strings.HasPrefix(name, ReservedPrefix) {
				how := ""
				if pl.derived {
					how = " (an Envoy limit is named domain.key_value...: rename the domain)"
				}
				p.errorf(pl.node, pl.field, "policy name %q%s starts with %q, which Sluice reserves for its own limits", name, how, ReservedPrefix)
				continue
			}
			prev, dup := cfg.Policies[name]
			if !dup {
				prev, dup = invalidAt[name]
			}
			if dup {
				how := ""
				if pl.derived {
					how = " (an Envoy limit is named domain.key_value.key_value...)"
				}
				p.errorf(pl.node, pl.field, "policy name %q%s is already used at %s; policy names must be unique across all files",
					name, how, location(prev.File, prev.Line))
				continue
			}
			if pl.invalid {
				invalidAt[name] = pl.pol // reported already; kept to find its duplicates
				continue
			}
			cfg.Policies[name] = pl.pol
		}
	}
	cfg.Proxy = mergeProxy(files, cfg.Policies, ps)
	return cfg
}

// finish merges the parsed files into one Config read from names, or
// returns every problem found along the way.
func finish(files []*parsed, ps *problems, names []string) (*Config, error) {
	cfg := merge(files, ps)
	if err := ps.err(names); err != nil {
		return nil, err
	}
	cfg.Files = names
	return cfg, nil
}
