package host

import (
	"context"
	"os"
)

// Wipe erases every signature on the disk, the given partitions first, and makes the kernel
// forget the old partitions; the media is checked to be the one the caller identified and
// the disk free of users (its raw partition included) right before and after.
func (h *Host) Wipe(ctx context.Context, d Disk, partitions []string) error {
	return h.withFreeMedia(ctx, d, func() error { return h.wipe(ctx, d.Path, partitions) })
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
