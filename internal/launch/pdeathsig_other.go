//go:build !linux

package launch

import "syscall"

// dieWithParent: only Linux has a parent-death signal; elsewhere (the
// macOS client build, which starts no brokers) the child may outlive us.
func dieWithParent(*syscall.SysProcAttr) {}
