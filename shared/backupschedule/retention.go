package backupschedule

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// WindowPattern is the form of a retention window, as CloudNativePG's
// spec.backup.retentionPolicy: a positive count and a unit, d (days), w (weeks) or
// m (months). APIs validate it with this pattern before Parse sees it.
const WindowPattern = `^[1-9][0-9]{0,3}[dwm]$`

// Window is how long a backup is kept, in calendar units; the zero Window keeps forever.
type Window struct {
	N    int
	Unit byte
}

// ParseWindow reads "30d", "4w" or "6m" (at most 9999 of a unit); "" is the zero Window.
func ParseWindow(s string) (Window, error) {
	if s == "" {
		return Window{}, nil
	}
	if len(s) < 2 || len(s) > 5 {
		return Window{}, fmt.Errorf("retention %q is not <count><d|w|m>, e.g. 30d", s)
	}
	unit := s[len(s)-1]
	digits := s[:len(s)-1]
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || digits[0] == '0' || digits[0] == '+' || (unit != 'd' && unit != 'w' && unit != 'm') {
		return Window{}, fmt.Errorf("retention %q is not <count><d|w|m>, e.g. 30d", s)
	}
	return Window{N: n, Unit: unit}, nil
}

// IsZero reports whether w keeps forever.
func (w Window) IsZero() bool { return w.N == 0 }

// String is w as ParseWindow reads it ("" for the zero Window).
func (w Window) String() string {
	if w.IsZero() {
		return ""
	}
	return strconv.Itoa(w.N) + string(w.Unit)
}

// Expires is when a backup taken at t leaves the window: t plus N days, weeks or calendar
// months (UTC); zero for the zero Window.
func (w Window) Expires(t time.Time) time.Time {
	t = t.UTC()
	switch w.Unit {
	case 'd':
		return t.AddDate(0, 0, w.N)
	case 'w':
		return t.AddDate(0, 0, 7*w.N)
	case 'm':
		return t.AddDate(0, w.N, 0)
	}
	return time.Time{}
}

// Retention is a cluster's retention policy: backups older than Window, and completed
// backups beyond the newest KeepLast, are pruned. The zero Retention prunes nothing.
type Retention struct {
	Window   Window
	KeepLast int
}

// Enabled reports whether r prunes anything.
func (r Retention) Enabled() bool { return !r.Window.IsZero() || r.KeepLast > 0 }

// State is where a backup stands, as retention sees it.
type State int

// States: InProgress (not started, waiting or streaming), Completed (stored whole,
// restorable), Failed (stopped for good, nothing restorable).
const (
	InProgress State = iota
	Completed
	Failed
)

// Backup is one backup as retention judges it.
type Backup struct {
	Name  string
	State State
	// Time is when it completed or failed (for InProgress, unused).
	Time time.Time
}

// Verdict is what a retention policy does to a list of backups.
type Verdict struct {
	// Prune are the names to delete (their objects in the store first), oldest first.
	Prune []string
	// Recheck is when the next kept backup leaves the window: when to judge again
	// though nothing changed; zero when no time will.
	Recheck time.Time
}

// ErrNegativeKeepLast is Prune's answer to a KeepLast below zero.
var ErrNegativeKeepLast = errors.New("keepLast must not be negative")

// Prune judges backups under r at now:
//   - a backup in progress is never pruned, and never counts;
//   - completed backups, newest first: the newest is always kept (a schedule stopped for
//     longer than the window never leaves a cluster without a restorable backup); those
//     beyond the first KeepLast, and those whose window expired, are pruned;
//   - a failed backup never counts as one of the kept: it stays only to say what went
//     wrong, until a later backup completes or its window expires.
//
// Ties in Time are broken by name, so the verdict does not depend on the list's order.
func Prune(backups []Backup, r Retention, now time.Time) (Verdict, error) {
	if r.KeepLast < 0 {
		return Verdict{}, ErrNegativeKeepLast
	}
	if !r.Enabled() {
		return Verdict{}, nil
	}
	now = now.UTC()
	sorted := slices.Clone(backups)
	// Newest first.
	slices.SortFunc(sorted, func(a, b Backup) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.Name, a.Name)
	})
	var v Verdict
	recheck := func(t time.Time) {
		if r.Window.IsZero() {
			return
		}
		if e := r.Window.Expires(t); v.Recheck.IsZero() || e.Before(v.Recheck) {
			v.Recheck = e
		}
	}
	expired := func(t time.Time) bool { return !r.Window.IsZero() && !now.Before(r.Window.Expires(t)) }
	kept := 0
	for _, b := range sorted {
		switch b.State {
		case Completed:
			prune := kept > 0 && ((r.KeepLast > 0 && kept >= r.KeepLast) || expired(b.Time))
			if prune {
				v.Prune = append(v.Prune, b.Name)
				continue
			}
			if kept > 0 {
				recheck(b.Time)
			}
			kept++
		case Failed:
			if kept > 0 || expired(b.Time) {
				v.Prune = append(v.Prune, b.Name)
				continue
			}
			recheck(b.Time)
		}
	}
	slices.Reverse(v.Prune)
	return v, nil
}
