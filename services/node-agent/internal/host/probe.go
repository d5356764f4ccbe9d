package host

import (
	"context"
	"errors"
	"os/exec"
	"strings"
)

// Signature is what blkid -p finds on a device; empty fields mean nothing was found.
type Signature struct {
	Type       string // filesystem or container type: xfs, ext4, LVM2_member, linux_raid_member
	Label      string
	UUID       string
	PTType     string // partition table: gpt, dos
	PTUUID     string
	Usage      string
	Ambivalent bool
}

// Empty says whether blkid found nothing at all.
func (s Signature) Empty() bool {
	return s.Type == "" && s.PTType == "" && !s.Ambivalent
}

// Probe reads signatures with blkid -p, which looks at the device itself instead of a udev
// cache (there is none in a container).
func (h *Host) Probe(ctx context.Context, dev string) (Signature, error) {
	out, err := run(ctx, "blkid", "-p", "-o", "export", dev)
	var exitErr *exec.ExitError
	var cmdErr *CommandError
	if errors.As(err, &cmdErr) && cmdErr.Stderr != "" {
		// blkid exits 2 ("nothing found") also when it could not read the device: an
		// unreadable device must never pass for a blank one.
		return Signature{}, err
	}
	if errors.As(err, &exitErr) {
		switch exitErr.ExitCode() {
		case 2: // nothing found
			return Signature{}, nil
		case 8: // more than one signature: treat as foreign data
			return Signature{Ambivalent: true, Type: "ambivalent"}, nil
		}
	}
	if err != nil {
		return Signature{}, err
	}
	var s Signature
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch k {
		case "TYPE":
			s.Type = v
		case "LABEL":
			s.Label = v
		case "UUID":
			s.UUID = v
		case "PTTYPE":
			s.PTType = v
		case "PTUUID":
			s.PTUUID = v
		case "USAGE":
			s.Usage = v
		}
	}
	return s, nil
}
