package backupschedule

import (
	"strings"
	"testing"
	"time"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParse(t *testing.T) {
	from := at("2026-12-05T02:13:07Z")
	for _, tc := range []struct {
		spec string
		// next is the first time after from; want an error containing err instead when set.
		next, err string
	}{
		{spec: "0 0 3 * * *", next: "2026-12-05T03:00:00Z"},
		{spec: "0 3 * * *", next: "2026-12-05T03:00:00Z"},
		{spec: "*/5 * * * * *", next: "2026-12-05T02:13:10Z"},
		{spec: "*/5 * * * *", next: "2026-12-05T02:15:00Z"},
		{spec: "  @daily ", next: "2026-12-06T00:00:00Z"},
		{spec: "@hourly", next: "2026-12-05T03:00:00Z"},
		{spec: "0 0 0 * * SUN", next: "2026-12-06T00:00:00Z"},
		{spec: "0 0 0 1 JAN *", next: "2027-01-01T00:00:00Z"},
		{spec: "0 0 0 29 2 *", next: "2028-02-29T00:00:00Z"},
		{spec: "", err: "empty"},
		{spec: "* * * *", err: "not cron"},
		{spec: "* * * * * * *", err: "not cron"},
		{spec: "61 * * * * *", err: "not cron"},
		{spec: "*/0 * * * * *", err: "not cron"},
		{spec: "0 0 0 30 2 *", err: "names no time"},
		{spec: "CRON_TZ=Europe/Paris 0 3 * * *", err: "time zone"},
		{spec: "TZ=", err: "time zone"},
		{spec: "@every 5s", err: "@every"},
		{spec: "@sometimes", err: "not cron"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := Parse(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.spec, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(from); !got.Equal(at(tc.next)) {
				t.Errorf("Next(%s) = %s, want %s", from, got, tc.next)
			}
			if s.String() != strings.TrimSpace(tc.spec) {
				t.Errorf("String() = %q", s.String())
			}
		})
	}
}

func TestPlan(t *testing.T) {
	every10s, _ := Parse("*/10 * * * * *")
	daily, _ := Parse("0 0 3 * * *")
	created := at("2026-12-05T02:13:07Z")
	for _, tc := range []struct {
		name      string
		s         Schedule
		last      string
		immediate bool
		now       string
		due, next string // due "" for none
	}{
		{name: "before the first time", s: every10s, now: "2026-12-05T02:13:09Z", next: "2026-12-05T02:13:10Z"},
		{name: "at the first time", s: every10s, now: "2026-12-05T02:13:10Z", due: "2026-12-05T02:13:10Z", next: "2026-12-05T02:13:20Z"},
		{name: "immediate runs at creation", s: every10s, immediate: true, now: "2026-12-05T02:13:08Z", due: "2026-12-05T02:13:07Z", next: "2026-12-05T02:13:10Z"},
		{name: "immediate only once", s: every10s, immediate: true, last: "2026-12-05T02:13:07Z", now: "2026-12-05T02:13:08Z", next: "2026-12-05T02:13:10Z"},
		{name: "after a run, waits", s: every10s, last: "2026-12-05T02:13:10Z", now: "2026-12-05T02:13:19Z", next: "2026-12-05T02:13:20Z"},
		{name: "missed times: only the latest", s: every10s, last: "2026-12-05T02:13:10Z", now: "2026-12-05T02:14:05Z", due: "2026-12-05T02:14:00Z", next: "2026-12-05T02:14:10Z"},
		{name: "daily, missed for a week", s: daily, last: "2026-11-28T03:00:00Z", now: "2026-12-05T12:00:00Z", due: "2026-12-05T03:00:00Z", next: "2026-12-06T03:00:00Z"},
		{name: "a clock behind the last run", s: daily, last: "2026-12-05T03:00:00Z", now: "2026-12-05T02:59:00Z", next: "2026-12-06T03:00:00Z"},
		{name: "zero schedule owes nothing", s: Schedule{}, now: "2026-12-05T02:14:05Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last time.Time
			if tc.last != "" {
				last = at(tc.last)
			}
			got := Plan(tc.s, created, last, tc.immediate, at(tc.now))
			var want Run
			if tc.due != "" {
				want.Due = at(tc.due)
			}
			if tc.next != "" {
				want.Next = at(tc.next)
			}
			if !got.Due.Equal(want.Due) || !got.Next.Equal(want.Next) {
				t.Errorf("Plan = due %s next %s, want due %s next %s", got.Due, got.Next, want.Due, want.Next)
			}
		})
	}
}

// TestPlanCatchUpIsBounded: a schedule every second missed for three days walks at most
// MaxCatchUp times, owes a time in the past, and the following passes reach now.
func TestPlanCatchUpIsBounded(t *testing.T) {
	s, _ := Parse("* * * * * *")
	created := at("2026-12-01T00:00:00Z")
	now := at("2026-12-04T00:00:00Z")
	r := Plan(s, created, time.Time{}, false, now)
	if want := created.Add((MaxCatchUp + 1) * time.Second); !r.Due.Equal(want) {
		t.Fatalf("due %s, want %s (the first time and MaxCatchUp more)", r.Due, want)
	}
	if r.Next.After(now) {
		t.Fatalf("next %s after now, want it owed at once", r.Next)
	}
	last := r.Due
	for range 3 {
		r = Plan(s, created, last, false, now)
		if r.Due.IsZero() {
			t.Fatal("nothing owed while times were still missed")
		}
		last = r.Due
		if last.Equal(now) {
			break
		}
	}
	if !last.Equal(now) {
		t.Fatalf("three passes reached %s, want %s", last, now)
	}
	if r = Plan(s, created, last, false, now); !r.Due.IsZero() || !r.Next.Equal(now.Add(time.Second)) {
		t.Fatalf("caught up: %+v", r)
	}
}

func TestName(t *testing.T) {
	ts := time.Date(2026, 12, 5, 3, 4, 5, 999, time.FixedZone("CET", 3600))
	if got := Name("nightly", ts); got != "nightly-20261205020405" {
		t.Errorf("Name = %s", got)
	}
	if len(Name("x", ts)) != 1+NameSuffixLength {
		t.Errorf("NameSuffixLength %d does not match", NameSuffixLength)
	}
}

// FuzzSchedule: Parse never panics; a schedule it accepts has times that only move
// forward, in whole UTC seconds, and Plan owes a time in (last, now], never twice.
func FuzzSchedule(f *testing.F) {
	for _, s := range []string{"0 0 3 * * *", "*/5 * * * * *", "@daily", "0 0 0 29 2 *", "TZ=", "1-5/2,7 */3 L * * ?", "0 0 0 31 4 *"} {
		f.Add(s, int64(1764900000), int64(3600), true)
	}
	f.Fuzz(func(t *testing.T, spec string, created int64, after int64, immediate bool) {
		s, err := Parse(spec)
		if err != nil {
			return
		}
		c := time.Unix(created%(1<<33), 0).UTC()
		now := c.Add(time.Duration(after%(1<<22)) * time.Second)
		n := s.Next(c)
		if n.IsZero() {
			return
		}
		if !n.After(c) || n.Nanosecond() != 0 || n.Location() != time.UTC {
			t.Fatalf("%q: Next(%s) = %s", spec, c, n)
		}
		r := Plan(s, c, time.Time{}, immediate, now)
		if r.Due.IsZero() {
			return
		}
		if r.Due.After(now) && (!immediate || !r.Due.Equal(c)) {
			t.Fatalf("%q: owes %s after now %s", spec, r.Due, now)
		}
		again := Plan(s, c, r.Due, immediate, now)
		if !again.Due.IsZero() && !again.Due.After(r.Due) {
			t.Fatalf("%q: owes %s again after running it", spec, again.Due)
		}
	})
}
