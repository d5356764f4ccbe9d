package backupschedule

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsuite/suite/shared/fuzzinput"
)

func TestParseWindow(t *testing.T) {
	taken := at("2026-01-31T10:00:00Z")
	for _, tc := range []struct {
		in, expires string // expires "" with ok: the zero window
		ok          bool
	}{
		{"", "", true},
		{"30d", "2026-03-02T10:00:00Z", true},
		{"1w", "2026-02-07T10:00:00Z", true},
		{"1m", "2026-03-03T10:00:00Z", true}, // Feb 31 normalises as Go's AddDate does
		{"12m", "2027-01-31T10:00:00Z", true},
		{"9999d", "2053-06-17T10:00:00Z", true},
		{"0d", "", false},
		{"07d", "", false},
		{"30", "", false},
		{"d", "", false},
		{"30h", "", false},
		{"30D", "", false},
		{"-1d", "", false},
		{"+1d", "", false},
		{"10000d", "", false},
		{" 30d", "", false},
	} {
		w, err := ParseWindow(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseWindow(%q) error %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			if !strings.Contains(err.Error(), "e.g. 30d") {
				t.Errorf("ParseWindow(%q) error %q does not say the form", tc.in, err)
			}
			continue
		}
		if w.String() != tc.in {
			t.Errorf("ParseWindow(%q).String() = %q", tc.in, w.String())
		}
		got := w.Expires(taken)
		if tc.expires == "" {
			if !got.IsZero() || !w.IsZero() {
				t.Errorf("%q: expires %s, want never", tc.in, got)
			}
		} else if !got.Equal(at(tc.expires)) {
			t.Errorf("%q: expires %s, want %s", tc.in, got, tc.expires)
		}
	}
}

func TestPrune(t *testing.T) {
	now := at("2026-12-05T12:00:00Z")
	day := func(n int) time.Time { return now.AddDate(0, 0, -n) }
	c := func(name string, d int) Backup { return Backup{Name: name, State: Completed, Time: day(d)} }
	f := func(name string, d int) Backup { return Backup{Name: name, State: Failed, Time: day(d)} }
	p := func(name string) Backup { return Backup{Name: name, State: InProgress} }
	w7 := Window{N: 7, Unit: 'd'}
	for _, tc := range []struct {
		name    string
		backups []Backup
		r       Retention
		prune   []string
		recheck time.Time
	}{
		{name: "off prunes nothing", backups: []Backup{c("a", 100), f("b", 50)}},
		{name: "keep last 2", backups: []Backup{c("d", 1), c("a", 4), c("c", 2), c("b", 3)}, r: Retention{KeepLast: 2}, prune: []string{"a", "b"}},
		{name: "keep last 1: the first run goes", backups: []Backup{c("s-1", 0), c("s-2", 0)}, r: Retention{KeepLast: 1}, prune: []string{"s-1"}},
		{name: "window", backups: []Backup{c("new", 1), c("edge", 7), c("old", 8), c("mid", 6)}, r: Retention{Window: w7},
			prune: []string{"old", "edge"}, recheck: day(6).AddDate(0, 0, 7)},
		{name: "the newest completed is kept past the window", backups: []Backup{c("only", 40), c("older", 41)}, r: Retention{Window: w7}, prune: []string{"older"}},
		{name: "window and count", backups: []Backup{c("a", 1), c("b", 2), c("c", 3), c("d", 10)}, r: Retention{Window: w7, KeepLast: 2},
			prune: []string{"d", "c"}, recheck: day(2).AddDate(0, 0, 7)},
		{name: "in progress never pruned, never counted", backups: []Backup{p("running"), c("a", 1), p("pending"), c("b", 2)}, r: Retention{KeepLast: 1},
			prune: []string{"b"}},
		{name: "failed never counts as kept", backups: []Backup{f("f1", 0), f("f2", 1), c("ok", 2), c("ok-old", 3)}, r: Retention{KeepLast: 1},
			prune: []string{"ok-old"}},
		{name: "failed goes once a later backup completed", backups: []Backup{c("ok", 1), f("f", 2), c("ok-old", 3)}, r: Retention{KeepLast: 2},
			prune: []string{"f"}},
		{name: "failed expires", backups: []Backup{f("f-new", 1), f("f-old", 9)}, r: Retention{Window: w7}, prune: []string{"f-old"},
			recheck: day(1).AddDate(0, 0, 7)},
		{name: "ties broken by name", backups: []Backup{c("b", 1), c("a", 1), c("c", 1)}, r: Retention{KeepLast: 1}, prune: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Prune(tc.backups, tc.r, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.Prune, tc.prune) {
				t.Errorf("prune %v, want %v", v.Prune, tc.prune)
			}
			if !v.Recheck.Equal(tc.recheck) {
				t.Errorf("recheck %s, want %s", v.Recheck, tc.recheck)
			}
			// The order of the list does not matter.
			rev := slices.Clone(tc.backups)
			slices.Reverse(rev)
			if v2, _ := Prune(rev, tc.r, now); !slices.Equal(v2.Prune, v.Prune) || !v2.Recheck.Equal(v.Recheck) {
				t.Errorf("reversed list: %+v, want %+v", v2, v)
			}
		})
	}
	if _, err := Prune(nil, Retention{KeepLast: -1}, now); err == nil {
		t.Error("a negative KeepLast was accepted")
	}
}

// FuzzPrune: over any list of backups and policy, a backup in progress is never pruned,
// the newest completed backup never is, at most KeepLast completed ones stay, none stays
// past its window but the newest completed, a failed one stays only while no later backup
// completed, nothing is pruned twice, and judging the survivors again prunes nothing more
// (the policy reaches a fixed point in one pass).
func FuzzPrune(f *testing.F) {
	f.Add([]byte{3, 1, 7, 0, 1, 0, 2, 2, 1, 9, 0, 0, 5})
	f.Add([]byte{0, 2, 1, 1, 1, 1, 1, 2, 1, 2, 3, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzinput.New(data)
		r := Retention{KeepLast: in.Next() % 5}
		if n := in.Next() % 4; n > 0 {
			r.Window = Window{N: n, Unit: "dwm"[in.Next()%3]}
		}
		now := at("2026-12-05T12:00:00Z")
		var list []Backup
		for i := 0; in.More() && i < 40; i++ {
			list = append(list, Backup{Name: "b" + strconv.Itoa(i), State: State(in.Next() % 3), Time: now.Add(-time.Duration(in.Next()*in.Next()) * time.Hour)})
		}
		v, err := Prune(list, r, now)
		if err != nil {
			t.Fatal(err)
		}
		pruned := map[string]bool{}
		for _, n := range v.Prune {
			if pruned[n] {
				t.Fatalf("%s pruned twice", n)
			}
			pruned[n] = true
		}
		var newest *Backup
		for i, b := range list {
			if b.State == Completed && (newest == nil || b.Time.After(newest.Time) || (b.Time.Equal(newest.Time) && b.Name > newest.Name)) {
				newest = &list[i]
			}
		}
		isNewest := func(b Backup) bool { return newest != nil && b.Name == newest.Name }
		var survivors []Backup
		completed := 0
		for _, b := range list {
			switch {
			case pruned[b.Name] && b.State == InProgress:
				t.Fatalf("%s pruned in progress", b.Name)
			case pruned[b.Name] && isNewest(b):
				t.Fatalf("the newest completed backup %s pruned", b.Name)
			case pruned[b.Name] && !r.Enabled():
				t.Fatalf("%s pruned with retention off", b.Name)
			case pruned[b.Name]:
				continue
			}
			survivors = append(survivors, b)
			if b.State == InProgress || !r.Enabled() {
				continue
			}
			if b.State == Completed {
				completed++
			}
			if !r.Window.IsZero() && !now.Before(r.Window.Expires(b.Time)) && !isNewest(b) {
				t.Fatalf("%s kept past its window", b.Name)
			}
			if b.State == Failed && newest != nil && (newest.Time.After(b.Time) || (newest.Time.Equal(b.Time) && newest.Name > b.Name)) {
				t.Fatalf("failed %s kept though %s completed later", b.Name, newest.Name)
			}
			if !r.Window.IsZero() && !isNewest(b) && (v.Recheck.IsZero() || r.Window.Expires(b.Time).Before(v.Recheck)) {
				t.Fatalf("%s expires at %s, before the recheck %s", b.Name, r.Window.Expires(b.Time), v.Recheck)
			}
		}
		if r.KeepLast > 0 && completed > r.KeepLast {
			t.Fatalf("%d completed backups kept, KeepLast %d", completed, r.KeepLast)
		}
		if again, _ := Prune(survivors, r, now); len(again.Prune) > 0 {
			t.Fatalf("a second pass prunes %v", again.Prune)
		}
	})
}
