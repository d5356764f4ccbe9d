package disks

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
)

// MaxDiskBytes bounds the size an agent may report for one disk (1 PiB, ten times the
// largest NVMe drive sold): a larger or negative size is a lie, not a disk.
const MaxDiskBytes int64 = 1 << 50

// maxIdentityLen bounds the WWN and serial number an agent reports (they become annotations).
const maxIdentityLen = 256

// BadReply is an agent's answer the operator refuses to turn into PersistentVolumes: the agent
// is privileged on its node, not over the cluster, so a compromised or broken one must not
// make a volume name another cluster's data, a path outside its PV root, or a device outside
// /dev. Message is stable and never carries the value the agent sent (it goes to conditions
// and events, which a lying agent must not be able to write into); Value is the offending
// value, for the log only.
type BadReply struct {
	Message string
	Value   string
}

func (e *BadReply) Error() string { return e.Message }

// CheckReply validates the disks a node's agent answered to req, before any of it becomes a
// PersistentVolume: exactly as many disks as asked; each a canonical filesystem UUID, a clean
// PV path at or directly below the requested one, positive sizes within MaxDiskBytes, a raw
// partition (a clean path under /dev and, when reported, a canonical partition GUID) exactly
// when a split was asked; no identity or path reported twice. It returns nil or a *BadReply.
// A disk that is not ready yet is not a lie: FromAgent reports it after this check.
func CheckReply(req *nodeagentv1.PrepareDisksRequest, prepared []*nodeagentv1.PreparedDisk) error {
	want := int(req.GetSelector().GetCount())
	if n := len(req.GetSelector().GetPaths()); n > 0 {
		want = n
	}
	if len(prepared) != want {
		return &BadReply{Message: fmt.Sprintf("the agent answered %d disks for %d requested", len(prepared), want), Value: fmt.Sprint(len(prepared))}
	}
	seen := map[string]bool{}
	for i, d := range prepared {
		bad := func(what, value string) error {
			return &BadReply{Message: fmt.Sprintf("disk %d of the reply: %s", i+1, what), Value: value}
		}
		if !CanonicalUUID(d.GetFilesystemUuid()) {
			return bad("filesystem UUID is not a canonical UUID", d.GetFilesystemUuid())
		}
		switch d.GetState() {
		case "ready", "preparing", "missing":
		default:
			return bad("unknown state", d.GetState())
		}
		if !cleanAbs(d.GetPvPath()) || (d.GetPvPath() != req.GetPvPath() && path.Dir(d.GetPvPath()) != req.GetPvPath()) {
			return bad("PV path is not the requested "+req.GetPvPath()+" nor directly below it", d.GetPvPath())
		}
		if s := d.GetXfsSizeBytes(); s <= 0 || s > MaxDiskBytes {
			return bad(fmt.Sprintf("XFS size out of range (1 byte to %d TiB)", MaxDiskBytes>>40), fmt.Sprint(s))
		}
		if s := d.GetRawSizeBytes(); s < 0 || s > MaxDiskBytes-d.GetXfsSizeBytes() {
			return bad(fmt.Sprintf("raw partition size out of range (0 to %d TiB with the XFS size)", MaxDiskBytes>>40), fmt.Sprint(s))
		}
		for _, dev := range []struct{ name, value string }{{"device", d.GetDevice()}, {"XFS device", d.GetXfsDevice()}, {"raw device", d.GetRawDevice()}} {
			if dev.value != "" && !underDev(dev.value) {
				return bad(dev.name+" path is not a clean path under /dev", dev.value)
			}
		}
		split := req.GetXfsPercent() != 0
		switch {
		case split && (d.GetRawDevice() == "" || d.GetRawSizeBytes() == 0):
			return bad("no raw partition although a split was requested", d.GetRawDevice())
		case !split && (d.GetRawDevice() != "" || d.GetRawSizeBytes() != 0 || d.GetRawPartitionUuid() != ""):
			return bad("a raw partition although no split was requested", d.GetRawDevice())
		}
		for _, id := range []struct{ name, value string }{{"raw partition GUID", d.GetRawPartitionUuid()}, {"disk GUID", d.GetDiskGuid()}} {
			if id.value != "" && !CanonicalUUID(id.value) {
				return bad(id.name+" is not a canonical UUID", id.value)
			}
		}
		for _, id := range []struct{ name, value string }{{"WWN", d.GetWwn()}, {"serial", d.GetSerial()}} {
			if !printable(id.value) {
				return bad(fmt.Sprintf("%s is not printable text of at most %d bytes", id.name, maxIdentityLen), id.value)
			}
		}
		for _, key := range []struct{ name, value string }{
			{"filesystem UUID", "fs:" + d.GetFilesystemUuid()}, {"PV path", "pv:" + d.GetPvPath()},
			{"raw partition", "raw:" + d.GetRawDevice()}, {"raw partition GUID", "guid:" + d.GetRawPartitionUuid()},
		} {
			if strings.HasSuffix(key.value, ":") {
				continue
			}
			if seen[key.value] {
				return bad(key.name+" reported twice", key.value)
			}
			seen[key.value] = true
		}
	}
	return nil
}

// CanonicalUUID reports whether s is a UUID in its canonical text form, lowercase
// (8-4-4-4-12 hex digits), as the agent writes filesystem UUIDs and udev names partition GUIDs.
// PersistentVolume names and /dev/disk/by-partuuid paths are built from these.
func CanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// cleanAbs: an absolute path with no "..", "." or doubled slash, not "/".
func cleanAbs(p string) bool {
	return strings.HasPrefix(p, "/") && p != "/" && path.Clean(p) == p
}

// underDev: a clean absolute path below /dev.
func underDev(p string) bool {
	return cleanAbs(p) && strings.HasPrefix(p, "/dev/")
}

func printable(s string) bool {
	if len(s) > maxIdentityLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
