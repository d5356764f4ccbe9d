package server

import (
	"strings"
	"testing"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const testPVRoot = "/mnt/pv"

func sel(paths ...string) *nodeagentv1.DeviceSelector {
	return &nodeagentv1.DeviceSelector{Paths: paths}
}

func TestValidatePrepare(t *testing.T) {
	cases := []struct {
		name string
		req  *nodeagentv1.PrepareDisksRequest
		want string // "" when valid
	}{
		{"paths", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/nvme0n1"), PvPath: "/mnt/pv/a"}, ""},
		{"filters", &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{NvmeOnly: true, Count: 2}, XfsPercent: 20, PvPath: "/mnt/pv/a"}, ""},
		{"no selector", &nodeagentv1.PrepareDisksRequest{PvPath: "/mnt/pv/a"}, "selector is required"},
		{"empty selector", &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{}, PvPath: "/mnt/pv/a"}, "selector is empty"},
		{"filters without count", &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Model: "X"}, PvPath: "/mnt/pv/a"}, "selector is empty"},
		{"paths and filters", &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Paths: []string{"/dev/sda"}, Count: 1}, PvPath: "/mnt/pv/a"}, "not both"},
		{"relative device", &nodeagentv1.PrepareDisksRequest{Selector: sel("dev/sda"), PvPath: "/mnt/pv/a"}, "not absolute"},
		{"device dotdot", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/../etc/passwd"), PvPath: "/mnt/pv/a"}, `".."`},
		{"device outside /dev", &nodeagentv1.PrepareDisksRequest{Selector: sel("/etc/passwd"), PvPath: "/mnt/pv/a"}, "not under /dev"},
		{"duplicate device", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/sda", "/dev/sda"), PvPath: "/mnt/pv/a"}, "twice"},
		{"relative pv", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/sda"), PvPath: "mnt/pv/a"}, "not absolute"},
		{"pv dotdot", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/sda"), PvPath: "/mnt/pv/../etc"}, `".."`},
		{"pv outside root", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/sda"), PvPath: "/mnt/pvx/a"}, "not under the PV root"},
		{"pv is root", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/sda"), PvPath: "/mnt/pv"}, "not under the PV root"},
		{"pv unclean", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/sda"), PvPath: "/mnt/pv//a"}, "not clean"},
		{"percent 100", &nodeagentv1.PrepareDisksRequest{Selector: sel("/dev/sda"), XfsPercent: 100, PvPath: "/mnt/pv/a"}, "outside 1-99"},
		{"count too large", &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Count: 1000}, PvPath: "/mnt/pv/a"}, "exceeds"},
		{"max below min", &nodeagentv1.PrepareDisksRequest{Selector: &nodeagentv1.DeviceSelector{Count: 1, MinSizeBytes: 10, MaxSizeBytes: 5}, PvPath: "/mnt/pv/a"}, "below"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := validatePrepare(c.req, testPVRoot)
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, c.want)
			}
		})
	}
}

func TestValidateRelease(t *testing.T) {
	for _, req := range []*nodeagentv1.ReleaseDisksRequest{
		{},
		{Devices: []string{"/dev/sda"}, PvPath: "/mnt/pv/a"},
		{Devices: []string{"sda"}},
		{PvPath: "/elsewhere"},
	} {
		if err := validateRelease(req, testPVRoot); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: got %v, want InvalidArgument", req, err)
		}
	}
	if err := validateRelease(&nodeagentv1.ReleaseDisksRequest{PvPath: "/mnt/pv/a", Wipe: true}, testPVRoot); err != nil {
		t.Error(err)
	}
}

// FuzzValidatePrepare checks that validation never panics, that whatever it accepts is safe to
// act on (absolute, clean, no "..", devices under /dev, PV paths strictly under the root,
// percent 0-99), and that it answers only InvalidArgument.
func FuzzValidatePrepare(f *testing.F) {
	f.Add("/dev/nvme0n1", "", "/mnt/pv/a", uint32(0), uint32(0), int64(0), int64(0))
	f.Add("", "Samsung", "/mnt/pv/a/b", uint32(20), uint32(2), int64(1<<30), int64(0))
	f.Add("/dev/../etc", "", "/mnt/pv/../x", uint32(100), uint32(0), int64(0), int64(0))
	f.Add("dev/sda", "\x00", "mnt/pv", uint32(1), uint32(65), int64(-1), int64(5))
	f.Add("/dev/sda/", "", "/mnt/pv/./a", uint32(99), uint32(0), int64(0), int64(0))
	f.Add("/dev//sda", "", "/mnt/pvx", uint32(50), uint32(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, dev, model, pv string, pct, count uint32, minSize, maxSize int64) {
		req := &nodeagentv1.PrepareDisksRequest{
			Selector:   &nodeagentv1.DeviceSelector{Model: model, Count: count, MinSizeBytes: minSize, MaxSizeBytes: maxSize},
			XfsPercent: pct, PvPath: pv,
		}
		if dev != "" {
			req.Selector.Paths = []string{dev}
		}
		err := validatePrepare(req, testPVRoot)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("code %v, want InvalidArgument", status.Code(err))
			}
			return
		}
		if !strings.HasPrefix(pv, testPVRoot+"/") || strings.Contains(pv, "..") && hasDotDot(pv) || strings.Contains(pv, "//") {
			t.Fatalf("accepted pv_path %q", pv)
		}
		if dev != "" && (!strings.HasPrefix(dev, "/dev/") || hasDotDot(dev) || strings.HasSuffix(dev, "/")) {
			t.Fatalf("accepted device %q", dev)
		}
		if pct > 99 {
			t.Fatalf("accepted percent %d", pct)
		}
		if dev == "" && count == 0 {
			t.Fatal("accepted an empty selection")
		}
	})
}

func hasDotDot(p string) bool {
	for _, el := range strings.Split(p, "/") {
		if el == ".." || el == "." {
			return true
		}
	}
	return false
}

func TestKindIneligible(t *testing.T) {
	for _, c := range []struct {
		name      string
		allowLoop bool
		want      string // "" when a candidate
	}{
		{"nvme0n1", false, ""},
		{"nvme12n3", false, ""},
		{"sda", false, ""},
		{"sdab", false, ""},
		{"vdb", false, ""},
		{"xvdf", false, ""},
		{"loop7", true, ""},
		{"loop7", false, "loop device"},
		{"nvme0n1p1", false, "not a whole disk"},
		{"nvme0c0n1", false, "not a whole disk"},
		{"sda1", false, "not a whole disk"},
		{"vdb2", false, "not a whole disk"},
		{"dm-0", false, "not a whole disk"},
		{"md0", false, "not a whole disk"},
		{"md127", false, "not a whole disk"},
		{"nbd0", false, "not a whole disk"},
		{"rbd0", false, "not a whole disk"},
		{"zram0", false, "not a whole disk"},
		{"ram0", false, "not a whole disk"},
		{"sr0", false, "not a whole disk"},
		{"mmcblk0", false, "not a whole disk"},
		{"loop7p1", true, "not a whole disk"},
	} {
		got := kindIneligible(host.KindOf(c.name), c.allowLoop)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s (allowLoop %v): %q, want %q", c.name, c.allowLoop, got, c.want)
		}
	}
}

func TestNamespacedSysctls(t *testing.T) {
	for name, want := range map[string]bool{
		"net.core.somaxconn": true, "net.ipv4.ip_local_port_range": true, "kernel.shmmax": true,
		"kernel.shm_rmid_forced": true, "kernel.msgmax": true, "kernel.sem": true, "fs.mqueue.queues_max": true,
		"vm.max_map_count": false, "fs.file-max": false, "fs.aio-max-nr": false, "kernel.pid_max": false,
	} {
		if got := namespaced(name); got != want {
			t.Errorf("namespaced(%s) = %v, want %v", name, got, want)
		}
	}
}
