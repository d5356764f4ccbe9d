package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestOfferFlags: the three ways to offer disks parse as lists and are validated; none is the
// default, so nothing is offered unless an administrator says so.
func TestOfferFlags(t *testing.T) {
	base := []string{"--tls-cert=/c", "--tls-key=/k", "--node-name=n"}
	o, err := parseOptions(base, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.host.DeviceAllow)+len(o.host.DeviceAllowByID)+len(o.host.DeviceAllowModel) != 0 {
		t.Fatalf("something is offered by default: %+v", o.host)
	}
	o, err = parseOptions(append(base,
		"--device-allow-by-id", "/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*",
		"--device-allow-model", "Amazon EC2 NVMe Instance Storage, nvme_card,Microsoft NVMe Direct Disk*",
		"--proc-root=/host/proc", "--kubelet-root=/host/proc/1/root/var/lib/kubelet"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.host.DeviceAllowModel, "|"); got != "Amazon EC2 NVMe Instance Storage|nvme_card|Microsoft NVMe Direct Disk*" {
		t.Errorf("--device-allow-model parsed to %q", got)
	}
	if len(o.host.DeviceAllowByID) != 1 || o.host.ProcRoot != "/host/proc" || o.host.KubeletRoot != "/host/proc/1/root/var/lib/kubelet" {
		t.Errorf("parsed %+v", o.host)
	}
	for _, bad := range [][]string{{"--device-allow-by-id", "/dev/nvme0n1"}, {"--device-allow-model", "["}} {
		if _, err := parseOptions(append(base, bad...), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
