package iouring

import (
	"errors"
	"runtime"
	"strings"
)

// Info is what Probe found out about this host.
type Info struct {
	Available  bool
	Reason     string // why not, when !Available
	Err        error  // the underlying error, when !Available
	SetupFlags uint32 // flags the kernel accepted for DefaultSetupFlags
	Features   uint32
}

// Probe creates a small ring, runs one NOP through it and closes it. It tells
// the broker's --io auto whether to use io_uring and, if not, why (EPERM from
// kernel.io_uring_disabled or seccomp, ENOSYS, ...). A seccomp profile may
// allow setup yet filter io_uring_enter, which is why a NOP round trip is made.
func Probe() (Info, error) {
	// SINGLE_ISSUER binds the ring to this thread for the NOP below.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	r, err := New(4)
	if err != nil {
		return unavailable(err), err
	}
	defer r.Close()
	info := Info{Available: true, SetupFlags: r.SetupFlags(), Features: r.Features()}
	sqe := r.GetSQE()
	PrepNop(sqe)
	sqe.SetUserData(0x9e0b)
	if _, err := r.SubmitAndWait(1); err != nil {
		return unavailable(err), err
	}
	cqe, ok := r.PeekCQE()
	if !ok || cqe.UserData != 0x9e0b || cqe.Res != 0 {
		err := errors.New("iouring: NOP round trip returned no or a wrong completion")
		return unavailable(err), err
	}
	r.CQAdvance(1)
	return info, nil
}

func unavailable(err error) Info {
	info := Info{Err: err, Reason: err.Error()}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		info.Reason = ue.Reason + " (" + ue.Errno.Error() + ")"
	}
	return info
}

// SetupFlagNames renders IORING_SETUP_* bits for logs, e.g.
// "SINGLE_ISSUER|DEFER_TASKRUN".
func SetupFlagNames(flags uint32) string {
	names := []struct {
		bit  uint32
		name string
	}{
		{SetupIOPoll, "IOPOLL"}, {SetupSQPoll, "SQPOLL"}, {SetupSQAff, "SQ_AFF"},
		{SetupCQSize, "CQSIZE"}, {SetupClamp, "CLAMP"}, {SetupAttachWQ, "ATTACH_WQ"},
		{SetupRDisabled, "R_DISABLED"}, {SetupSubmitAll, "SUBMIT_ALL"},
		{SetupCoopTaskrun, "COOP_TASKRUN"}, {SetupTaskrunFlag, "TASKRUN_FLAG"},
		{SetupSQE128, "SQE128"}, {SetupCQE32, "CQE32"},
		{SetupSingleIssuer, "SINGLE_ISSUER"}, {SetupDeferTaskrun, "DEFER_TASKRUN"},
	}
	var parts []string
	for _, n := range names {
		if flags&n.bit != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, "|")
}
