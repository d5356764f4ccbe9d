package valkey

import "testing"

// TestKeySlot checks the slots the server's CLUSTER KEYSLOT answers for these keys, hash
// tags included.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 % SlotCount, // CRC16-XMODEM's check value
		"foo":                  12182,
		"hello":                866,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // an empty first tag: the whole key is hashed
		"foo{{bar}}zap":        4015, // the tag is "{bar"
		"":                     0,
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
