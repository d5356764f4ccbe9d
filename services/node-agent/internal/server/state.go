package server

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sort"
)

// Phases of a prepared record. A record is written in phasePreparing before the agent touches
// the device, so that an interrupted preparation still marks the device as the agent's own and
// a retry can finish it.
const (
	phasePreparing = "preparing"
	phaseReady     = "ready"
	phaseMissing   = "missing" // reported only: never persisted, the device may come back
)

// stateVersion is bumped when the file's meaning changes. Version 2 keeps each device's
// identity and holds kernel names only as hints; version 1 files are migrated on load.
const stateVersion = 2

// record is one device the agent prepared, persisted across restarts. FSUUID is its key.
type record struct {
	// Device, XFSDevice and RawDevice are where the device and its partitions were last found:
	// hints only, re-resolved by identity on every use, because kernel names move between
	// boots and a name may meanwhile belong to another disk.
	Device     string `json:"deviceHint"`
	XFSDevice  string `json:"xfsDeviceHint"`
	RawDevice  string `json:"rawDeviceHint,omitempty"`
	XFSPercent uint32 `json:"xfsPercent,omitempty"`
	// FSUUID and DiskGUID are chosen and recorded before the agent writes them: what the agent
	// wrote is what makes a device its own.
	FSUUID   string `json:"fsUUID"`
	DiskGUID string `json:"diskGUID,omitempty"`
	// WWN and Serial are the hardware's identity where it has one; a device reporting another
	// one is never taken for this record, whatever it carries.
	WWN    string `json:"wwn,omitempty"`
	Serial string `json:"serial,omitempty"`
	// BootID and DiskSeq name the media a preparation was reserved on, so that an interrupted
	// preparation resumes on that media within the same boot even before anything was written.
	BootID       string `json:"bootID,omitempty"`
	DiskSeq      uint64 `json:"diskSeq,omitempty"`
	MountPath    string `json:"mountPath"`
	PVPath       string `json:"pvPath"`
	Claim        string `json:"claim"` // the request's pv_path: the key of idempotency
	XFSSizeBytes int64  `json:"xfsSizeBytes,omitempty"`
	RawSizeBytes int64  `json:"rawSizeBytes,omitempty"`
	// RawPartUUID is the raw partition's GPT partition GUID, read back after the split (or
	// at a report, for a record written before the agent kept it).
	RawPartUUID string `json:"rawPartUUID,omitempty"`
	Phase       string `json:"phase"`
	// Namespace is the namespace the request prepared the device for, "" when it named none.
	Namespace string `json:"namespace,omitempty"`
}

type stateFile struct {
	Version int               `json:"version"`
	Records []json.RawMessage `json:"records"`
}

// recordV1 is a record of state version 1, which named the device by its kernel name.
type recordV1 struct {
	Device       string `json:"device"`
	XFSDevice    string `json:"xfsDevice"`
	RawDevice    string `json:"rawDevice,omitempty"`
	XFSPercent   uint32 `json:"xfsPercent,omitempty"`
	FSUUID       string `json:"fsUUID"`
	DiskGUID     string `json:"diskGUID,omitempty"`
	MountPath    string `json:"mountPath"`
	PVPath       string `json:"pvPath"`
	Claim        string `json:"claim"`
	XFSSizeBytes int64  `json:"xfsSizeBytes,omitempty"`
	RawSizeBytes int64  `json:"rawSizeBytes,omitempty"`
	Phase        string `json:"phase"`
}

// migrateV1 keeps a version 1 record's identity (filesystem UUID and disk GUID, chosen before
// they were written) and demotes its names to hints. It has no boot-bound identity, so an
// interrupted version 1 preparation resumes only on a device carrying what it wrote.
func migrateV1(o recordV1) record {
	return record{
		Device: o.Device, XFSDevice: o.XFSDevice, RawDevice: o.RawDevice, XFSPercent: o.XFSPercent,
		FSUUID: o.FSUUID, DiskGUID: o.DiskGUID, MountPath: o.MountPath, PVPath: o.PVPath, Claim: o.Claim,
		XFSSizeBytes: o.XFSSizeBytes, RawSizeBytes: o.RawSizeBytes, Phase: o.Phase,
	}
}

func decodeState(b []byte) ([]record, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decoding state: %w", err)
	}
	if f.Version != 1 && f.Version != stateVersion {
		return nil, fmt.Errorf("state version %d is not one this agent reads (1 or %d)", f.Version, stateVersion)
	}
	var recs []record
	for i, raw := range f.Records {
		var r record
		switch f.Version {
		case 1:
			var o recordV1
			if err := json.Unmarshal(raw, &o); err != nil {
				return nil, fmt.Errorf("decoding state record %d: %w", i, err)
			}
			r = migrateV1(o)
		default:
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, fmt.Errorf("decoding state record %d: %w", i, err)
			}
		}
		if r.FSUUID == "" {
			return nil, fmt.Errorf("state record %d (pv_path %s) has no filesystem UUID", i, r.PVPath)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func encodeState(recs []record) ([]byte, error) {
	sorted := append([]record(nil), recs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].PVPath < sorted[j].PVPath })
	raw := make([]json.RawMessage, 0, len(sorted))
	for _, r := range sorted {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		raw = append(raw, b)
	}
	return json.MarshalIndent(stateFile{Version: stateVersion, Records: raw}, "", "  ")
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
