package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opsuite/suite/tools/internal/podrunner"
)

// noDisks is the device allowlist of a node without disks: a glob no device matches, so
// its agent sees nothing rather than everything.
const noDisks = "/dev/localcluster-no-disks"

// DiskDir holds the sparse files behind the nodes' loop devices, <node>/disk-<i>.img.
func (o *Options) DiskDir() string { return filepath.Join(o.StateDir(), "disks") }

// NodeDevDir holds each node's /dev (podrunner.Config.NodeDevDir).
func (o *Options) NodeDevDir() string { return filepath.Join(o.StateDir(), "dev") }

// NodeRootDir holds each node's own filesystem for hostPath volumes
// (podrunner.Config.NodeRootDir), kept with the state like a node's disk.
func (o *Options) NodeRootDir() string { return filepath.Join(o.StateDir(), "nodes") }

// attachDisks gives every node DisksPerNode loop devices over sparse files, made once and
// kept with the state; devices still attached from a daemon that died are reused. It
// returns each node's devices.
func (o *Options) attachDisks() (map[string][]string, error) {
	attached, err := o.attachedDisks()
	if err != nil {
		return nil, err
	}
	for _, n := range o.Nodes {
		dir := filepath.Join(o.DiskDir(), n.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		for i := range o.DisksPerNode {
			file := filepath.Join(dir, fmt.Sprintf("disk-%d.img", i))
			if _, ok := attached[file]; ok {
				continue
			}
			if _, err := os.Stat(file); os.IsNotExist(err) {
				f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o600)
				if err != nil {
					return nil, err
				}
				err = f.Truncate(o.DiskSizeBytes)
				f.Close()
				if err != nil {
					return nil, err
				}
			}
			out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("losetup --find --show %s: %w: %s", file, err, strings.TrimSpace(string(out)))
			}
			dev := strings.TrimSpace(string(out))
			if err := clearPartitions(dev); err != nil {
				return nil, err
			}
			attached[file] = dev
		}
	}
	return NodeDisks(*o)
}

// attachedDisks maps each backing file under DiskDir to its loop device, as the kernel
// reports them (so it also finds what a dead daemon left).
func (o *Options) attachedDisks() (map[string]string, error) {
	dir := o.DiskDir()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		backing := strings.TrimSpace(string(data))
		if rel, ok := strings.CutPrefix(backing, dir+"/"); ok && !strings.HasSuffix(rel, " (deleted)") {
			dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
			out[filepath.Join(o.DiskDir(), rel)] = dev
		}
	}
	return out, nil
}

// NodeDisks returns the loop devices attached for each node of the cluster o describes,
// sorted by their disk file.
func NodeDisks(o Options) (map[string][]string, error) {
	attached, err := o.attachedDisks()
	if err != nil {
		return nil, err
	}
	files := make([]string, 0, len(attached))
	for f := range attached {
		files = append(files, f)
	}
	slices.Sort(files)
	out := map[string][]string{}
	for _, f := range files {
		node := filepath.Base(filepath.Dir(f))
		out[node] = append(out[node], attached[f])
	}
	return out, nil
}

// detachDisks detaches every loop device backed by a file under DiskDir.
func (o *Options) detachDisks() error {
	attached, err := o.attachedDisks()
	if err != nil {
		return err
	}
	var errs []error
	for file, dev := range attached {
		if err := clearPartitions(dev); err != nil {
			errs = append(errs, err)
		}
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("losetup --detach %s (%s): %w: %s", dev, file, err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// runnerDisks are the runner's per-node settings for disks: each node's devices and the
// $(NODE_DEVICES) allowlist its agent gets.
func (o *Options) runnerDisks(disks map[string][]string) (devices map[string][]string, vars map[string]map[string]string) {
	devices, vars = map[string][]string{}, map[string]map[string]string{}
	for _, n := range o.Nodes {
		devices[n.Name] = disks[n.Name]
		allow := strings.Join(disks[n.Name], ",")
		if allow == "" {
			allow = noDisks
		}
		vars[n.Name] = map[string]string{podrunner.NodeDevicesVar: allow}
	}
	return devices, vars
}

// clearPartitions drops the kernel's partitions of a loop device. Partitions added with
// BLKPG (as the node agent adds them where the kernel does not read GPT itself) outlive
// losetup --detach: the next file attached to that loop device would show them, and a node
// agent would take its blank disk for a partitioned one.
func clearPartitions(dev string) error {
	parts, _ := filepath.Glob(filepath.Join("/sys/block", filepath.Base(dev), filepath.Base(dev)+"p*"))
	if len(parts) == 0 {
		return nil
	}
	if out, err := exec.Command("partx", "--delete", dev).CombinedOutput(); err != nil {
		return fmt.Errorf("partx --delete %s (stale partitions %v): %w: %s", dev, parts, err, strings.TrimSpace(string(out)))
	}
	return nil
}
