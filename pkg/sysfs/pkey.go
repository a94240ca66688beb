package sysfs

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PKeyFull is the membership bit of a P_Key: set for a full member, clear for a limited
// one. The partition is the other 15 bits.
const PKeyFull = 0x8000

// ParsePKey parses ports/<p>/pkeys/<i>: 0x and up to four hex digits ("0xffff"). An
// unused entry reads 0x0000.
func ParsePKey(s string) (uint16, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || h == "" || len(h) > 4 || !isHex(h) {
		return 0, syntaxError(s, "0x<up to 4 hex digits>")
	}
	v, _ := strconv.ParseUint(h, 16, 16) // cannot fail: at most four hex digits
	return uint16(v), nil
}

// PKeyAdmits reports whether a P_Key table entry serves a wanted P_Key: the same
// partition, with at least the membership asked for. A full-member key (PKeyFull set)
// needs a full-member entry; a limited one takes either. An unused entry (0x0000) serves
// nothing, since no partition is 0.
func PKeyAdmits(entry, want uint16) bool {
	return entry&^PKeyFull != 0 && entry&^PKeyFull == want&^PKeyFull && (want&PKeyFull == 0 || entry&PKeyFull != 0)
}

// PKeyEntry is one used entry of a port's P_Key table.
type PKeyEntry struct {
	// Index is the entry's index: what verbs (a QP's pkey_index) and NCCL_IB_PKEY name.
	Index int
	// PKey is the entry's value, membership bit included.
	PKey uint16
}

// PKeyTable is the used entries of a port's P_Key table, lowest index first.
type PKeyTable []PKeyEntry

// ReadPKeyTable reads the P_Key table below portDir (class/infiniband/<dev>/ports/<p>).
// Unused entries (0x0000) are left out, and so are entries that cannot be read; an entry
// that reads but is not a P_Key is an error, since the table would then say nothing
// reliable. A port without a pkeys directory (RoCE on some kernels) is an error that
// wraps fs.ErrNotExist.
func ReadPKeyTable(f *FS, portDir string) (PKeyTable, error) {
	dir := portDir + "/pkeys"
	names, err := f.ReadDirNames(dir)
	if err != nil {
		return nil, err
	}
	var t PKeyTable
	for _, n := range names {
		i, err := parseDecimal(n)
		if err != nil || strconv.Itoa(i) != n {
			continue
		}
		v, err := Read(f, dir+"/"+n, ParsePKey)
		switch {
		case errors.Is(err, ErrSyntax):
			return nil, err
		case err != nil || v == 0:
			continue
		}
		t = append(t, PKeyEntry{Index: i, PKey: v})
	}
	// Names sort as text (10 before 2); the table is read by index.
	slices.SortFunc(t, func(a, b PKeyEntry) int { return cmp.Compare(a.Index, b.Index) })
	return t, nil
}

// Index returns the lowest index whose entry admits want (PKeyAdmits), and false when
// no entry does.
func (t PKeyTable) Index(want uint16) (int, bool) {
	for _, e := range t {
		if PKeyAdmits(e.PKey, want) {
			return e.Index, true
		}
	}
	return 0, false
}

// String writes the table the way an error message shows it: "[0]=0xffff [1]=0x8001",
// or "empty".
func (t PKeyTable) String() string {
	if len(t) == 0 {
		return "empty"
	}
	parts := make([]string, len(t))
	for i, e := range t {
		parts[i] = fmt.Sprintf("[%d]=0x%04x", e.Index, e.PKey)
	}
	return strings.Join(parts, " ")
}
