package fuzzinput

import "testing"

func TestBytesReadsThenZeroes(t *testing.T) {
	s := New([]byte{7, 255})
	if r := s.Rest(); len(r) != 2 {
		t.Fatalf("Rest before reading: %v", r)
	}
	var got []int
	for range 4 {
		got = append(got, s.Next())
	}
	if got[0] != 7 || got[1] != 255 || got[2] != 0 || got[3] != 0 {
		t.Fatalf("read %v, want [7 255 0 0]", got)
	}
	if s.More() || s.Rest() != nil {
		t.Fatal("More or Rest after the end")
	}
	if !New([]byte{1}).More() {
		t.Fatal("no More before the first read")
	}
}
