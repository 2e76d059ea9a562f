package lab

import (
	"image/color"

	"github.com/sluicehq/sluice"
)

// A series is what one colour stands for, the same in every plot of the lab:
// a design where a scenario compares designs (Sluice deciding on one shared
// store, Sluice with leases, a naive design), or one of Sluice's algorithms
// where a scenario compares algorithms (boundary, accuracy).
type series string

const (
	seriesSluice series = "sluice"
	seriesLeases series = "sluice: leases"
	seriesNaive  series = "naive"
	// seriesFairShare is the line of each tenant's max-min fair share
	// (fairness), a target like the limit but not the limit.
	seriesFairShare series = "max-min fair share"
	// seriesChargeBound is the documented worst case of check, then charge
	// (usage): L + N·(the largest cost) − 1 per window.
	seriesChargeBound series = "worst case of check, then charge: L + N·largest cost − 1"
)

// palette gives every series its colour; no two share one. Sluice is blue
// (its leases a lighter blue), the naive designs red, and the algorithms the
// other colours of a qualitative palette. The limit is always limitColour, dashed.
var palette = map[series]color.RGBA{
	seriesSluice:                 rgb(0x1f77b4),
	seriesLeases:                 rgb(0x17becf),
	seriesNaive:                  rgb(0xd62728),
	seriesFairShare:              rgb(0x7f7f7f),
	seriesChargeBound:            rgb(0x393b79),
	series(sluice.FixedWindow):   rgb(0xff7f0e),
	series(sluice.SlidingLog):    rgb(0x2ca02c),
	series(sluice.SlidingWindow): rgb(0x9467bd),
	series(sluice.TokenBucket):   rgb(0x8c564b),
	series(sluice.LeakyBucket):   rgb(0xe377c2),
	series(sluice.GCRA):          rgb(0xbcbd22),
}

// limitColour draws the line at overshoot 1, dashed, in every plot.
var limitColour = color.RGBA{A: 255}

func rgb(v uint32) color.RGBA {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}

// comparesAlgorithms reports whether a scenario's rows are Sluice's
// algorithms side by side, coloured by algorithm rather than by design.
func comparesAlgorithms(scenario string) bool {
	return scenario == Boundary || scenario == Accuracy
}

// seriesOf returns the series a row of scenario is drawn as.
func seriesOf(scenario string, row Row) series {
	switch {
	case comparesAlgorithms(scenario):
		return series(row.Algorithm)
	case row.Naive:
		return seriesNaive
	case row.ProvenBound != nil: // only lease rows carry a proven bound
		return seriesLeases
	default:
		return seriesSluice
	}
}
