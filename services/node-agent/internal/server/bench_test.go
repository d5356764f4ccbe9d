package server_test

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"testing"
	"time"

	nodeagentv1 "github.com/opsuite/suite/proto/nodeagent/v1"
)

// BenchmarkGetNodeReport measures a report over TLS on loopback through the client library,
// with the auth interceptor in the path (static identities: no apiserver round trip). Run
// with -benchtime=1000x for p50/p99 over 1,000 calls.
func BenchmarkGetNodeReport(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	newLoop(b, e.root, 512*mib) // one blank device besides the machine's own
	pki, _ := newPKI(b)
	c := dialAgent(b, serveAgent(b, e.srv, pki), pki, "reader-token")
	if _, err := c.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err != nil { // connect
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := c.GetNodeReport(ctx, &nodeagentv1.GetNodeReportRequest{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "calls")
}

// BenchmarkPrepare512MiB times PrepareDisks of one blank 512 MiB device (checks, mkfs.xfs,
// two mounts, state write); BenchmarkMkfsXFS512MiB is the bare mkfs.xfs of the same device,
// for comparison.
func BenchmarkPrepare512MiB(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b)
	for i := range b.N {
		b.StopTimer()
		dev, detach := attachLoop(b, e.root, 512*mib)
		b.StartTimer()
		pv := e.pv(fmt.Sprintf("bench-%d", i))
		_, err := e.srv.PrepareDisks(ctx, prepareReq(pv, 0, dev))
		b.StopTimer()
		if err == nil {
			_, err = e.srv.ReleaseDisks(ctx, &nodeagentv1.ReleaseDisksRequest{PvPath: pv, Wipe: true})
		}
		detach()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkMkfsXFS512MiB(b *testing.B) {
	e := newEnv(b)
	for range b.N {
		b.StopTimer()
		dev, detach := attachLoop(b, e.root, 512*mib)
		b.StartTimer()
		out, err := exec.Command("mkfs.xfs", "-f", "-q", dev).CombinedOutput()
		b.StopTimer()
		detach()
		if err != nil {
			b.Fatalf("mkfs.xfs: %v: %s", err, out)
		}
		b.StartTimer()
	}
}
