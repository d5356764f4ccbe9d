// Package backupschedule holds the pure parts of scheduled backups and their retention,
// which every operator with backups shares (Valkey now, Memgraph next): a cron schedule's
// times, which backup a schedule owes at a given moment and its deterministic name, a
// retention window ("30d") and which backups a retention policy prunes. Nothing here
// reads a clock or talks to a server; callers pass now.
package backupschedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MaxCatchUp bounds the scheduled times Plan walks past to find the latest one missed. A
// schedule every second missed for more than a day reaches it; Plan then owes the time it
// reached, and the next pass walks on from there.
const MaxCatchUp = 100000

// parser reads 6 fields (seconds first, as CloudNativePG's ScheduledBackup does), 5 fields
// (minutes first, as a Kubernetes CronJob; seconds 0) and the descriptors @yearly,
// @annually, @monthly, @weekly, @daily, @midnight and @hourly.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed cron schedule. Its times are in UTC.
type Schedule struct {
	spec  string
	sched cron.Schedule
}

// Parse reads a schedule: "<second> <minute> <hour> <day of month> <month> <day of week>"
// ("0 0 3 * * *": 03:00:00 every day), the same without the seconds ("0 3 * * *"), or a
// descriptor ("@daily"). Times are UTC: a time zone prefix (CRON_TZ=) is refused, and so
// is @every, whose times hang on when it was read rather than on the clock. A schedule
// that names no time in the five years after 2000-01-01 (the 30th of February) is refused
// too.
func Parse(spec string) (s Schedule, err error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "":
		return Schedule{}, errors.New("the schedule is empty")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return Schedule{}, errors.New("the schedule cannot name a time zone: times are UTC")
	case strings.HasPrefix(spec, "@every"):
		return Schedule{}, errors.New("@every is not a cron schedule: use fields, e.g. */30 * * * * * for every 30 seconds")
	}
	// The parser has panicked on inputs it did not expect; an error is what a caller needs.
	defer func() {
		if r := recover(); r != nil {
			s, err = Schedule{}, fmt.Errorf("the schedule %q could not be read", spec)
		}
	}()
	sched, err := parser.Parse(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("the schedule %q is not cron: %w", spec, err)
	}
	s = Schedule{spec: spec, sched: sched}
	// Every field has a time within a year, save a day of month the month lacks (Feb 30):
	// robfig/cron gives up after five years and returns zero.
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Schedule{}, fmt.Errorf("the schedule %q names no time that exists (a day the month does not have?)", spec)
	}
	return s, nil
}

// String is the schedule as given.
func (s Schedule) String() string { return s.spec }

// Next is the first scheduled time strictly after t, in UTC, whole seconds; zero when
// there is none within five years (or s is the zero Schedule).
func (s Schedule) Next(t time.Time) time.Time {
	if s.sched == nil {
		return time.Time{}
	}
	return s.sched.Next(t.UTC())
}

// Run is what a schedule owes at a moment.
type Run struct {
	// Due is the scheduled time of the backup to take now; zero when none is owed.
	Due time.Time
	// Next is the scheduled time after Due (after the last run when Due is zero): when
	// to look again. It may be at or before now when Plan stopped at MaxCatchUp. Zero
	// when the schedule has no more times.
	Next time.Time
}

// Plan says which backup a schedule owes at now. created is when the schedule was made,
// last the scheduled time of its last run (zero before the first). With immediate, the
// first run is owed at once, at created (whole seconds). Otherwise the latest scheduled
// time in (last, now] is owed (created for last before the first run): times missed while
// nothing looked (the operator down, the schedule suspended) are not made up one by one,
// only the latest of them runs, once, as a Kubernetes CronJob does. The same inputs always
// give the same Run, so a name made from Due (Name) is the same on every pass and after a
// restart: one backup per scheduled time.
func Plan(s Schedule, created, last time.Time, immediate bool, now time.Time) Run {
	created, last, now = created.UTC().Truncate(time.Second), last.UTC(), now.UTC()
	if last.IsZero() && immediate {
		return Run{Due: created, Next: s.Next(created)}
	}
	ref := last
	if ref.IsZero() {
		ref = created
	}
	first := s.Next(ref)
	if first.IsZero() || first.After(now) {
		return Run{Next: first}
	}
	due := first
	for range MaxCatchUp {
		n := s.Next(due)
		if n.IsZero() || n.After(now) {
			break
		}
		due = n
	}
	return Run{Due: due, Next: s.Next(due)}
}

// TimeFormat is the UTC time in a scheduled backup's name.
const TimeFormat = "20060102150405"

// NameSuffixLength is what Name adds to the schedule's name.
const NameSuffixLength = 1 + len(TimeFormat)

// Name is the name of the backup schedule takes for scheduled time t:
// "<schedule>-<YYYYMMDDhhmmss>" (UTC), as CloudNativePG names its scheduled backups.
func Name(schedule string, t time.Time) string {
	return schedule + "-" + t.UTC().Format(TimeFormat)
}
