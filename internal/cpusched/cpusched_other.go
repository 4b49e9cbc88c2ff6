//go:build !linux

package cpusched

import "fmt"

// Apply accepts only Normal off Linux.
func Apply(name string) error {
	if err := Check(name); err != nil || name == Normal {
		return err
	}
	return fmt.Errorf("scheduling policy %q: only %s off Linux", name, Normal)
}

// Current is "" off Linux.
func Current() string { return "" }
