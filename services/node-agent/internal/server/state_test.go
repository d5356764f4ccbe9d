package server

import (
	"strings"
	"testing"
)

func TestDecodeStateMigratesVersion1(t *testing.T) {
	const v1 = `{"version": 1, "records": [{"device": "/dev/nvme1n1", "xfsDevice": "/dev/nvme1n1p1",
		"rawDevice": "/dev/nvme1n1p2", "xfsPercent": 20, "fsUUID": "u-1", "diskGUID": "g-1",
		"mountPath": "/var/lib/a/mounts/u-1", "pvPath": "/mnt/pv/v", "claim": "/mnt/pv/v",
		"xfsSizeBytes": 10, "rawSizeBytes": 40, "phase": "ready"}]}`
	recs, err := decodeState([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	want := record{
		Device: "/dev/nvme1n1", XFSDevice: "/dev/nvme1n1p1", RawDevice: "/dev/nvme1n1p2", XFSPercent: 20,
		FSUUID: "u-1", DiskGUID: "g-1", MountPath: "/var/lib/a/mounts/u-1", PVPath: "/mnt/pv/v", Claim: "/mnt/pv/v",
		XFSSizeBytes: 10, RawSizeBytes: 40, Phase: phaseReady,
	}
	if len(recs) != 1 || recs[0] != want {
		t.Fatalf("migrated %+v, want %+v", recs, want)
	}
	// Written back as version 2, it reads back the same.
	b, err := encodeState(recs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version": 2`) || !strings.Contains(string(b), `"deviceHint": "/dev/nvme1n1"`) {
		t.Fatalf("encoded %s", b)
	}
	again, err := decodeState(b)
	if err != nil || len(again) != 1 || again[0] != want {
		t.Fatalf("round trip %+v, %v", again, err)
	}
}

func TestDecodeStateRefuses(t *testing.T) {
	for in, want := range map[string]string{
		`{"version": 3, "records": []}`:                         "state version 3",
		`{"version": 2, "records": [{"deviceHint": "/dev/x"}]}`: "no filesystem UUID",
		`{"version": 2`: "decoding state",
	} {
		if _, err := decodeState([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
