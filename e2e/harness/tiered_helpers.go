package harness

import (
	"slices"
	"time"
)

// Quantile of durations (sorts ds).
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q * float64(len(ds)))
	return ds[min(i, len(ds)-1)]
}
