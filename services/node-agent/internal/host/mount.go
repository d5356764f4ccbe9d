package host

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MountXFS mounts the XFS filesystem on dev (d itself or one of its partitions) at target,
// resolved and created beneath root without following symlinks. The media is checked to be
// the one the caller identified.
func (h *Host) MountXFS(d Disk, dev, root, target string) error {
	return h.withMedia(d, func() error {
		return mountBeneath(root, target, func(at string) error {
			if err := unix.Mount(dev, at, "xfs", unix.MS_NOATIME, ""); err != nil {
				return fmt.Errorf("mounting %s at %s: %w", dev, target, err)
			}
			return nil
		})
	})
}

// BindMount bind-mounts source (a directory of the agent's own) at target, resolved and
// created beneath root without following symlinks, and mounted onto the resolved descriptor so
// that a symlink swapped in meanwhile cannot redirect it.
func (h *Host) BindMount(source, root, target string) error {
	return mountBeneath(root, target, func(at string) error {
		if err := unix.Mount(source, at, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s at %s: %w", source, target, err)
		}
		return nil
	})
}

// RemoveDir removes an empty directory the agent created; a missing one is fine.
func (h *Host) RemoveDir(dir string) error {
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
