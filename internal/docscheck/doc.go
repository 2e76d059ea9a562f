// Package docscheck holds the test that keeps the user documentation
// self-contained: it runs scripts/check-docs.sh, which fails when README.md or
// docs/ link to a file or heading that is not in the repository, or mention
// files that live outside it. `make test` runs it with every other test.
package docscheck
