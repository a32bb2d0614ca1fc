package p2p

import (
	"io"
	"testing"
	"testing/synctest"
)

// TestHandshakeListenerRevealsNothingFirst is the offline attack on the
// mesh key: an outsider dials a member, opens the membership protocol and
// sends a nonce, then either stalls or sends a made-up proof. Whatever the
// member sends back must be useless for testing guesses offline: its
// nonce, never a proof keyed by the mesh key. (Version 1 of the protocol
// answered the outsider's nonce with the listener's HMAC: 64 bytes, a
// proof to grind.)
func TestHandshakeListenerRevealsNothingFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proof []byte // sent once the member's nonce came; nil: stall
	}{
		{"stall", nil},
		{"made-up proof", randomBytes(proofLen)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mn, hs := mockPeers(t, 2)
				member, attacker := hs[0], hs[1]
				m := joinMesh(t, member, GenerateMeshKey())
				connectPeers(t, mn, attacker, member)
				st := memberStream(t, attacker, member.ID(), MemberProtocol)
				if _, err := st.Write(randomBytes(nonceLen)); err != nil {
					t.Fatal(err)
				}
				var got []byte
				if tc.proof != nil {
					got = make([]byte, nonceLen)
					if _, err := io.ReadFull(st, got); err != nil {
						t.Fatalf("no nonce from the member: %v", err)
					}
					if _, err := st.Write(tc.proof); err != nil {
						t.Fatal(err)
					}
				}
				got = append(got, readRest(st)...) // until the member gives up on us
				if len(got) > nonceLen {
					t.Fatalf("the member sent %d bytes before the outsider proved anything (a nonce is %d): a proof to grind offline", len(got), nonceLen)
				}
				synctest.Wait()
				if m.IsMember(attacker.ID()) || m.Stats().Refused != 1 || isConnected(member, attacker) {
					t.Fatalf("the outsider: member %v, connected %v, stats %+v", m.IsMember(attacker.ID()), isConnected(member, attacker), m.Stats())
				}
			})
		})
	}
}
