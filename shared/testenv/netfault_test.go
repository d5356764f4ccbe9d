package testenv

import (
	"net"
	"os"
	"testing"
)

func TestConnLocalPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := ConnLocalPort(os.Getpid(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if want := c.LocalAddr().(*net.TCPAddr).Port; got != want {
		t.Errorf("ConnLocalPort = %d, want %d", got, want)
	}
	if _, err := ConnLocalPort(os.Getpid(), "127.0.0.1:1"); err == nil {
		t.Error("a connection to 127.0.0.1:1 found where none exists")
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		rule []string
		want bool
	}{
		{[]string{"-s", "127.0.0.2", "-d", "127.0.0.3"}, true},
		{[]string{"-m", "owner", "--uid-owner", "65532", "-d", "127.29.0.4"}, true},
		{[]string{"-p", "tcp", "--sport", "4000"}, false}, // no destination: every address
		{[]string{"-s", "127.0.0.1", "-d", "10.0.0.1"}, false},
		{[]string{"-s", "192.168.0.1", "-d", "127.0.0.1"}, false},
	} {
		if got := loopbackOnly(tc.rule); got != tc.want {
			t.Errorf("loopbackOnly(%v) = %v, want %v", tc.rule, got, tc.want)
		}
	}
}
