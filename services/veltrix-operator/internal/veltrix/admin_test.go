package veltrix

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// These cases are about the HTTP shape only (status codes, headers, timeouts); what the
// server does is tested against the simulator (veltrixtest).

func TestAdminErrorsKeepKindAndServerMessage(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		body     string
		kind     error
		message  string
		notKinds []error
	}{
		{"bad token", http.StatusUnauthorized, "invalid admin token\n", ErrUnauthorized, "invalid admin token", []error{ErrRefused}},
		{"forbidden", http.StatusForbidden, `{"error":"admin API is loopback-only without a token"}`, ErrUnauthorized, "admin API is loopback-only without a token", nil},
		{"unknown member", http.StatusNotFound, `{"error":"no member vx-9"}`, ErrNotFound, "no member vx-9", []error{ErrRefused}},
		{"conflict", http.StatusConflict, `{"message":"removal would leave fewer members than the replication factor"}`, ErrRefused,
			"removal would leave fewer members than the replication factor", []error{ErrNotFound, ErrUnauthorized}},
		{"server error", http.StatusInternalServerError, "moving partitions failed", ErrRefused, "moving partitions failed", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			err := New(Options{Token: "t"}).RemoveMember(context.Background(), srv.URL, "vx-4")
			if !errors.Is(err, tc.kind) {
				t.Fatalf("RemoveMember: %v, want kind %v", err, tc.kind)
			}
			for _, k := range tc.notKinds {
				if errors.Is(err, k) {
					t.Errorf("RemoveMember: %v is also %v", err, k)
				}
			}
			if got := ServerMessage(err); got != tc.message {
				t.Errorf("ServerMessage = %q, want %q", got, tc.message)
			}
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Op != "DELETE /admin/cluster/members/vx-4" {
				t.Errorf("error %#v: want status %d and the request named", e, tc.status)
			}
		})
	}
}

func TestAdminSendsBearerTokenAndEscapesIDs(t *testing.T) {
	var gotAuth, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.EscapedPath()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	if err := New(Options{Token: "s3cret"}).RemoveMember(context.Background(), srv.URL, "a/b c"); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	if gotAuth != "Bearer s3cret" {
		t.Errorf("Authorization = %q, want the bearer token", gotAuth)
	}
	if gotPath != "/admin/cluster/members/a%2Fb%20c" {
		t.Errorf("path = %q, want the id escaped as one segment", gotPath)
	}
	if err := New(Options{}).Checkpoint(context.Background(), srv.URL); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if gotAuth != "" {
		t.Errorf("without a token, Authorization = %q, want none", gotAuth)
	}
}

func TestAdminTimeoutIsUnreachable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	_, err := New(Options{Timeout: 200 * time.Millisecond}).Members(context.Background(), srv.URL)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Members of a silent server: %v, want ErrUnreachable and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Members took %s with a 200ms timeout", took)
	}
}

func TestAdminAnswerThatIsNotJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>proxy</html>"))
	}))
	defer srv.Close()
	_, err := New(Options{}).Cluster(context.Background(), srv.URL)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "<html>proxy</html>") {
		t.Fatalf("Cluster answered with HTML: %v, want ErrUnreachable quoting the answer", err)
	}
}

func TestAdminLongMessageIsCapped(t *testing.T) {
	long := strings.Repeat("x", 5000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, long, http.StatusConflict)
	}))
	defer srv.Close()
	err := New(Options{}).RemoveMember(context.Background(), srv.URL, "x")
	if got := ServerMessage(err); len(got) > maxMessage+len("…") || !strings.HasPrefix(got, "xxx") {
		t.Fatalf("ServerMessage has %d bytes, want at most %d", len(got), maxMessage+len("…"))
	}
}

func TestParseInfo(t *testing.T) {
	got := ParseInfo("node_id=vx-0 keys=12 search_ready=1 members=3 epoch=7 junk =x")
	want := map[string]string{"node_id": "vx-0", "keys": "12", "search_ready": "1", "members": "3", "epoch": "7"}
	if len(got) != len(want) {
		t.Fatalf("ParseInfo = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ParseInfo[%s] = %q, want %q", k, got[k], v)
		}
	}
}

func TestUnreachableAddress(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // nothing listens there now
	if _, err := New(Options{}).Members(context.Background(), addr); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Members of a closed port: %v, want ErrUnreachable", err)
	}
	if _, err := New(Options{}).Info(context.Background(), addr); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Info of a closed port: %v, want ErrUnreachable", err)
	}
}
