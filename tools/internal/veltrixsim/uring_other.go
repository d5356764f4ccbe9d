//go:build !linux

package veltrixsim

import "errors"

// probeIOURing: io_uring exists on Linux only.
func probeIOURing(bool) error { return errors.New("io_uring is Linux only") }
