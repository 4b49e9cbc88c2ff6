//go:build !linux

package vfs

import (
	"errors"
	"os"
)

func newMemFd(string) (*os.File, error) {
	return nil, errors.New("vfs: memfd needs Linux")
}
