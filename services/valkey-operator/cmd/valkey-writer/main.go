// Command valkey-writer is the data-safety check of the end-to-end tests (test support,
// never shipped): it writes keys <prefix><n> with values unique to the run to a Valkey
// cluster in cluster mode (following MOVED and ASK), one at a time at a steady rate,
// appends every acknowledged write to a file, and counts the refused ones and the longest
// window in which writes were refused. On SIGTERM or SIGINT it stops writing, reads every
// acknowledged key back and prints a JSON summary on stdout:
//
//	{"acked":N,"lost":0,"unreadable":0,"refused":R,"longestRefusalSeconds":S,...}
//
// Usage:
//
//	VALKEY_PASSWORD=... valkey-writer run -addrs 127.1.0.5:6379,127.1.0.6:6379 -user u -acked /tmp/acked
//	VALKEY_PASSWORD=... valkey-writer verify -addrs ... -user u -acked /tmp/acked
//
// Exit status: 0 when every acknowledged key read back with its value, 1 when any was
// lost or could not be read, 2 on bad usage or when the cluster was never reachable.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opsuite/suite/services/valkey-operator/internal/valkey"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type config struct {
	addrs       []string
	seedsFile   string
	user        string
	password    string
	ackedPath   string
	prefix      string
	rate        float64
	timeout     time.Duration
	redialAfter time.Duration
	verifyFor   time.Duration
}

// run writes until stop ends (mode run), then reads every acknowledged key back.
func run(stop context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "run" && args[0] != "verify") {
		fmt.Fprintln(stderr, "usage: valkey-writer run|verify -addrs host:port[,...] [-seeds-file F] [-user U] -acked FILE (password in $VALKEY_PASSWORD)")
		return 2
	}
	mode := args[0]
	fs := flag.NewFlagSet("valkey-writer "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	addrs := fs.String("addrs", "", "comma-separated seed addresses (host:port)")
	fs.StringVar(&c.seedsFile, "seeds-file", "", "file of seed addresses (one per line or comma-separated), re-read whenever the writer reconnects; wins over -addrs when it lists any")
	fs.StringVar(&c.user, "user", "", "ACL user to log in as (password in $VALKEY_PASSWORD)")
	fs.StringVar(&c.ackedPath, "acked", "", "file of acknowledged writes (\"key value\" lines): appended by run, read by verify")
	fs.StringVar(&c.prefix, "prefix", "k:", "key prefix; keys are <prefix><n>")
	fs.Float64Var(&c.rate, "rate", 100, "writes per second")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Second, "deadline of one write or read")
	fs.DurationVar(&c.redialAfter, "redial-after", 10*time.Second, "reconnect from the seeds when no write succeeded for this long")
	fs.DurationVar(&c.verifyFor, "verify-timeout", 2*time.Minute, "how long reading every key back may take")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	c.addrs = splitAddrs(*addrs)
	c.password = os.Getenv("VALKEY_PASSWORD")
	if c.ackedPath == "" || (len(c.addrs) == 0 && c.seedsFile == "") || c.rate <= 0 {
		fmt.Fprintln(stderr, "valkey-writer: -acked, a positive -rate and -addrs or -seeds-file are required")
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, time.Now().UTC().Format("15:04:05.000")+" valkey-writer: "+format+"\n", a...)
	}

	var sum Summary
	if mode == "run" {
		w, err := newWriter(c, logf)
		if err != nil {
			logf("%v", err)
			return 2
		}
		if err := w.run(stop); err != nil {
			logf("%v", err)
			return 2
		}
		sum = w.summary()
	}
	entries, err := readAcked(c.ackedPath)
	if err != nil {
		logf("%v", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.verifyFor)
	defer cancel()
	cl, err := dialUntil(ctx, c, logf)
	if err != nil {
		logf("verify: %v", err)
		return 2
	}
	v := verify(ctx, cl, entries, c.timeout)
	cl.Close()
	sum.Acked, sum.Lost, sum.Unreadable, sum.LostKeys = len(entries), v.lost, v.unreadable, v.lostKeys
	sum.VerifySeconds = v.took.Seconds()
	out, _ := json.Marshal(sum)
	fmt.Fprintln(stdout, string(out))
	logf("acked %d, lost %d, unreadable %d, refused %d, longest refusal %.1fs", sum.Acked, sum.Lost, sum.Unreadable, sum.Refused, sum.LongestRefusalSeconds)
	if sum.Lost > 0 || sum.Unreadable > 0 {
		return 1
	}
	return 0
}

// Summary is the JSON line the writer prints when it is done.
type Summary struct {
	Acked      int `json:"acked"`
	Lost       int `json:"lost"`
	Unreadable int `json:"unreadable"`
	// Refused counts write attempts that failed (errors and timeouts): their outcome is
	// unknown, so they are neither acknowledged nor checked.
	Refused               int     `json:"refused"`
	LongestRefusalSeconds float64 `json:"longestRefusalSeconds"`
	// LongestOutageSeconds is the longest span in which writes kept being refused, with
	// less than outageGap between refusals: writes to the other shards' keys may succeed
	// meanwhile, so it is how long one shard's keys were unavailable.
	LongestOutageSeconds float64        `json:"longestOutageSeconds"`
	WriteSeconds         float64        `json:"writeSeconds,omitempty"`
	VerifySeconds        float64        `json:"verifySeconds"`
	Redials              int            `json:"redials,omitempty"`
	RefusalWindows       []Window       `json:"refusalWindows,omitempty"`
	Outages              []Outage       `json:"outages,omitempty"`
	Errors               map[string]int `json:"errors,omitempty"`
	LostKeys             []string       `json:"lostKeys,omitempty"`
}

// Span is a stretch of the run.
type Span struct {
	StartSeconds float64 `json:"startSeconds"` // since the writer started
	Seconds      float64 `json:"seconds"`
}

func (s *Span) span() *Span { return s }

// Window is one stretch of consecutive refused writes, from the first refused attempt to
// the next acknowledged one (or the end of the run).
type Window struct {
	Span
	Refused    int    `json:"refused"`
	FirstError string `json:"firstError"`
}

// Outage is a span of refused writes with less than outageGap between one refusal and
// the next, from the start of the first refused attempt to the end of the last.
type Outage struct {
	Span
	Refused int `json:"refused"`
	Acked   int `json:"acked"` // writes acknowledged within the span (other shards)
}

// outageGap separates two outages: a second without a refused write.
const outageGap = time.Second

// maxWindows is how many of the longest windows the summary lists.
const maxWindows = 10

type writer struct {
	c     config
	logf  func(string, ...any)
	runID string
	acked *os.File
	buf   *bufio.Writer

	begin       time.Time
	ackedN      int
	refused     int
	redials     int
	windows     []Window
	open        *Window // the refusal window in progress
	openAt      time.Time
	outages     []Outage
	outage      *Outage // the outage in progress
	outageAt    time.Time
	lastRefusal time.Time
	lastAck     time.Time
	errs        map[string]int
	writeFinish time.Time
}

func newWriter(c config, logf func(string, ...any)) (*writer, error) {
	f, err := os.OpenFile(c.ackedPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	return &writer{c: c, logf: logf, runID: hex.EncodeToString(id), acked: f, buf: bufio.NewWriter(f), errs: map[string]int{}}, nil
}

// run writes until ctx ends. Only a cluster it never reached is an error: refused writes
// are what it measures.
func (w *writer) run(ctx context.Context) error {
	defer w.acked.Close()
	cl, err := dialUntil(ctx, w.c, w.logf)
	if err != nil {
		return err
	}
	defer func() { cl.Close() }()
	w.begin = time.Now()
	w.lastAck = w.begin
	tick := time.NewTicker(time.Duration(float64(time.Second) / w.c.rate))
	defer tick.Stop()
	report := time.NewTicker(5 * time.Second)
	defer report.Stop()
	flush := time.NewTicker(100 * time.Millisecond)
	defer flush.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			w.finish()
			return w.buf.Flush()
		case <-report.C:
			w.logf("%s: acked %d, refused %d%s", time.Since(w.begin).Round(time.Second), w.ackedN, w.refused, w.refusingNote())
			continue
		case <-flush.C:
			if err := w.buf.Flush(); err != nil {
				return err
			}
			continue
		case <-tick.C:
		}
		key, value := fmt.Sprintf("%s%d", w.c.prefix, n), fmt.Sprintf("%s-%d", w.runID, n)
		n++
		start := time.Now()
		opCtx, cancel := context.WithTimeout(ctx, w.c.timeout)
		err := cl.Set(opCtx, key, value)
		cancel()
		if ctx.Err() != nil && err != nil {
			// Cut short by the stop: neither acknowledged nor refused by the cluster.
			continue
		}
		if err == nil {
			if err := w.ack(key, value, time.Now()); err != nil {
				return err
			}
			continue
		}
		w.refuse(err, start, time.Now())
		if w.c.redialAfter > 0 && time.Since(w.lastAck) > w.c.redialAfter && time.Since(w.openAt) > w.c.redialAfter {
			// Every member the client knew may have gone (all pods replaced): start over
			// from the seeds, which the caller keeps current.
			w.logf("no write acknowledged for %s: reconnecting from the seeds", time.Since(w.lastAck).Round(time.Second))
			ncl, err := dial(w.c)
			w.openAt = time.Now()
			if err != nil {
				w.logf("reconnect: %v", err)
				continue
			}
			cl.Close()
			cl = ncl
			w.redials++
		}
	}
}

func (w *writer) ack(key, value string, now time.Time) error {
	w.ackedN++
	w.closeOutage(now)
	if w.outage != nil {
		w.outage.Acked++
	}
	w.lastAck = now
	if w.open != nil {
		w.open.Seconds = now.Sub(w.openAt).Seconds()
		w.windows = append(w.windows, *w.open)
		w.open = nil
	}
	_, err := fmt.Fprintf(w.buf, "%s %s\n", key, value)
	return err
}

var digits = regexp.MustCompile(`[0-9]+`)

// refuse records a write attempted at start and refused at end.
func (w *writer) refuse(err error, start, end time.Time) {
	w.refused++
	w.closeOutage(start)
	if w.outage == nil {
		w.outage = &Outage{Span: Span{StartSeconds: start.Sub(w.begin).Seconds()}}
		w.outageAt = start
	}
	w.outage.Refused++
	w.lastRefusal = end
	msg := err.Error()
	// Group errors by kind: addresses, slots and counts differ between occurrences.
	w.errs[head(digits.ReplaceAllString(msg, "N"), 120)]++
	if w.open == nil {
		w.open = &Window{Span: Span{StartSeconds: start.Sub(w.begin).Seconds()}, FirstError: head(msg, 200)}
		w.openAt = start
	}
	w.open.Refused++
}

func (w *writer) refusingNote() string {
	if w.open == nil {
		return ""
	}
	return fmt.Sprintf(", refusing for %s (%s)", time.Since(w.openAt).Round(100*time.Millisecond), w.open.FirstError)
}

// closeOutage ends the outage in progress when no write was refused for outageGap
// before now.
func (w *writer) closeOutage(now time.Time) {
	if w.outage == nil || now.Sub(w.lastRefusal) < outageGap {
		return
	}
	w.outage.Seconds = w.lastRefusal.Sub(w.outageAt).Seconds()
	w.outages = append(w.outages, *w.outage)
	w.outage = nil
}

// finish closes the refusal window and outage still open when the writer stops.
func (w *writer) finish() {
	w.writeFinish = time.Now()
	w.closeOutage(w.writeFinish.Add(outageGap))
	if w.open != nil {
		w.open.Seconds = w.writeFinish.Sub(w.openAt).Seconds()
		w.windows = append(w.windows, *w.open)
		w.open = nil
	}
}

func (w *writer) summary() Summary {
	s := Summary{Acked: w.ackedN, Refused: w.refused, Redials: w.redials, Errors: w.errs}
	if !w.begin.IsZero() {
		s.WriteSeconds = round(w.writeFinish.Sub(w.begin).Seconds())
	}
	s.RefusalWindows, s.LongestRefusalSeconds = longestFirst(w.windows)
	s.Outages, s.LongestOutageSeconds = longestFirst(w.outages)
	if len(s.Errors) == 0 {
		s.Errors = nil
	}
	return s
}

// longestFirst returns the maxWindows longest spans, longest first, with their times
// rounded, and the longest length.
func longestFirst[T any, P interface {
	*T
	span() *Span
}](in []T) ([]T, float64) {
	out := append([]T(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return P(&out[i]).span().Seconds > P(&out[j]).span().Seconds })
	longest := 0.0
	if len(out) > 0 {
		longest = round(P(&out[0]).span().Seconds)
	}
	if len(out) > maxWindows {
		out = out[:maxWindows]
	}
	for i := range out {
		sp := P(&out[i]).span()
		sp.Seconds, sp.StartSeconds = round(sp.Seconds), round(sp.StartSeconds)
	}
	return out, longest
}

func round(s float64) float64 { return float64(int64(s*1000+0.5)) / 1000 }

func head(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

type entry struct{ key, value string }

func readAcked(path string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			// A line cut short by a killed writer: that write is not known as acknowledged.
			continue
		}
		out = append(out, entry{k, v})
	}
	return out, sc.Err()
}

type verdict struct {
	lost, unreadable int
	lostKeys         []string
	took             time.Duration
}

// maxLostKeys is how many lost keys the summary names.
const maxLostKeys = 20

// verify reads every entry back: a key missing or holding another value is lost; one that
// could not be read after a few tries is unreadable (not proof of loss, still a failure).
func verify(ctx context.Context, cl valkey.Cluster, entries []entry, timeout time.Duration) verdict {
	begin := time.Now()
	var mu sync.Mutex
	var v verdict
	work := make(chan entry)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for e := range work {
				lost, err := check(ctx, cl, e, timeout)
				mu.Lock()
				switch {
				case err != nil:
					v.unreadable++
				case lost:
					v.lost++
					if len(v.lostKeys) < maxLostKeys {
						v.lostKeys = append(v.lostKeys, e.key)
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, e := range entries {
		work <- e
	}
	close(work)
	wg.Wait()
	sort.Strings(v.lostKeys)
	v.took = time.Since(begin)
	return v
}

func check(ctx context.Context, cl valkey.Cluster, e entry, timeout time.Duration) (lost bool, err error) {
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		opCtx, cancel := context.WithTimeout(ctx, timeout)
		var got string
		got, err = cl.Get(opCtx, e.key)
		cancel()
		if valkey.IsNil(err) {
			return true, nil
		}
		if err == nil {
			return got != e.value, nil
		}
	}
	return false, err
}

// seeds are the addresses to (re)connect with: the seeds file's when it lists any.
func seeds(c config) []string {
	if c.seedsFile != "" {
		if b, err := os.ReadFile(c.seedsFile); err == nil {
			if a := splitAddrs(string(b)); len(a) > 0 {
				return a
			}
		}
	}
	return c.addrs
}

func splitAddrs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' || r == '\t' })
}

func dial(c config) (valkey.Cluster, error) {
	return valkey.DialClusterData(seeds(c), valkey.DataOptions{
		Options:         valkey.Options{Username: c.user, Password: c.password, DialTimeout: c.timeout},
		RefreshInterval: time.Second,
		ConnTimeout:     c.timeout,
	})
}

// dialUntil retries until the cluster answers or ctx ends: the writer may start while the
// cluster is still settling.
func dialUntil(ctx context.Context, c config, logf func(string, ...any)) (valkey.Cluster, error) {
	var last error
	for {
		cl, err := dial(c)
		if err == nil {
			return cl, nil
		}
		if last == nil || err.Error() != last.Error() {
			logf("dial: %v (retrying)", err)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, errors.Join(errors.New("the cluster was never reachable"), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
