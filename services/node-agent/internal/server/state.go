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

// stateVersion is bumped when the file's meaning changes.
const stateVersion = 1

// record is one device the agent prepared, persisted across restarts.
type record struct {
	Device     string `json:"device"`
	XFSDevice  string `json:"xfsDevice"`
	RawDevice  string `json:"rawDevice,omitempty"`
	XFSPercent uint32 `json:"xfsPercent,omitempty"`
	// FSUUID and DiskGUID are chosen by the agent before it writes them, so a device can be
	// recognised as its own even when its name changed between boots.
	FSUUID       string `json:"fsUUID"`
	DiskGUID     string `json:"diskGUID,omitempty"`
	MountPath    string `json:"mountPath"`
	PVPath       string `json:"pvPath"`
	Claim        string `json:"claim"` // the request's pv_path: the key of idempotency
	XFSSizeBytes int64  `json:"xfsSizeBytes,omitempty"`
	RawSizeBytes int64  `json:"rawSizeBytes,omitempty"`
	Phase        string `json:"phase"`
}

type stateFile struct {
	Version int      `json:"version"`
	Records []record `json:"records"`
}

func decodeState(b []byte) ([]record, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decoding state: %w", err)
	}
	if f.Version != stateVersion {
		return nil, fmt.Errorf("state version %d is not %d", f.Version, stateVersion)
	}
	return f.Records, nil
}

func encodeState(recs []record) ([]byte, error) {
	sorted := append([]record(nil), recs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Device < sorted[j].Device })
	return json.MarshalIndent(stateFile{Version: stateVersion, Records: sorted}, "", "  ")
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
