package fairshare_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/fairshare"
)

// Four clients share 1000 requests per second. The two that ask for less
// than an equal share get what they ask for; the other two split the rest.
func ExampleAllocate() {
	shares := fairshare.Allocate(1000, []fairshare.Claim{{Demand: 100}, {Demand: 200}, {Demand: 600}, {Demand: 2000}}, false)
	fmt.Println(shares)
	// Output: [100 200 350 350]
}
