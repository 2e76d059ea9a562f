package proxy

import (
	"path"
	"strings"
	"testing"
)

// TestMatchPath: every spelling of a path under /api/ that a common upstream
// serves there is read as under /api/; other paths are not.
func TestMatchPath(t *testing.T) {
	const prefix = "/api/"
	for _, p := range []string{
		"/api/a", "/API/a", "/Api/A", "/api;x/a", "/api;v=1;y/a", "/ApI;jsessionid=1/a",
		"/api//a", "//api/a", "/api/./a", "/x/../api/a", "/./api/a", "/api/.", "/api/x/..",
		"/%61pi/a", "/%41PI/a", "/%2561pi/a", "/%252561pi/a", "/api%2Fa", "/api%3Bx/a",
		"\\api\\a", "/api\\a", "/x\\..\\api/a", "/api/", "/api;/", "api/a",
	} {
		if got := matchPath(p); !strings.HasPrefix(got, prefix) {
			t.Errorf("matchPath(%q) = %q, want it under %s", p, got, prefix)
		}
	}
	for _, p := range []string{"/apiary", "/ap/i/a", "/api", "/ap%69", "/api%", "/x/api/a", "/api;x", "/"} {
		if got := matchPath(p); strings.HasPrefix(got, prefix) {
			t.Errorf("matchPath(%q) = %q, under %s", p, got, prefix)
		}
	}
	for _, p := range []string{"/", "/api/", "/api/items", "/a.b/c", "/v1/x-y_z~"} {
		if got := matchPath(p); got != p {
			t.Errorf("matchPath(%q) = %q, want it unchanged", p, got)
		}
		if n := testing.AllocsPerRun(10, func() { matchPath(p) }); n != 0 {
			t.Errorf("matchPath(%q) allocates %v times", p, n)
		}
	}
}

// FuzzMatchPath: whatever the path, the reading is an absolute, clean,
// lower-case path without parameters; and it never loses a prefix the
// byte-for-byte cleaned path has.
func FuzzMatchPath(f *testing.F) {
	for _, s := range []string{"/api/a", "/API;x/../a", "/%2561pi//a", "\\a\\b", "", "a", "/%zz", "/a/./b/..", "/Ü/ß;x"} {
		f.Add(s, "/api/")
	}
	f.Fuzz(func(t *testing.T, p, prefix string) {
		got := matchPath(p)
		if !strings.HasPrefix(got, "/") || strings.Contains(got, "//") || strings.Contains(got, ";") ||
			strings.Contains(got, "/./") || strings.Contains(got, "/../") || strings.ContainsRune(got, '\\') {
			t.Fatalf("matchPath(%q) = %q: not a clean path without parameters", p, got)
		}
		if strings.ToLower(got) != got {
			t.Fatalf("matchPath(%q) = %q: not lower case", p, got)
		}
		// A plain prefix (as configured: lower case, no parameters) that the
		// byte-for-byte cleaned path has, the reading has too.
		if !plain(prefix) || !strings.HasSuffix(prefix, "/") {
			return
		}
		cleaned := path.Clean("/" + p)
		if strings.HasSuffix(p, "/") && cleaned != "/" {
			cleaned += "/"
		}
		if strings.HasPrefix(cleaned, prefix) && !strings.ContainsAny(p, "%\\") && !strings.HasPrefix(got, matchPath(prefix)) {
			t.Fatalf("matchPath(%q) = %q lost the prefix %q that the cleaned path %q has", p, got, prefix, cleaned)
		}
	})
}
