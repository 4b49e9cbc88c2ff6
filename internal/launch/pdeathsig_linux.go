package launch

import "syscall"

// dieWithParent has the kernel SIGKILL the child when the thread that
// started it exits.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
