package valkey

import "strings"

// KeySlot is the hash slot a key belongs to, as the server computes it (CLUSTER KEYSLOT):
// CRC16-XMODEM of the key, or of its hash tag (what stands between the first '{' and the
// next '}' when that is not empty), modulo SlotCount.
func KeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	var crc uint16
	for i := range len(key) {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % SlotCount
}
