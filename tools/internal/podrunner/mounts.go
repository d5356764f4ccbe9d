package podrunner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// containerMount is one bind mount of a container's mount namespace, as mountTable lays it
// out before anything exists on the host.
type containerMount struct {
	Source, Target string
	ReadOnly       bool
	// Volume names the pod volume the source comes from ("" for the hosts file and the
	// writable layer).
	Volume string
	// Nested: Target lies inside another of the container's volume mounts, so its mount
	// point is made in that volume, inside the namespace, not on the host.
	Nested bool
	// SubPathOf is the volume directory Source is a subPath of: a missing Source is made,
	// owned like the volume. "" for a whole volume.
	SubPathOf string
	// Device: a raw block volume, whose Source must be a device node.
	Device bool
}

// mountTable lays out a container's mounts in the order they are bound, and the directory
// it starts in: the pod's hosts file at /etc/hosts; the writable layer scratch at the
// working directory (the container's, else the image's imageDir) unless a volume covers it,
// or scratch itself as the working directory when there is none; each volume mount (vols
// maps a volume name to its host directory, vars expands subPathExpr); each raw block
// device at its device path.
func mountTable(c *corev1.Container, imageDir, hostsPath, scratch string, vols, vars map[string]string) (table []containerMount, dir string, err error) {
	nested := func(target string) bool {
		// "/data/" and "/data" are one path: a mount is never inside itself.
		target = strings.TrimSuffix(target, "/")
		for _, m := range c.VolumeMounts {
			parent := strings.TrimSuffix(m.MountPath, "/")
			if target != parent && strings.HasPrefix(target, parent+"/") {
				return true
			}
		}
		return false
	}
	covered := func(p string) bool {
		for _, m := range c.VolumeMounts {
			if p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") {
				return true
			}
		}
		return false
	}
	add := func(m containerMount) {
		m.Nested = nested(m.Target)
		table = append(table, m)
	}
	add(containerMount{Source: hostsPath, Target: "/etc/hosts", ReadOnly: true})
	dir = c.WorkingDir
	if dir == "" {
		dir = imageDir
	}
	switch {
	case dir == "":
		dir = scratch
	case !covered(dir):
		// The image's writable layer at its working directory.
		add(containerMount{Source: scratch, Target: dir})
	}
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return nil, "", fmt.Errorf("volume %s not found", m.Name)
		}
		cm := containerMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly, Volume: m.Name}
		if sub := m.SubPath; sub != "" || m.SubPathExpr != "" {
			if m.SubPathExpr != "" {
				sub = expand(m.SubPathExpr, vars)
			}
			cm.SubPathOf, cm.Source = src, filepath.Join(src, filepath.Clean("/"+sub))
		}
		add(cm)
	}
	// Raw block volumes: the node's device node bound at the device path, in the pod's
	// namespace only (the empty file the bind covers is the host's mount point).
	for _, d := range c.VolumeDevices {
		src, ok := vols[d.Name]
		if !ok {
			return nil, "", fmt.Errorf("volume %s not found", d.Name)
		}
		add(containerMount{Source: src, Target: d.DevicePath, Volume: d.Name, Device: true})
	}
	return table, dir, nil
}

// prepareMounts makes on the host what the table's mounts need, in table order: missing
// subPath directories and the mount points outside volumes; raw block sources must be
// device nodes.
func (r *Runner) prepareMounts(table []containerMount) ([]mountSpec, error) {
	mounts := make([]mountSpec, 0, len(table))
	for _, m := range table {
		if m.SubPathOf != "" {
			if err := makeSubPath(m.SubPathOf, m.Source); err != nil {
				return nil, err
			}
		}
		st, err := os.Stat(m.Source)
		if m.Device && (err != nil || st.Mode()&os.ModeDevice == 0) {
			return nil, fmt.Errorf("volumeDevice %s: %s is not a block volume", m.Volume, m.Source)
		}
		if err != nil {
			return nil, fmt.Errorf("mount source %s: %w", m.Source, err)
		}
		if !m.Nested {
			if err := r.ensureMountpoint(m.Target, !st.IsDir()); err != nil {
				return nil, fmt.Errorf("mount point %s: %w", m.Target, err)
			}
		}
		mounts = append(mounts, mountSpec{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	return mounts, nil
}

// makeSubPath makes a missing subPath directory dir of the volume directory vol, owned like
// the volume, as the kubelet makes it.
func makeSubPath(vol, dir string) error {
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		return nil
	}
	st, err := os.Stat(vol)
	if err != nil {
		return err
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if sys != nil {
		return chownMode(dir, 0o750|uint32(st.Mode().Perm()&0o020), int(sys.Uid), int(sys.Gid))
	}
	return nil
}
