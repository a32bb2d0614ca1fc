package p2p

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestMeshKeyFile: a key file round-trips, the bare hex line is accepted,
// and anything else is ErrMeshKey, oversized files before they are parsed.
func TestMeshKeyFile(t *testing.T) {
	key := GenerateMeshKey()
	if len(key) != MeshKeyLen || bytes.Equal(key, GenerateMeshKey()) {
		t.Fatalf("GenerateMeshKey: %d bytes, or twice the same key", len(key))
	}
	file, err := MarshalMeshKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(file), "/key/meshllm/mesh/1.0.0/\n/base16/\n") {
		t.Fatalf("key file %q", file)
	}
	lines := strings.Split(strings.TrimSpace(string(file)), "\n")
	for _, in := range []string{string(file), strings.ReplaceAll(string(file), "\n", "\r\n"), lines[2], "  " + lines[2] + "\n"} {
		got, err := ParseMeshKey([]byte(in))
		if err != nil || !bytes.Equal(got, key) {
			t.Fatalf("ParseMeshKey(%q) = %x, %v", in, got, err)
		}
	}
	for name, in := range map[string]string{
		"empty":        "",
		"short key":    lines[0] + "\n" + lines[1] + "\n" + lines[2][:62] + "\n",
		"long key":     lines[2] + "00",
		"not hex":      strings.Repeat("zz", MeshKeyLen),
		"other header": "/key/swarm/psk/1.0.0/\n/base16/\n" + lines[2],
		"base64":       lines[0] + "\n/base64/\n" + lines[2],
		"extra line":   string(file) + "more\n",
		"oversized":    string(file) + strings.Repeat(" ", MaxMeshKeyFile),
	} {
		if _, err := ParseMeshKey([]byte(in)); !errors.Is(err, ErrMeshKey) {
			t.Errorf("%s: ParseMeshKey err %v, want ErrMeshKey", name, err)
		}
	}
	if _, err := MarshalMeshKey(key[:16]); !errors.Is(err, ErrMeshKey) {
		t.Fatalf("MarshalMeshKey of 16 bytes: %v", err)
	}
}

// TestMeshKeyFromPassphrase: one passphrase, one key, another passphrase
// another key; lengths out of bounds are refused before any derivation.
// Subkeys of distinct purposes differ.
func TestMeshKeyFromPassphrase(t *testing.T) {
	k1, err := MeshKeyFromPassphrase([]byte("correct horse battery staple"))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := MeshKeyFromPassphrase([]byte("correct horse battery staple"))
	if err != nil {
		t.Fatal(err)
	}
	k3, err := MeshKeyFromPassphrase([]byte("correct horse battery stapler"))
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != MeshKeyLen || !bytes.Equal(k1, k2) || bytes.Equal(k1, k3) {
		t.Fatalf("derived keys %x %x %x", k1, k2, k3)
	}
	for _, n := range []int{0, MinPassphraseLen - 1, MaxPassphraseLen + 1} {
		if _, err := MeshKeyFromPassphrase(bytes.Repeat([]byte("x"), n)); !errors.Is(err, ErrPassphrase) {
			t.Errorf("passphrase of %d bytes: %v, want ErrPassphrase", n, err)
		}
	}
	if a, b := MeshSubkey(k1, "a"), MeshSubkey(k1, "b"); bytes.Equal(a, b) || bytes.Equal(a, k1) || len(a) != MeshKeyLen {
		t.Fatal("subkeys of two purposes are equal, or equal to the mesh key")
	}
}

// TestHandshakeMembers: two members of a key file's mesh prove themselves
// to each other, in both roles at once (each dials the other).
func TestHandshakeMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn, hs := mockPeers(t, 2)
		key := GenerateMeshKey()
		a, b := joinMesh(t, hs[0], key), joinMesh(t, hs[1], key)
		connectPeers(t, mn, hs[0], hs[1])
		connectPeers(t, mn, hs[1], hs[0])
		synctest.Wait()
		if !a.IsMember(hs[1].ID()) || !b.IsMember(hs[0].ID()) {
			t.Fatalf("members not admitted: %+v %+v", a.Stats(), b.Stats())
		}
		if st := a.Stats(); st.Members != 1 || st.Verified != 1 || st.Refused != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestHandshakePassphrase: peers given one passphrase form a mesh through
// the derived key; a peer with another passphrase is refused whichever
// side dials, and neither side takes the other for a member.
func TestHandshakePassphrase(t *testing.T) {
	good, err := MeshKeyFromPassphrase([]byte("correct horse battery staple"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := MeshKeyFromPassphrase([]byte("correct horse battery stapler"))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		mn, hs := mockPeers(t, 4)
		a, b := joinMesh(t, hs[0], good), joinMesh(t, hs[1], good)
		w1, w2 := joinMesh(t, hs[2], other), joinMesh(t, hs[3], other)
		connectPeers(t, mn, hs[1], hs[0])
		connectPeers(t, mn, hs[2], hs[0]) // wrong passphrase dials a member
		connectPeers(t, mn, hs[0], hs[3]) // a member dials a wrong passphrase
		synctest.Wait()
		if !a.IsMember(hs[1].ID()) || !b.IsMember(hs[0].ID()) {
			t.Fatal("members of one passphrase not admitted")
		}
		for _, w := range []struct {
			h host.Host
			m *Membership
		}{{hs[2], w1}, {hs[3], w2}} {
			if a.IsMember(w.h.ID()) || w.m.IsMember(hs[0].ID()) || isConnected(hs[0], w.h) {
				t.Fatalf("another passphrase's peer %s admitted or still connected", w.h.ID())
			}
		}
		if st := a.Stats(); st.Members != 1 || st.Refused != 2 {
			t.Fatalf("member's stats %+v, want 1 member and 2 refusals", st)
		}
	})
}

// TestHandshakeWrongKey: a dialer holding another key sends its proof and
// gets neither the listener's proof nor membership; a listener holding
// another key is refused by the member that dialed it, which records the
// refusal.
func TestHandshakeWrongKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn, hs := mockPeers(t, 3)
		key, wrong := GenerateMeshKey(), GenerateMeshKey()
		member := joinMesh(t, hs[0], key)
		listener := joinMesh(t, hs[2], wrong)

		// A wrong-key dialer, by hand, to see what the member sends.
		connectPeers(t, mn, hs[1], hs[0])
		st := memberStream(t, hs[1], hs[0].ID(), MemberProtocol)
		tr := transcriptOf(st.Conn(), true)
		tr.nd, tr.nl = randomBytes(nonceLen), make([]byte, nonceLen)
		if _, err := st.Write(tr.nd); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(st, tr.nl); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write(tr.proof(MeshSubkey(wrong, handshakeSubkey), roleDialer)); err != nil {
			t.Fatal(err)
		}
		if rest := readRest(st); len(rest) != 0 {
			t.Fatalf("the member answered a wrong proof with %d bytes", len(rest))
		}

		// The member dials a wrong-key listener.
		connectPeers(t, mn, hs[0], hs[2])
		synctest.Wait()
		if member.IsMember(hs[1].ID()) || member.IsMember(hs[2].ID()) || listener.IsMember(hs[0].ID()) {
			t.Fatal("a wrong key was admitted")
		}
		if isConnected(hs[0], hs[1]) || isConnected(hs[0], hs[2]) {
			t.Fatal("a wrong-key peer is still connected")
		}
		if st := member.Stats(); st.Refused != 2 || st.Members != 0 {
			t.Fatalf("member's stats %+v, want 2 refusals", st)
		}
		if st := listener.Stats(); st.Refused != 1 {
			t.Fatalf("wrong-key listener's stats %+v: it refused the member's proof", st)
		}
	})
}

// TestHandshakePendingWindow: a dialer that connects and never opens the
// handshake, and one that sends its nonce and stalls, are outsiders for
// the whole window (the guard refuses them) and are disconnected when it
// closes, not before.
func TestHandshakePendingWindow(t *testing.T) {
	for _, opens := range []bool{false, true} {
		t.Run(map[bool]string{false: "never opens", true: "stalls after its nonce"}[opens], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mn, hs := mockPeers(t, 2)
				member, staller := hs[0], hs[1]
				m := joinMesh(t, member, GenerateMeshKey())
				served := 0
				guarded := m.Guard(func(context.Context, peer.ID, *InferRequest, func(InferPiece) error) (*InferFinal, error) {
					served++
					return &InferFinal{}, nil
				})
				connectPeers(t, mn, staller, member)
				if opens {
					st := memberStream(t, staller, member.ID(), MemberProtocol)
					if _, err := st.Write(randomBytes(nonceLen)); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(handshakeTimeout - time.Millisecond)
				synctest.Wait()
				if !isConnected(member, staller) || m.IsMember(staller.ID()) {
					t.Fatalf("just before the window closes: connected %v, member %v", isConnected(member, staller), m.IsMember(staller.ID()))
				}
				if _, err := guarded(t.Context(), staller.ID(), &InferRequest{}, nil); !errors.Is(err, ErrBusy) || served != 0 {
					t.Fatalf("a pending peer's request: %v (served %d), want ErrBusy", err, served)
				}
				time.Sleep(2 * time.Millisecond)
				synctest.Wait()
				if isConnected(member, staller) || m.Stats().Refused != 1 {
					t.Fatalf("after the window: connected %v, stats %+v", isConnected(member, staller), m.Stats())
				}
			})
		})
	}
}

// TestHandshakeProofBoundToConnection: a proof made for one connection is
// refused on any other. An outsider that relays a member's handshake to
// another member (a MITM between two members) gets the second member to
// refuse it, and no proof from it; a proof made with the right key for
// another peer ID (a dialer's for another dialer, a listener's for
// another listener) is refused by either side.
func TestHandshakeProofBoundToConnection(t *testing.T) {
	t.Run("relay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mn, hs := mockPeers(t, 3)
			victim, mitm, target := hs[0], hs[1], hs[2]
			key := GenerateMeshKey()
			vm, tm := joinMesh(t, victim, key), joinMesh(t, target, key)
			var fromTarget atomic.Int64
			mitm.SetStreamHandler(MemberProtocol, func(in network.Stream) {
				out, err := mitm.NewStream(t.Context(), target.ID(), MemberProtocol)
				if err != nil {
					_ = in.Reset()
					return
				}
				go func() { _, _ = io.Copy(out, in); _ = out.CloseWrite() }()
				n, _ := io.Copy(in, out)
				fromTarget.Add(n)
				_ = in.Reset()
			})
			connectPeers(t, mn, mitm, target)
			connectPeers(t, mn, victim, mitm)
			synctest.Wait()
			if tm.IsMember(mitm.ID()) || vm.IsMember(mitm.ID()) {
				t.Fatal("the relaying outsider was admitted")
			}
			if n := fromTarget.Load(); n > nonceLen {
				t.Fatalf("the target sent the relay %d bytes: more than its nonce", n)
			}
			if st := tm.Stats(); st.Refused < 1 || isConnected(target, mitm) {
				t.Fatalf("the target did not refuse the relay: %+v", st)
			}
		})
	})
	for _, dialerForges := range []bool{true, false} {
		name := map[bool]string{true: "dialer proof for another dialer", false: "listener proof for another listener"}[dialerForges]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mn, hs := mockPeers(t, 3)
				honest, forger, third := hs[0], hs[1], hs[2]
				key := GenerateMeshKey()
				hkey := MeshSubkey(key, handshakeSubkey)
				m := joinMesh(t, honest, key)
				// bind rewrites the transcript as if the forger's side were
				// the third peer.
				bind := func(tr *handshakeTranscript) {
					if dialerForges {
						tr.dialer = third.ID()
					} else {
						tr.listener = third.ID()
					}
				}
				if dialerForges {
					connectPeers(t, mn, forger, honest)
					st := memberStream(t, forger, honest.ID(), MemberProtocol)
					tr := transcriptOf(st.Conn(), true)
					tr.nd, tr.nl = randomBytes(nonceLen), make([]byte, nonceLen)
					_, _ = st.Write(tr.nd)
					if _, err := io.ReadFull(st, tr.nl); err != nil {
						t.Fatal(err)
					}
					bind(tr)
					_, _ = st.Write(tr.proof(hkey, roleDialer))
					if rest := readRest(st); len(rest) != 0 {
						t.Fatalf("the member answered a proof bound to another dialer with %d bytes", len(rest))
					}
				} else {
					forger.SetStreamHandler(MemberProtocol, func(st network.Stream) {
						tr := transcriptOf(st.Conn(), false)
						tr.nd, tr.nl = make([]byte, nonceLen), randomBytes(nonceLen)
						if _, err := io.ReadFull(st, tr.nd); err != nil {
							return
						}
						_, _ = st.Write(tr.nl)
						if _, err := io.ReadFull(st, make([]byte, proofLen)); err != nil {
							return
						}
						bind(tr)
						_, _ = st.Write(tr.proof(hkey, roleListener))
						_ = st.Close()
					})
					connectPeers(t, mn, honest, forger)
				}
				synctest.Wait()
				if m.IsMember(forger.ID()) || isConnected(honest, forger) || m.Stats().Refused != 1 {
					t.Fatalf("a proof bound to another peer: member %v, connected %v, stats %+v", m.IsMember(forger.ID()), isConnected(honest, forger), m.Stats())
				}
			})
		})
	}
}

// TestHandshakeOldProtocolFailsClosed: a peer that speaks version 1 of the
// handshake only (the listener proved first) cannot join a mesh of
// version-2 peers, whichever side dials: it is refused at the end of the
// window, never admitted.
func TestHandshakeOldProtocolFailsClosed(t *testing.T) {
	const v1 = "/meshllm/member/1.0.0"
	synctest.Test(t, func(t *testing.T) {
		mn, hs := mockPeers(t, 3)
		key := GenerateMeshKey()
		m := joinMesh(t, hs[0], key)
		for _, old := range hs[1:] {
			old.SetStreamHandler(v1, func(st network.Stream) { _, _ = io.Copy(io.Discard, st) })
		}
		connectPeers(t, mn, hs[1], hs[0]) // old dials new
		if _, err := hs[1].NewStream(t.Context(), hs[0].ID(), v1); err == nil {
			t.Fatal("the new peer answered the old protocol")
		}
		connectPeers(t, mn, hs[0], hs[2]) // new dials old
		time.Sleep(handshakeTimeout + time.Second)
		synctest.Wait()
		for _, old := range hs[1:] {
			if m.IsMember(old.ID()) || isConnected(hs[0], old) {
				t.Fatalf("old peer %s admitted or still connected", old.ID())
			}
		}
		if st := m.Stats(); st.Refused != 2 {
			t.Fatalf("stats %+v, want 2 refusals", st)
		}
	})
}

// BenchmarkPassphraseGuess is the work of an attacker grinding a
// passphrase against one captured dialer proof (a victim dialed it): per
// guess, the argon2id derivation, the subkey and the proof. It reports
// guesses/s on this machine; docs/security.md quotes it:
//
//	go test ./p2p -run '^$' -bench PassphraseGuess -benchtime 10x
func BenchmarkPassphraseGuess(b *testing.B) {
	tr := &handshakeTranscript{dialer: "dialer", listener: "listener", nd: randomBytes(nonceLen), nl: randomBytes(nonceLen)}
	captured := randomBytes(proofLen)
	for i := 0; b.Loop(); i++ {
		key, err := MeshKeyFromPassphrase(fmt.Appendf(nil, "guess number %08d", i))
		if err != nil {
			b.Fatal(err)
		}
		if tr.check(MeshSubkey(key, handshakeSubkey), roleDialer, captured) == nil {
			b.Fatal("a random proof verified")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "guesses/s")
}
