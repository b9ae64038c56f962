package measure

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// samples; 0 when there are none.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}
