package server

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxDevicesPerRequest bounds a selection so one request cannot ask for unbounded work.
const maxDevicesPerRequest = 64

// knownSysctls are the sysctls the agent reports and may raise, with their default minimums
// (0: none unless the caller asks). Anything else is refused: the agent is not a general
// sysctl writer.
var knownSysctls = map[string]int64{
	"vm.max_map_count":              262144,
	"fs.aio-max-nr":                 0,
	"fs.file-max":                   0,
	"fs.inotify.max_user_instances": 0,
	"fs.inotify.max_user_watches":   0,
}

// SysctlMaximums bound what a caller may ask the agent to raise a sysctl to: each raise
// costs kernel memory on the whole node (mappings, AIO contexts, inotify watches of up to
// about 1 KiB each), so a caller, or a typo, cannot tune a shared node without limit. A value
// the node's owner set higher is reported, never lowered. Defensible ceilings: 16 times the
// usual database minimum of vm.max_map_count (262144), ScyllaDB-sized AIO, and inotify
// limits well above what kubelets and IDE-style watchers use.
var SysctlMaximums = map[string]int64{
	"vm.max_map_count":              4194304,
	"fs.aio-max-nr":                 33554432,
	"fs.file-max":                   1 << 40,
	"fs.inotify.max_user_instances": 65536,
	"fs.inotify.max_user_watches":   1048576,
}

// namespacedSysctls are prefixes of sysctls the kernel keeps per network or IPC namespace:
// writing one from the agent's pod would change only the agent's own namespace, and reading
// it would report the agent's value, not the workload's.
var namespacedSysctls = []string{"net.", "kernel.shm", "kernel.msg", "kernel.sem", "fs.mqueue."}

// namespaced says whether a sysctl is per network or IPC namespace.
func namespaced(name string) bool {
	for _, p := range namespacedSysctls {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

var modelPattern = regexp.MustCompile(`^[\x20-\x7e]{0,128}$`)

// validateDevicePath accepts absolute, clean paths under /dev.
func validateDevicePath(p string) error {
	if err := validateAbsPath(p); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/dev/") {
		return fmt.Errorf("device path %q is not under /dev", p)
	}
	return nil
}

// validateAbsPath accepts absolute paths with no "..", no empty or "." elements.
func validateAbsPath(p string) error {
	if p == "" {
		return fmt.Errorf("path is empty")
	}
	if len(p) > 4096 || strings.ContainsRune(p, 0) {
		return fmt.Errorf("path %q is not a valid path", p)
	}
	if !path.IsAbs(p) {
		return fmt.Errorf("path %q is not absolute", p)
	}
	for _, el := range strings.Split(p[1:], "/") {
		if el == ".." {
			return fmt.Errorf("path %q contains \"..\"", p)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("path %q is not clean", p)
	}
	return nil
}

// validatePVPath accepts a path strictly under the PV root.
func validatePVPath(p, pvRoot string) error {
	if err := validateAbsPath(p); err != nil {
		return err
	}
	if p == pvRoot || !strings.HasPrefix(p, strings.TrimSuffix(pvRoot, "/")+"/") {
		return fmt.Errorf("pv_path %q is not under the PV root %q", p, pvRoot)
	}
	return nil
}

// validatePrepare checks a PrepareDisks request without looking at the host.
// namespacePattern is a Kubernetes namespace name (an RFC 1123 label).
var namespacePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func validateNamespace(ns string) error {
	if ns != "" && !namespacePattern.MatchString(ns) {
		return invalid("namespace %q is not a Kubernetes namespace name", ns)
	}
	return nil
}

func validatePrepare(req *nodeagentv1.PrepareDisksRequest, pvRoot string) error {
	if err := validateNamespace(req.GetNamespace()); err != nil {
		return err
	}
	sel := req.GetSelector()
	if sel == nil {
		return invalid("selector is required")
	}
	hasFilters := sel.GetModel() != "" || sel.GetMinSizeBytes() != 0 || sel.GetMaxSizeBytes() != 0 || sel.GetNvmeOnly()
	switch {
	case len(sel.GetPaths()) > 0:
		if hasFilters || sel.GetCount() != 0 {
			return invalid("selector takes either paths or filters with a count, not both")
		}
		if len(sel.GetPaths()) > maxDevicesPerRequest {
			return invalid("selector names more than %d devices", maxDevicesPerRequest)
		}
		seen := map[string]bool{}
		for _, p := range sel.GetPaths() {
			if err := validateDevicePath(p); err != nil {
				return invalid("%v", err)
			}
			if seen[p] {
				return invalid("device %q is selected twice", p)
			}
			seen[p] = true
		}
	case sel.GetCount() == 0:
		return invalid("selector is empty: give paths, or filters with a count")
	default:
		if sel.GetCount() > maxDevicesPerRequest {
			return invalid("count %d exceeds %d", sel.GetCount(), maxDevicesPerRequest)
		}
		if sel.GetMinSizeBytes() < 0 || sel.GetMaxSizeBytes() < 0 {
			return invalid("sizes must not be negative")
		}
		if sel.GetMaxSizeBytes() != 0 && sel.GetMaxSizeBytes() < sel.GetMinSizeBytes() {
			return invalid("max_size_bytes is below min_size_bytes")
		}
		if !modelPattern.MatchString(sel.GetModel()) {
			return invalid("model is not printable ASCII of at most 128 characters")
		}
	}
	if p := req.GetXfsPercent(); p != 0 && (p < 1 || p > 99) {
		return invalid("xfs_percent %d is outside 1-99 (0 means no split)", p)
	}
	if err := validatePVPath(req.GetPvPath(), pvRoot); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// validateRelease checks a ReleaseDisks request without looking at the host.
func validateRelease(req *nodeagentv1.ReleaseDisksRequest, pvRoot string) error {
	if err := validateNamespace(req.GetNamespace()); err != nil {
		return err
	}
	if m := req.GetWipeMethod(); m != nodeagentv1.WipeMethod_WIPE_METHOD_UNSPECIFIED {
		if !req.GetWipe() {
			return invalid("wipe_method is set without wipe")
		}
		if _, known := nodeagentv1.WipeMethod_name[int32(m)]; !known {
			return invalid("wipe_method %d is unknown", m)
		}
	}
	switch {
	case len(req.GetDevices()) > 0 && req.GetPvPath() != "":
		return invalid("give devices or pv_path, not both")
	case len(req.GetDevices()) > 0:
		if len(req.GetDevices()) > maxDevicesPerRequest {
			return invalid("more than %d devices", maxDevicesPerRequest)
		}
		for _, p := range req.GetDevices() {
			if err := validateDevicePath(p); err != nil {
				return invalid("%v", err)
			}
		}
	case req.GetPvPath() != "":
		if err := validatePVPath(req.GetPvPath(), pvRoot); err != nil {
			return invalid("%v", err)
		}
	default:
		return invalid("selection is empty: give devices or pv_path")
	}
	return nil
}

// validateSysctl checks an EnsureSysctl request and returns the minimum to apply.
func validateSysctl(req *nodeagentv1.EnsureSysctlRequest) (int64, error) {
	if namespaced(req.GetName()) {
		return 0, invalid("sysctl %q is namespaced: the node agent can neither read nor set the workload's value; set it in the pod's securityContext.sysctls", req.GetName())
	}
	def, ok := knownSysctls[req.GetName()]
	if !ok {
		return 0, invalid("sysctl %q is not one the agent manages", req.GetName())
	}
	min := req.GetMinimum()
	switch {
	case min < 0:
		return 0, invalid("minimum %d is negative", min)
	case min == 0 && def == 0:
		return 0, invalid("sysctl %q has no default minimum: give one", req.GetName())
	case min == 0:
		min = def
	}
	if max := SysctlMaximums[req.GetName()]; min > max {
		return 0, invalid("minimum %d for sysctl %q is above the agent's maximum %d", min, req.GetName(), max)
	}
	return min, nil
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}
