package host

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrBusy means the kernel refused exclusive access: the device is mounted (in any mount
// namespace), or held by device-mapper, md or another exclusive opener.
var ErrBusy = errors.New("device is busy")

// CheckExclusive opens the device with O_EXCL, which the kernel refuses while anything holds
// it; this sees mounts of other namespaces that no mount table of ours shows.
func (h *Host) CheckExclusive(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return ErrBusy
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	return unix.Close(fd)
}

// DeviceSize returns a block device's size from the kernel.
func (h *Host) DeviceSize(dev string) (int64, error) {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", dev, err)
	}
	defer unix.Close(fd)
	var size uint64
	if err := ioctlGetSize(fd, &size); err != nil {
		return 0, fmt.Errorf("sizing %s: %w", dev, err)
	}
	return int64(size), nil
}

// ErrMediaChanged means a device name now stands for other media than the caller identified.
var ErrMediaChanged = errors.New("the device now holds other media than the one identified")

// withMedia runs a write while holding the disk open, after checking that its media is still
// the one d describes (same disk sequence number). The open descriptor pins the media: a loop
// device cannot be re-attached to another file under the agent until it is closed.
func (h *Host) withMedia(d Disk, write func() error) error {
	fd, err := unix.Open(d.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", d.Path, err)
	}
	defer unix.Close(fd)
	if d.DiskSeq != 0 {
		seq, err := diskSeq(fd)
		if err != nil {
			return fmt.Errorf("reading the disk sequence of %s: %w", d.Path, err)
		}
		if seq != d.DiskSeq {
			return fmt.Errorf("%s (sequence %d, identified %d): %w", d.Path, seq, d.DiskSeq, ErrMediaChanged)
		}
	}
	return write()
}
