//go:build !linux

package cpusched

import "fmt"

// Apply accepts only Normal off Linux.
func Apply(name string) error {
	if name == Normal {
		return nil
	}
	return fmt.Errorf("scheduling policy %q: only %s off Linux", name, Normal)
}

// Current is "" off Linux.
func Current() string { return "" }
