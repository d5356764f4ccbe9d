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
