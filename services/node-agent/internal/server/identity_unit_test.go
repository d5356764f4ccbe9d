package server

import (
	"testing"

	"github.com/opsuite/suite/services/node-agent/internal/host"
)

func TestIdentify(t *testing.T) {
	const boot = "boot-1"
	disk := host.Disk{Name: "nvme0n1", Path: "/dev/nvme0n1", DiskSeq: 7, Serial: "S1", Kind: host.KindNVMe}
	ours := host.Signature{Type: "xfs", UUID: "u-1"}
	blank := host.Signature{}
	foreign := host.Signature{Type: "ext4", UUID: "e-1"}
	whole := func(phase string) record {
		return record{Device: "/dev/nvme9n1", FSUUID: "u-1", Phase: phase, BootID: boot, DiskSeq: 7}
	}
	split := record{Device: "/dev/nvme0n1", FSUUID: "u-1", DiskGUID: "G-1", XFSPercent: 20, Phase: phaseReady}
	with := func(mutate func(*record)) record {
		r := whole(phasePreparing)
		mutate(&r)
		return r
	}
	withDisk := func(mutate func(*host.Disk)) host.Disk {
		d := disk
		mutate(&d)
		return d
	}
	cases := []struct {
		name string
		r    record
		f    facts
		want match
	}{
		{"ready carries its filesystem under another name", whole(phaseReady), facts{disk: disk, sig: ours}, matchWritten},
		{"ready on blank media of this boot", whole(phaseReady), facts{disk: disk, sig: blank}, matchNone},
		{"ready on a foreign filesystem", whole(phaseReady), facts{disk: disk, sig: foreign}, matchNone},
		{"a clone on other hardware", with(func(r *record) { r.Serial = "S2"; r.Phase = phaseReady }), facts{disk: disk, sig: ours}, matchNone},
		{"preparing on its own blank media", whole(phasePreparing), facts{disk: disk, sig: blank}, matchReserved},
		{"preparing, media re-attached since", whole(phasePreparing), facts{disk: withDisk(func(d *host.Disk) { d.DiskSeq = 8 }), sig: blank}, matchNone},
		{"preparing, reserved in another boot", with(func(r *record) { r.BootID = "boot-0" }), facts{disk: disk, sig: blank}, matchNone},
		{"preparing, foreign data on its media", whole(phasePreparing), facts{disk: disk, sig: foreign}, matchNone},
		{"preparing, unreadable", whole(phasePreparing), facts{disk: disk, sig: blank, unreadable: true}, matchNone},
		{"preparing, same serial in another boot", with(func(r *record) { r.BootID = "boot-0"; r.Serial = "S1" }), facts{disk: disk, sig: blank}, matchReserved},
		{"preparing, same WWN", with(func(r *record) { r.BootID = ""; r.WWN = "eui.1" }), facts{disk: withDisk(func(d *host.Disk) { d.WWN = "eui.1" }), sig: blank}, matchReserved},
		{"preparing, other WWN though same media", with(func(r *record) { r.WWN = "eui.1" }), facts{disk: withDisk(func(d *host.Disk) { d.WWN = "eui.2" }), sig: blank}, matchNone},
		{"version 1 preparing on a blank disk with its name", record{Device: "/dev/nvme0n1", FSUUID: "u-1", Phase: phasePreparing}, facts{disk: disk, sig: blank}, matchNone},
		{"no disk sequence: the name within the boot", with(func(r *record) { r.DiskSeq = 0; r.Device = "/dev/nvme0n1" }), facts{disk: withDisk(func(d *host.Disk) { d.DiskSeq = 0 }), sig: blank}, matchReserved},
		{"split: its table", split, facts{disk: disk, sig: host.Signature{PTType: "gpt", PTUUID: "g-1"}}, matchWritten},
		{"split: another table", split, facts{disk: disk, sig: host.Signature{PTType: "gpt", PTUUID: "g-2"}}, matchNone},
		{"split: its filesystem on partition 1", split, facts{disk: disk, partSigs: map[string]host.Signature{"/dev/nvme0n1p1": ours}}, matchWritten},
	}
	for _, c := range cases {
		if got := identify(c.r, c.f, boot); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
