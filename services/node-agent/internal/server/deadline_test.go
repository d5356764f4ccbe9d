package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
	"github.com/opsuite/suite/services/node-agent/internal/host"
	"google.golang.org/grpc/codes"
)

// hungProbe is the node's hardware with one disk whose probe hangs, as blkid does on a disk
// that stopped answering; like blkid under exec.CommandContext, it ends with the call.
type hungProbe struct {
	*host.Host
	dev string
}

func (h hungProbe) Probe(ctx context.Context, dev string) (host.Signature, error) {
	if dev == h.dev {
		<-ctx.Done()
		return host.Signature{}, ctx.Err()
	}
	return h.Host.Probe(ctx, dev)
}

// TestHungDiskStallsNothingElse is issue 19 item 7: a report returns the other disks, with
// the hung one's error, within the call's deadline; a call queued behind the hung disk's lock
// gives up at its own deadline; a call on another disk goes through.
func TestHungDiskStallsNothingElse(t *testing.T) {
	e := newEnv(t)
	hung, good := newLoop(t, e.root, 512*mib), newLoop(t, e.root, 512*mib)
	srv := newServerWithHost(t, e, hungProbe{Host: e.host, dev: hung})

	// The deadlines leave room for blkid on a loaded machine (the good disk's probe took
	// over 1.8 s in a CI run at load 11 on two cores); what is tested is that the report
	// returns by its deadline, not how fast.
	const reportDeadline = 8 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), reportDeadline)
	defer cancel()
	start := time.Now()
	rep, err := srv.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{})
	if err != nil {
		t.Fatalf("report with a hung disk: %v", err)
	}
	if took := time.Since(start); took > reportDeadline {
		t.Fatalf("the report took %v, past its deadline", took)
	}
	var sawHung, sawGood bool
	for _, d := range rep.Devices {
		switch d.Path {
		case hung:
			sawHung = true
			if d.Error == "" || d.Eligible || !strings.Contains(d.IneligibleReason, "could not be observed") {
				t.Fatalf("hung disk reported as %+v", d)
			}
		case good:
			sawGood = true
			if d.Error != "" || !d.Eligible {
				t.Fatalf("good disk reported as %+v", d)
			}
		}
	}
	if !sawHung || !sawGood {
		t.Fatalf("report lacks a disk: hung %v, good %v", sawHung, sawGood)
	}

	// A PrepareDisks stuck on the hung disk holds its device lock until its deadline; a second
	// one queued behind it returns at its own, shorter deadline.
	long, cancelLong := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLong()
	done := make(chan error, 1)
	go func() {
		_, err := srv.PrepareDisks(long, prepareReq(e.pv("a"), 0, hung))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	start = time.Now()
	_, err = srv.PrepareDisks(short, prepareReq(e.pv("b"), 0, hung))
	wantCode(t, err, codes.DeadlineExceeded)
	// Queued behind the lock, it must give up at its own deadline, not the first call's.
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the queued call took %v: it waited for the lock holder's deadline", took)
	}
	if _, err := srv.PrepareDisks(context.Background(), prepareReq(e.pv("c"), 0, good)); err != nil {
		t.Fatalf("a call on another disk: %v", err)
	}
	wantCode(t, <-done, codes.DeadlineExceeded)
}
