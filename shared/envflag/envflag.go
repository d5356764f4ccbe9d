// Package envflag registers flags whose defaults come from environment variables, so an
// operator's Deployment can configure it by env (a chart's config map) while a flag still
// wins. A malformed variable is not fatal at registration: it is collected and reported
// by Err, next to the other option errors, after the flags are parsed.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Set registers flags on FlagSet with defaults read through Getenv. An empty variable
// counts as unset.
type Set struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

// New returns a Set for fs reading the environment through getenv (os.Getenv, or a map
// lookup in tests).
func New(fs *flag.FlagSet, getenv func(string) string) *Set {
	return &Set{fs: fs, getenv: getenv}
}

// Err reports every malformed variable seen so far, or nil.
func (s *Set) Err() error { return errors.Join(s.errs...) }

func (s *Set) lookup(env string) (string, bool) {
	v := s.getenv(env)
	return v, v != ""
}

func (s *Set) fail(env, v, want string) {
	s.errs = append(s.errs, fmt.Errorf("$%s=%q is not %s", env, v, want))
}

// parse sets *p from the variable env when it is set and parses, else leaves it.
func parse[T any](s *Set, env, want string, p *T, conv func(string) (T, error)) {
	v, ok := s.lookup(env)
	if !ok {
		return
	}
	x, err := conv(v)
	if err != nil {
		s.fail(env, v, want)
		return
	}
	*p = x
}

// String registers a string flag; *p holds the built-in default on entry.
func (s *Set) String(p *string, name, env, usage string) {
	parse(s, env, "", p, func(v string) (string, error) { return v, nil })
	s.fs.StringVar(p, name, *p, usage)
}

// Bool registers a bool flag; $env must be true or false (or 1, 0, ...).
func (s *Set) Bool(p *bool, name, env, usage string) {
	parse(s, env, "true or false", p, strconv.ParseBool)
	s.fs.BoolVar(p, name, *p, usage)
}

// Int registers an int flag.
func (s *Set) Int(p *int, name, env, usage string) {
	parse(s, env, "an integer", p, strconv.Atoi)
	s.fs.IntVar(p, name, *p, usage)
}

// Float registers a float64 flag.
func (s *Set) Float(p *float64, name, env, usage string) {
	parse(s, env, "a number", p, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
	s.fs.Float64Var(p, name, *p, usage)
}

// Duration registers a time.Duration flag.
func (s *Set) Duration(p *time.Duration, name, env, usage string) {
	parse(s, env, "a duration such as 30s", p, time.ParseDuration)
	s.fs.DurationVar(p, name, *p, usage)
}

// Quantity registers a resource.Quantity flag (10Gi, 500m).
func (s *Set) Quantity(p *resource.Quantity, name, env, usage string) {
	parse(s, env, "a quantity such as 10Gi", p, parseQuantity)
	s.fs.Var(value[resource.Quantity]{p, parseQuantity, func(q resource.Quantity) string { return q.String() }}, name, usage)
}

// IntOrString registers an intstr.IntOrString flag (a number or a percentage); any value
// parses, so the option's own validation judges it.
func (s *Set) IntOrString(p *intstr.IntOrString, name, env, usage string) {
	parse(s, env, "", p, parseIntOrString)
	s.fs.Var(value[intstr.IntOrString]{p, parseIntOrString, func(v intstr.IntOrString) string { return v.String() }}, name, usage)
}

// value is a flag.Value of any type with its own parser.
type value[T any] struct {
	p      *T
	parse  func(string) (T, error)
	format func(T) string
}

func (v value[T]) String() string {
	if v.p == nil {
		return ""
	}
	return v.format(*v.p)
}

func (v value[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

func parseQuantity(s string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, fmt.Errorf("%q is not a quantity such as 10Gi", s)
	}
	return q, nil
}

func parseIntOrString(s string) (intstr.IntOrString, error) { return intstr.Parse(s), nil }
