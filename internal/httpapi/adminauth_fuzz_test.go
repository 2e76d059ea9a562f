package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/storetest"
)

// FuzzAdminAuthorization: whatever the Authorization header, the guard lets
// a request through exactly when it is the Bearer scheme (in any case), one
// space and the token; otherwise it answers 401 or, past the failures
// allowed, 429, and never repeats what was sent.
func FuzzAdminAuthorization(f *testing.F) {
	const token = "0123456789abcdef0123456789abcdef"
	for _, seed := range []string{"", "Bearer " + token, "bearer " + token, "Bearer  " + token, "Bearer " + token + " ",
		"Basic " + token, token, "Bearer", "Bearer ", "Bearer " + token[:31], "BEARER " + token, "Bearer\t" + token} {
		f.Add(seed, uint8(0))
	}
	f.Fuzz(func(t *testing.T, auth string, failures uint8) {
		g := newAdminGuard(token, prometheus.NewRegistry(), nil, storetest.NewClock(storetest.Epoch))
		bad := httptest.NewRequest("POST", "/v1/admin/reset", nil)
		for range failures % 16 { // some failures from the same address first
			g.admit(httptest.NewRecorder(), bad)
		}
		r := httptest.NewRequest("POST", "/v1/admin/reset", nil)
		r.Header["Authorization"] = []string{auth}
		w := httptest.NewRecorder()
		got := g.admit(w, r)
		scheme, rest, _ := strings.Cut(auth, " ")
		want := strings.EqualFold(scheme, "Bearer") && rest == token && failures%16 < AdminFailureBurst
		if got != want {
			t.Fatalf("Authorization %q after %d failures: admitted %v, want %v", auth, failures%16, got, want)
		}
		if got {
			return
		}
		if w.Code != http.StatusUnauthorized && w.Code != http.StatusTooManyRequests {
			t.Fatalf("Authorization %q: %d", auth, w.Code)
		}
		if len(auth) >= 8 && utf8.ValidString(auth) && strings.Contains(w.Body.String(), auth) {
			t.Fatalf("the answer repeats the header: %s", w.Body)
		}
	})
}

// FuzzCheckAdminToken: a token accepted has at least MinAdminTokenLen
// characters and 8 different ones; a refusal never quotes the token.
func FuzzCheckAdminToken(f *testing.F) {
	for _, seed := range []string{"", "x", "0123456789abcdef0123456789abcdef", strings.Repeat("ab", 20), "ééééééééééééééééééééééééééééééééééé"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		err := CheckAdminToken(token)
		distinct := map[rune]bool{}
		for _, c := range token {
			distinct[c] = true
		}
		strong := utf8.RuneCountInString(token) >= MinAdminTokenLen && len(distinct) >= minAdminTokenChars
		if (err == nil) != strong {
			t.Fatalf("%q: %v", token, err)
		}
		if err != nil && len(token) >= 8 && strings.Contains(err.Error(), token) {
			t.Fatalf("the refusal quotes the token: %v", err)
		}
	})
}
