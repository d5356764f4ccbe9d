package host

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctlGetSize asks the kernel for a block device's size in bytes (BLKGETSIZE64).
func ioctlGetSize(fd int, size *uint64) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(size)))
	if errno != 0 {
		return errno
	}
	return nil
}

// addPartition registers a partition with the kernel (BLKPG_ADD_PARTITION), for kernels whose
// partition-table parsers do not know GPT and so never see what sfdisk wrote.
func addPartition(fd int, number int32, startBytes, lengthBytes int64) error {
	part := unix.BlkpgPartition{Start: startBytes, Length: lengthBytes, Pno: number}
	arg := unix.BlkpgIoctlArg{
		Op:      unix.BLKPG_ADD_PARTITION,
		Datalen: int32(unsafe.Sizeof(part)),
		Data:    (*byte)(unsafe.Pointer(&part)),
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKPG, uintptr(unsafe.Pointer(&arg)))
	if errno != 0 && errno != unix.EBUSY { // EBUSY: the kernel already has it
		return errno
	}
	return nil
}

// diskSeq asks the kernel for the sequence number of the media behind an open block device
// (BLKGETDISKSEQ); a partition answers with its disk's.
func diskSeq(fd int) (uint64, error) {
	var seq uint64
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETDISKSEQ, uintptr(unsafe.Pointer(&seq)))
	if errno != 0 {
		return 0, errno
	}
	return seq, nil
}

// Block-device range ioctls (linux/fs.h), absent from x/sys: _IO(0x12, 119) and _IO(0x12, 127).
const (
	blkDiscard = 0x1277
	blkZeroOut = 0x127f
)

// blkRange runs BLKDISCARD or BLKZEROOUT over [start, start+length) bytes of an open device.
func blkRange(fd int, req uintptr, start, length uint64) error {
	r := [2]uint64{start, length}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&r)))
	if errno != 0 {
		return errno
	}
	return nil
}
