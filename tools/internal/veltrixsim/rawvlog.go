package veltrixsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
)

// The raw VLog devices (--raw-vlogs) hold no values here: the simulator keeps every key
// and value in its data dirs. It writes each device's first block, a header that names the
// member owning the device and counts its clean shutdowns, so that a test can tell the
// member got its own partition back after a restart, and a device bound to the wrong
// member is refused at start, as a real engine refuses a foreign value log.
const (
	rawVLogMagic     = "VELTRIXSIM-RAWVLOG v1\n"
	rawVLogBlockSize = 4096
)

type rawVLogHeader struct {
	NodeID      string `json:"node_id"`
	Checkpoints int64  `json:"checkpoints"`
}

type rawVLog struct {
	path string
	f    *os.File
	mu   sync.Mutex
	hdr  rawVLogHeader
}

// openRawVLogs opens every raw VLog read-write and claims it for node: a device holding
// another member's header is refused; a device without a header (new, or wiped) is claimed.
func openRawVLogs(paths []string, node string) ([]*rawVLog, error) {
	var out []*rawVLog
	fail := func(err error) ([]*rawVLog, error) {
		closeRawVLogs(out)
		return nil, err
	}
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return fail(fmt.Errorf("raw VLog %s: %w", p, err))
		}
		v := &rawVLog{path: p, f: f}
		out = append(out, v)
		block := make([]byte, rawVLogBlockSize)
		if _, err := f.ReadAt(block, 0); err != nil {
			return fail(fmt.Errorf("raw VLog %s: reading its header: %w", p, err))
		}
		if rest, ok := bytes.CutPrefix(block, []byte(rawVLogMagic)); ok {
			if i := bytes.IndexByte(rest, 0); i >= 0 {
				rest = rest[:i]
			}
			if err := json.Unmarshal(rest, &v.hdr); err != nil {
				return fail(fmt.Errorf("raw VLog %s: its header does not parse: %w", p, err))
			}
			if v.hdr.NodeID != node {
				return fail(fmt.Errorf("raw VLog %s belongs to member %s, not %s: refusing a value log of another member", p, v.hdr.NodeID, node))
			}
			continue
		}
		v.hdr = rawVLogHeader{NodeID: node}
		if err := v.write(); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// write puts the header in the device's first block and flushes it to the device.
func (v *rawVLog) write() error {
	body, err := json.Marshal(v.hdr)
	if err != nil {
		return err
	}
	block := make([]byte, rawVLogBlockSize)
	n := copy(block, rawVLogMagic)
	if n+len(body) > len(block) {
		return fmt.Errorf("raw VLog %s: header too long", v.path)
	}
	copy(block[n:], body)
	if _, err := v.f.WriteAt(block, 0); err != nil {
		return fmt.Errorf("raw VLog %s: writing its header: %w", v.path, err)
	}
	return v.f.Sync()
}

// checkpoint records a clean shutdown in the header.
func (v *rawVLog) checkpoint() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hdr.Checkpoints++
	return v.write()
}

func (v *rawVLog) checkpoints() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hdr.Checkpoints
}

func closeRawVLogs(vs []*rawVLog) {
	for _, v := range vs {
		_ = v.f.Close()
	}
}

// rawVLogInfo is INFO's raw_vlogs (devices open) and raw_vlog_checkpoints (the fewest
// clean shutdowns any of them recorded).
func rawVLogInfo(vs []*rawVLog) (count, checkpoints string) {
	if len(vs) == 0 {
		return "0", "0"
	}
	least := vs[0].checkpoints()
	for _, v := range vs[1:] {
		least = min(least, v.checkpoints())
	}
	return strconv.Itoa(len(vs)), strconv.FormatInt(least, 10)
}
