//go:build !linux

package floor

import (
	"errors"
	"io"
)

// NodeMain needs Linux: O_DIRECT logs and the kernel the model measures.
func NodeMain([]string, io.Writer) error {
	return errors.New("floor: nodes run on Linux only")
}

// UringUnavailable says why ModeUring cannot run here.
func UringUnavailable() string { return "io_uring is Linux's" }
