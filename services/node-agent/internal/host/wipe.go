package host

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// WipeMethod is how Wipe erases a disk.
type WipeMethod int

const (
	// WipeSignatures erases filesystem and partition-table signatures (wipefs): fast, but the
	// data stays on the media.
	WipeSignatures WipeMethod = iota
	// WipeDiscard discards every block (BLKDISCARD), then erases signatures.
	WipeDiscard
	// WipeZero writes zeroes over every block (BLKZEROOUT, offloaded where the device can).
	WipeZero
)

// ErrDiscardUnsupported means the device does not support discard; nothing was written.
var ErrDiscardUnsupported = errors.New("the device does not support discard (BLKDISCARD)")

// rangeChunk is how much one BLKDISCARD or BLKZEROOUT covers: the ioctl cannot be
// interrupted, so the call's deadline is checked between chunks.
const rangeChunk = 256 << 20

// Wipe erases the disk by the given method, then every signature on it, the given partitions
// first, and makes the kernel forget the old partitions; the media is checked to be the one
// the caller identified and the disk free of users (its raw partition included) right before
// and after.
func (h *Host) Wipe(ctx context.Context, d Disk, partitions []string, method WipeMethod) error {
	return h.withFreeMedia(ctx, d, func() error {
		switch method {
		case WipeDiscard:
			if err := h.blockRange(ctx, d.Path, blkDiscard); err != nil {
				return err
			}
		case WipeZero:
			if err := h.blockRange(ctx, d.Path, blkZeroOut); err != nil {
				return err
			}
		}
		return h.wipe(ctx, d.Path, partitions)
	})
}

// blockRange discards or zeroes the whole device in chunks. The agent opens it O_EXCL for
// this, its own write: a mount or another exclusive opener cannot start meanwhile.
func (h *Host) blockRange(ctx context.Context, dev string, req uintptr) error {
	fd, err := unix.Open(dev, unix.O_WRONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%s: %w: %w", dev, ErrInUse, ErrBusy)
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer unix.Close(fd)
	var size uint64
	if err := ioctlGetSize(fd, &size); err != nil {
		return fmt.Errorf("sizing %s: %w", dev, err)
	}
	for off := uint64(0); off < size; off += rangeChunk {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s erased up to byte %d of %d: %w", dev, off, size, err)
		}
		err := blkRange(fd, req, off, min(rangeChunk, size-off))
		if req == blkDiscard && off == 0 && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)) {
			return fmt.Errorf("%s: %w", dev, ErrDiscardUnsupported)
		}
		if err != nil {
			return fmt.Errorf("erasing %s at byte %d: %w", dev, off, err)
		}
	}
	return nil
}

func (h *Host) wipe(ctx context.Context, dev string, partitions []string) error {
	for _, p := range partitions {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, err := run(ctx, "wipefs", "-a", "-q", p); err != nil {
			return err
		}
	}
	if _, err := run(ctx, "wipefs", "-a", "-q", dev); err != nil {
		return err
	}
	return h.RereadPartitions(dev)
}
