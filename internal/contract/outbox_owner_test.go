package contract

import (
	"strings"
	"testing"
)

// The pk names its producer up to the first '#', and the key after it; a
// pk that is not a producer's name and a valid key proves no one.
func TestOutboxKeyOwner(t *testing.T) {
	for _, tc := range []struct {
		pk, producer, key string
		ok                bool
	}{
		{"billing#k-1", "billing", "k-1", true},
		{"billing#a#b", "billing", "a#b", true},
		{"Billing#k-1", "", "", false},
		{"billing", "", "", false},
		{"#k-1", "", "", false},
		{"billing#", "", "", false},
		{"billing#k\n1", "", "", false},
		{strings.Repeat("a", 65) + "#k", "", "", false},
	} {
		p, k, ok := OutboxKeyOwner(tc.pk)
		if p != tc.producer || k != tc.key || ok != tc.ok {
			t.Errorf("OutboxKeyOwner(%q) = %q, %q, %t; want %q, %q, %t", tc.pk, p, k, ok, tc.producer, tc.key, tc.ok)
		}
	}
}
