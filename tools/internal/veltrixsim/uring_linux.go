package veltrixsim

import (
	"encoding/binary"
	"syscall"
	"unsafe"
)

// sysIOURingSetup is io_uring_setup's number; the same on every Linux architecture.
const sysIOURingSetup = 425

// ioringSetupSQPoll is IORING_SETUP_SQPOLL.
const ioringSetupSQPoll = 1 << 1

// probeIOURing calls io_uring_setup(1, params) as the server's bridge would at start and
// closes the ring: an error is what seccomp RuntimeDefault (EPERM) or an old or locked
// down kernel (ENOSYS, EPERM) answers.
func probeIOURing(sqpoll bool) error {
	var params [120]byte // struct io_uring_params, zeroed; __u32 flags at offset 8
	if sqpoll {
		binary.NativeEndian.PutUint32(params[8:], ioringSetupSQPoll)
	}
	fd, _, errno := syscall.Syscall(sysIOURingSetup, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if errno != 0 {
		return errno
	}
	return syscall.Close(int(fd))
}
