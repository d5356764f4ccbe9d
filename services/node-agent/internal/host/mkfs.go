package host

import "context"

// MkfsXFS makes an XFS filesystem with the agent's label and a UUID chosen by the agent, so the
// filesystem can be recognised even when the device's name changes. -f is safe here because
// the caller has already proven the device blank or the agent's own, and withFreeMedia
// checks it free of users right before and after.
func (h *Host) MkfsXFS(ctx context.Context, d Disk, dev, label, uuid string) error {
	return h.withFreeMedia(ctx, d, func() error {
		_, err := run(ctx, "mkfs.xfs", "-f", "-q", "-L", label, "-m", "uuid="+uuid, dev)
		return err
	})
}
