package online

import (
	"slices"
	"testing"
)

// TestContainsItem: containsItem answers as slices.Contains does, for
// every length around its blocks of four and every position of the item.
func TestContainsItem(t *testing.T) {
	for n := 0; n <= 2*recentItems; n++ {
		s := make([]int32, n)
		for k := range s {
			s[k] = int32(3*k + 1)
		}
		for v := int32(-1); v <= int32(3*n+2); v++ {
			if got, want := containsItem(s, v), slices.Contains(s, v); got != want {
				t.Fatalf("containsItem(len %d, %d) = %v, want %v", n, v, got, want)
			}
		}
	}
}
