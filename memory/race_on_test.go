//go:build race

package memory_test

// rotationKeys is how many distinct keys TestKeyRotationMemoryBounded sends:
// fewer under the race detector, which makes each decision many times slower.
const rotationKeys = 300_000
