package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DropComment marks every iptables rule a test adds, so that a run killed before it
// removed its rules leaves rules `make sweep` can find and remove (the Makefile's
// PARTITION_COMMENT).
const DropComment = "opsuite-e2e-partition"

// Dropped is a set of iptables OUTPUT rules dropping packets on the host's loopback. It
// removes itself after at most its bound, at the test's end, or when healed by hand.
type Dropped struct {
	t     testing.TB
	rules [][]string
	once  sync.Once
	timer *time.Timer
	begin time.Time
	// lasted is how long the rules were in place, once removed.
	lasted time.Duration
}

// DropOutput inserts one OUTPUT rule dropping the packets each of rules matches (iptables
// match arguments that name loopback destinations only, by the suite's rules) for at most
// bound. A missing iptables fails the test and says how to get it.
func DropOutput(t testing.TB, bound time.Duration, rules ...[]string) *Dropped {
	t.Helper()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("dropping packets needs iptables (apt-get install iptables; .ci/apt-packages.txt lists it): %v", err)
	}
	for _, r := range rules {
		if !loopbackOnly(r) {
			t.Fatalf("iptables rule %v: the suite only drops packets to loopback addresses (-d 127.x)", r)
		}
	}
	d := &Dropped{t: t, rules: rules, begin: time.Now()}
	for _, r := range rules {
		if out, err := exec.Command("iptables", d.args("-I", r)...).CombinedOutput(); err != nil {
			d.Heal()
			t.Fatalf("iptables -I OUTPUT %v: %v\n%s", r, err, out)
		}
	}
	d.timer = time.AfterFunc(bound, func() { d.Heal() })
	t.Cleanup(func() { d.Heal() })
	return d
}

// loopbackOnly: the rule names a destination and every address it names is a loopback one.
func loopbackOnly(rule []string) bool {
	dest := false
	for i := 0; i+1 < len(rule); i++ {
		switch rule[i] {
		case "-d", "-s":
			if !strings.HasPrefix(rule[i+1], "127.") {
				return false
			}
			dest = dest || rule[i] == "-d"
		}
	}
	return dest
}

func (d *Dropped) args(op string, rule []string) []string {
	return append(append([]string{op, "OUTPUT"}, rule...), "-j", "DROP", "-m", "comment", "--comment", DropComment)
}

// Heal removes the rules (once) and returns how long they were in place.
func (d *Dropped) Heal() time.Duration {
	d.once.Do(func() {
		if d.timer != nil {
			d.timer.Stop()
		}
		for _, r := range d.rules {
			if out, err := exec.Command("iptables", d.args("-D", r)...).CombinedOutput(); err != nil {
				d.t.Errorf("removing iptables rule %v: %v\n%s", r, err, out)
			}
		}
		d.lasted = time.Since(d.begin)
	})
	return d.lasted
}

// ConnLocalPort returns the local port of process pid's established TCP connection to
// remote (an IPv4 host:port), read from /proc: what a rule needs to drop the packets of
// that one connection and leave the process's others alone.
func ConnLocalPort(pid int, remote string) (int, error) {
	host, portText, err := net.SplitHostPort(remote)
	if err != nil {
		return 0, err
	}
	ip := net.ParseIP(host).To4()
	port, err := strconv.Atoi(portText)
	if ip == nil || err != nil {
		return 0, fmt.Errorf("%s is not an IPv4 host:port", remote)
	}
	// /proc/net/tcp writes an address as the 32-bit number in host (little-endian) order.
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], port)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	sockets := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			sockets[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	table, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return 0, err
	}
	const established = "01"
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[2] != want || f[3] != established || !sockets[f[9]] {
			continue
		}
		_, local, _ := strings.Cut(f[1], ":")
		p, err := strconv.ParseUint(local, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/net/tcp local address %q: %w", pid, f[1], err)
		}
		return int(p), nil
	}
	return 0, fmt.Errorf("process %d has no established connection to %s", pid, remote)
}
