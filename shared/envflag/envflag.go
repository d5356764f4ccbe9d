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
	parse(s, env, "a quantity such as 10Gi", p, resource.ParseQuantity)
	s.fs.Var(quantityValue{p}, name, usage)
}

// IntOrString registers an intstr.IntOrString flag (a number or a percentage); any value
// parses, so the option's own validation judges it.
func (s *Set) IntOrString(p *intstr.IntOrString, name, env, usage string) {
	parse(s, env, "", p, func(v string) (intstr.IntOrString, error) { return intstr.Parse(v), nil })
	s.fs.Var(intOrStringValue{p}, name, usage)
}

type quantityValue struct{ q *resource.Quantity }

func (v quantityValue) String() string {
	if v.q == nil {
		return ""
	}
	return v.q.String()
}

func (v quantityValue) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity such as 10Gi", s)
	}
	*v.q = q
	return nil
}

type intOrStringValue struct{ v *intstr.IntOrString }

func (v intOrStringValue) String() string {
	if v.v == nil {
		return ""
	}
	return v.v.String()
}

func (v intOrStringValue) Set(s string) error {
	*v.v = intstr.Parse(s)
	return nil
}
