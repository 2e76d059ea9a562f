// Package apicheck holds the tests that keep the public API's conventions
// from drifting: they parse the library's packages (everything outside
// internal/, cmd/, examples/ and deploy/) and fail on an exported function
// that breaks one.
package apicheck
