//go:build !race

package memory_test

// rotationKeys is how many distinct keys TestKeyRotationMemoryBounded sends.
const rotationKeys = 2_000_000
